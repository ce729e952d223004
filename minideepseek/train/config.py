"""Stage 5 config: the ``train:`` section (model size, batch, schedule, evaluation, checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import ConfigError, require
from ..runconfig import RunConfig


@dataclass(frozen=True)
class MixturePhase:
    """One phase of ``train.mixture``: source weights in training tokens until the phase's end, given
    as ``until`` (a fraction of max_steps), ``until_step`` (an absolute step) or ``until_tokens``
    (training tokens since step 1). Used only with ``pack.by_source: true`` data (train/mixture.py)."""

    until: float | None = None
    until_step: int | None = None
    until_tokens: int | None = None
    weights: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.weights.values()),
                f"train.mixture weights must be numbers, got {self.weights}")
        ends = [k for k in ("until", "until_step", "until_tokens") if getattr(self, k) is not None]
        require(len(ends) == 1, f"train.mixture phase {dict(self.weights)}: give exactly one of until (fraction of "
                                f"the run), until_step or until_tokens; got {ends or 'none'}")
        require(self.until is None or 0 < self.until <= 1.0,
                f"train.mixture until={self.until} must be a fraction of the run in (0, 1]")
        require(self.until_step is None or self.until_step > 0, f"train.mixture until_step={self.until_step} must be > 0")
        require(self.until_tokens is None or self.until_tokens > 0,
                f"train.mixture until_tokens={self.until_tokens} must be > 0")

    def fraction(self, max_steps: int, tokens_per_step: int) -> float:
        """The phase's end as a fraction of the run (what the sampler schedules: it ends the phase at
        step round(fraction * max_steps)). ``until_tokens`` ends at the step that holds that many
        training tokens, rounded to the nearest step."""
        if self.until is not None:
            return float(self.until)
        step = self.until_step if self.until_step is not None else round(self.until_tokens / tokens_per_step)
        if not 0 < step <= max_steps:
            what = (f"until_step={self.until_step}" if self.until_step is not None else
                    f"until_tokens={self.until_tokens:,} (step {step} at {tokens_per_step:,} tokens/step)")
            raise ConfigError(f"train.mixture {what} is outside the run's steps 1-{max_steps}; lower it or raise "
                              f"train.max_steps")
        return step / max_steps


@dataclass(frozen=True)
class TrainConfig:
    """Defaults are the offline demo's: ~3.5 min on 2 CPU cores with the ~95K demo vocabulary,
    where the tied embedding (12.2M of 12.6M parameters) and its output projection dominate."""

    # These change how the run is executed or reported, not the weights it produces: thread count
    # (fixed per run), when checkpoints are written, resuming (resume reproduces the uninterrupted
    # run exactly: tested), stopping early to resume later, the exit code, the doc-mask benchmark.
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("num_threads", "checkpoint_interval", "resume", "stop_at_step",
                                            "fail_on_criteria", "bench_steps", "log_interval")

    # model (vocab_size comes from the stage-3 tokenizer, never from here)
    n_layer: int = 2
    d_model: int = 128
    n_head: int = 4
    rope_theta: float = 10_000.0
    # data: seq_len <= the packed seq_len; shorter reads each block as seq_len windows (loader.py)
    seq_len: int = 256
    micro_batch: int = 4  # sequences per rank per forward
    grad_accum: int = 1  # micro-batches per optimizer step; global batch = micro_batch * grad_accum * ranks
    val_blocks: int = 16  # packed blocks held out (all their windows): never trained on
    val_windows_per_block: int = 2  # windows of each held-out block evaluated (evenly spaced); 0 = all
    doc_mask: bool = True  # block-diagonal causal attention per document + positions reset per document
    # optimization: AdamW (betas 0.9/0.95), linear warmup then cosine to min_lr at max_steps
    max_steps: int = 200
    lr: float = 3e-3
    warmup: int = 20
    min_lr: float = 3e-4
    weight_decay: float = 0.1  # on matrices and the (tied) embedding; not on norms
    grad_clip: float = 1.0  # max global grad norm; 0 = off
    loss_chunk: int = 1024  # positions per chunk of the output projection + cross-entropy
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"  # auto: bf16 autocast on CUDA, float32 on CPU
    device: Literal["auto", "cpu", "cuda"] = "auto"
    eval_interval: int = 50  # validation loss at step 0, every eval_interval steps and at the end
    decode_samples: int = 10  # random packed training samples decoded into the report
    generate_tokens: int = 40  # tokens the trained model generates per prompt in the report
    # execution
    num_threads: int = 0  # torch CPU threads per rank; 0 = cores / ranks on this node
    checkpoint_interval: int = 50  # steps between resumable checkpoints; 0 = only at the end / stop
    resume: bool = True  # continue from the latest matching checkpoint of an interrupted run
    stop_at_step: int = 0  # stop after this step with a checkpoint, commit nothing (resume later); 0 = off
    fail_on_criteria: bool = True  # exit 1 when a pass criterion fails (the report is still written)
    bench_steps: int = 3  # forward+backward steps timed with and without the doc mask; 0 = skip
    log_interval: int = 10
    # per-source mixture (only for pack.by_source data; empty = one phase with the recipe weights of
    # stage 1): [{until: 0.8, weights: {src: w, ...}}, {until: 1.0, weights: {...}}]
    mixture: tuple[MixturePhase, ...] = ()
    max_epochs_per_source: float = 16.0  # error above this many epochs of a source (warning above 4)
    # Small data (train/autosize.py, sizing.py): seq_len to the packed block length, val_blocks to at most
    # val_share of the blocks, max_steps to max_epochs passes over the training windows; each said in the
    # log and the summary. false: the values as set (a config that does not fit is an error).
    auto_size: bool = True
    max_epochs: float = 4.0
    val_share: float = 0.1

    def __post_init__(self) -> None:
        require(self.n_layer >= 1 and self.d_model >= 8 and self.n_head >= 1, "train: need n_layer >= 1, "
                "d_model >= 8, n_head >= 1")
        require(self.d_model % self.n_head == 0 and (self.d_model // self.n_head) % 2 == 0,
                f"train.d_model={self.d_model} must split into n_head={self.n_head} heads of even size "
                f"(e.g. d_model 128 with n_head 4)")
        require(self.seq_len >= 8, f"train.seq_len={self.seq_len} must be >= 8")
        require(self.micro_batch >= 1 and self.grad_accum >= 1, "train.micro_batch and train.grad_accum must be >= 1")
        require(self.val_blocks >= 1, "train.val_blocks must be >= 1: the validation loss needs held-out blocks")
        require(self.val_windows_per_block >= 0, "train.val_windows_per_block must be >= 0 (0 = all windows)")
        require(self.max_steps >= 1, "train.max_steps must be >= 1")
        require(0 < self.min_lr <= self.lr, f"train: need 0 < min_lr ({self.min_lr}) <= lr ({self.lr})")
        require(0 <= self.warmup < self.max_steps, f"train.warmup={self.warmup} must be in [0, max_steps)")
        require(self.weight_decay >= 0 and self.grad_clip >= 0, "train.weight_decay and train.grad_clip must be >= 0")
        require(self.loss_chunk >= 1, "train.loss_chunk must be >= 1 (1024 default)")
        require(self.eval_interval >= 1, "train.eval_interval must be >= 1")
        require(self.decode_samples >= 0 and self.generate_tokens >= 0, "train.decode_samples/generate_tokens >= 0")
        require(self.num_threads >= 0, "train.num_threads must be >= 0 (0 = cores / ranks)")
        require(self.checkpoint_interval >= 0, "train.checkpoint_interval must be >= 0")
        require(0 <= self.stop_at_step < self.max_steps or self.stop_at_step == 0,
                f"train.stop_at_step={self.stop_at_step} must be 0 (off) or below max_steps={self.max_steps}")
        require(self.max_epochs_per_source > 0, "train.max_epochs_per_source must be > 0 (16 default)")
        require(self.bench_steps >= 0 and self.log_interval >= 1, "train.bench_steps >= 0, train.log_interval >= 1")
        require(self.max_epochs > 0, f"train.max_epochs={self.max_epochs} must be > 0 (4 default)")
        require(0 < self.val_share < 1, f"train.val_share={self.val_share} must be in (0, 1) (0.1 default)")


@dataclass(frozen=True)
class TrainStageConfig:
    run: RunConfig = field(default_factory=RunConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
