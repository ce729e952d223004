"""The training loop: AdamW, warmup + cosine, grad accumulation under DDP, evaluation, checkpoints.

Exact resume. A checkpoint holds the model, the optimizer, the step, the loader state
``(epoch, position)`` and the history so far; nothing else in a step is random (no dropout; the
learning rate is a function of the step). So a run resumed at step s computes, on CPU with
deterministic algorithms and the same thread count, the same losses bit for bit as one that never
stopped (tested). A checkpoint is only used when it was written under the same config hash, the same
packed data and the same number of ranks; otherwise it is ignored with a warning.

Checkpoints of a running stage live in ``data/<run>/smoke_train.ckpt/`` (not in the stage's temp
dir, which the next run deletes); the committed artifact carries the final one as ``checkpoint.pt``.

Compiling (``train.compile``, on for CUDA by default). ``model.compile()`` before DDP wraps it (the
order PyTorch documents), ``fullgraph=True`` so a graph break is an error rather than a silent
slowdown, static shapes. Only the training step goes through the compiled ``__call__``: evaluation,
the mask benchmark and generation call ``model.forward`` / ``model.hidden``, the eager module,
because under ``no_grad`` and other batch shapes they would each compile another graph. The step is
compiled before step 1 on a batch of the training shape (``compile_step``), so compile time is
reported on its own and never counted in tokens/s. A resumed run compiles again (same data order,
same losses within bf16 noise on a GPU; on CPU compiling is off by default and resume is bit-exact).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from ..config import ConfigError
from ..fsio import printable, write_json_atomic
from ..provenance import peak_rss_mb
from .config import TrainConfig
from .dist import DistEnv
from .heap import HeapGuard, keep_heap
from .ledger import digest_words, token_digest, words_digest
from .loader import Batch, LoaderState, RankLoader, SamplePlan, val_batches
from .mixture import MixtureRankLoader
from .model import GPT, AttentionKind, ModelConfig

log = logging.getLogger(__name__)

KEEP_CHECKPOINTS = 2
# torch.compile options of the training step. fullgraph: no graph breaks (they are errors); dynamic:
# False: every training micro-batch has the same shape. Tests add backend="aot_eager" (same graph
# capture and autograd tracing, no code generation: seconds on CPU instead of a minute).
COMPILE_OPTIONS: dict[str, Any] = {"fullgraph": True, "dynamic": False}


@dataclass
class TrainResult:
    status: str  # "done" | "stopped" (stop_at_step) | "nonfinite" (a loss was NaN/inf; training stopped)
    model: GPT
    optimizer: torch.optim.Optimizer
    step: int
    loader_state: LoaderState
    history: list[dict[str, Any]] = field(default_factory=list)  # one per optimizer step
    val: list[dict[str, Any]] = field(default_factory=list)  # {"step", "val_loss", "tokens"}
    # {"step", "samples": [[rank 0 ...], ...], "token_hash": [rank 0's digest, ...]} (ledger.py)
    batches: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: int | None = None
    train_s: float = 0.0  # this process's time in training steps (evaluation excluded)
    eval_s: float = 0.0
    heap: dict[str, Any] = field(default_factory=dict)  # HeapGuard.to_json(): trims of a drifting CPU heap
    attention: AttentionKind = "sdpa"
    compiled: bool = False
    compile_s: float | None = None  # compiling the training step (compile_step), None when not compiled


def resolve_device(tc: TrainConfig) -> tuple[str, torch.dtype | None]:
    """(device kind, autocast dtype or None). auto = CUDA with bf16 autocast when present, else CPU
    in float32 (bf16 on CPU is slower here and would make the bit-exact resume test meaningless)."""
    kind = tc.device
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        from ..config import ConfigError

        raise ConfigError("train.device=cuda but torch sees no GPU; set train.device=auto or cpu")
    dtype = tc.dtype
    if dtype == "auto":
        dtype = "bfloat16" if kind == "cuda" else "float32"
    return kind, (torch.bfloat16 if dtype == "bfloat16" else None)


def resolve_execution(tc: TrainConfig, kind: str) -> tuple[AttentionKind, bool]:
    """(attention path, compile the model?) for device ``kind``: auto = FlexAttention and compiled on
    CUDA; the dense SDPA mask, eager, on CPU (today's path: bit-exact resume, unchanged figures)."""
    attention: AttentionKind = ("flex" if kind == "cuda" else "sdpa") if tc.attention == "auto" else tc.attention
    if attention == "flex" and kind != "cuda":
        raise ConfigError("train.attention=flex needs a CUDA device: FlexAttention has no backward on CPU; "
                          "set train.attention=auto or sdpa")
    compiled = kind == "cuda" if tc.compile == "auto" else bool(tc.compile)
    return attention, compiled


def setup_torch(tc: TrainConfig, kind: str, env: DistEnv) -> int:
    """Threads, denormals, determinism. Returns the CPU thread count used."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", env.world))
    threads = tc.num_threads or max(1, (os.cpu_count() or 1) // max(1, local))
    torch.set_num_threads(threads)
    # Measured: default-init softmax gradients underflow to denormals on CPU, 20 s a step.
    torch.set_flush_denormal(True)
    if kind == "cpu":
        torch.use_deterministic_algorithms(True)
        keep_heap()
    return threads


def model_config(tc: TrainConfig, vocab_size: int) -> ModelConfig:
    return ModelConfig(vocab_size=vocab_size, n_layer=tc.n_layer, d_model=tc.d_model, n_head=tc.n_head,
                       max_seq_len=tc.seq_len, rope_theta=tc.rope_theta)


def build_model(tc: TrainConfig, vocab_size: int, seed: int, attention: AttentionKind = "sdpa") -> GPT:
    torch.manual_seed(seed)
    return GPT(model_config(tc, vocab_size), attention)


def make_optimizer(model: GPT, tc: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=tc.lr, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Learning rate of optimizer step ``step`` (1-based): linear warmup, cosine to min_lr."""
    if tc.warmup and step <= tc.warmup:
        return tc.lr * step / tc.warmup
    frac = (step - tc.warmup) / max(1, tc.max_steps - tc.warmup)
    return tc.min_lr + 0.5 * (tc.lr - tc.min_lr) * (1 + math.cos(math.pi * min(1.0, frac)))


def to_device(b: Batch, device: torch.device, doc_mask: bool,
              single_doc_causal: bool = True) -> tuple[torch.Tensor | None, ...]:
    """(tokens, targets, segments, positions) on ``device``. Segments and positions are None without
    the document mask, and (``single_doc_causal``) when every window holds one document: plain causal
    attention is then the same thing (positions are 0..T-1 too) and lets SDPA use its causal kernel.
    Decided here, from the host's arrays: in the model it would be a GPU sync and a graph break. A
    compiled step keeps the segments (``single_doc_causal=False``): one graph for every batch."""
    pin = device.type == "cuda"

    def t(a: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(a)
        return (x.pin_memory() if pin else x).to(device, non_blocking=pin)

    layout = doc_mask and (not single_doc_causal or bool(b.segments.any()))
    return t(b.tokens), t(b.targets), (t(b.segments) if layout else None), (t(b.positions) if layout else None)


def memory_mb(device: torch.device) -> float:
    """Peak memory so far: CUDA allocator peak on a GPU, peak RSS (ru_maxrss) on CPU."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return peak_rss_mb()


@torch.no_grad()
def evaluate(model: GPT, plan: SamplePlan, tc: TrainConfig, env: DistEnv, amp: torch.dtype | None) -> tuple[float, int]:
    """Token-mean loss over all held-out samples (each rank a share, summed across ranks)."""
    model.eval()
    acc = torch.zeros(2, dtype=torch.float64, device=env.device)
    for b in val_batches(plan, tc.micro_batch, env.rank, env.world, tc.doc_mask):
        x, y, seg, pos = to_device(b, env.device, tc.doc_mask)
        with torch.autocast(env.device.type, dtype=amp or torch.float32, enabled=amp is not None):
            loss = model.forward(x, y, seg, pos, tc.loss_chunk)  # eager, also when the step is compiled
        n = int((y != -100).sum())
        acc += torch.tensor([float(loss) * n, n], dtype=torch.float64, device=env.device)
    env.all_reduce_sum(acc)
    model.train()
    return float(acc[0] / acc[1].clamp(min=1)), int(acc[1])


class Checkpoints:
    """Resumable checkpoints in a work dir next to the artifact (rank 0 writes; all ranks read).

    Each ``step-N.pt`` has a small ``step-N.json`` beside it with its identity, written after it,
    so finding the checkpoint to resume reads a few bytes instead of loading gigabytes."""

    def __init__(self, work_dir: Path, identity: dict[str, Any]) -> None:
        self.dir, self.identity = work_dir, identity

    def paths(self) -> list[Path]:
        """Complete checkpoints (their .json written), oldest first."""
        if not self.dir.is_dir():
            return []
        return [j.with_suffix(".pt") for j in sorted(self.dir.glob("step-*.json")) if j.with_suffix(".pt").is_file()]

    def save(self, payload: dict[str, Any], step: int) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"step-{step:07d}.pt"
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        torch.save(payload, tmp)
        os.replace(tmp, path)  # a reader never sees half a checkpoint
        write_json_atomic(path.with_suffix(".json"), {"step": step, "identity": self.identity})
        for old in self.paths()[:-KEEP_CHECKPOINTS]:
            old.with_suffix(".json").unlink(missing_ok=True)
            old.unlink(missing_ok=True)
        log.info("checkpoint %s", path)
        return path

    def latest(self) -> str | None:
        """The newest checkpoint if it was written under the same identity, else None (logged)."""
        paths = self.paths()
        if not paths:
            return None
        try:
            meta = json.loads(paths[-1].with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise CheckpointError(f"checkpoint record {printable(str(paths[-1].with_suffix('.json')))} is unreadable "
                                  f"({type(exc).__name__}); {_FRESH}") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("step"), int):
            raise CheckpointError(f"checkpoint record {printable(str(paths[-1].with_suffix('.json')))} is malformed; "
                                  f"{_FRESH}")
        if meta.get("identity") != self.identity:
            log.warning("ignoring checkpoint %s: written for a different config, packed data or rank count "
                        "(%s != %s)", paths[-1], meta.get("identity"), self.identity)
            return None
        return str(paths[-1])


def compile_step(step_model: torch.nn.Module, tc: TrainConfig, device: torch.device, autocast: Any) -> float:
    """Compile the training step before step 1; returns the seconds it took.

    One forward + backward on a batch of the training shape (token 0, one document: the graph
    depends on shapes and dtypes, not values); its gradients are dropped and nothing else changes (no
    optimizer step, no data read). Under DDP every rank calls it, so the gradient all-reduce matches."""
    B, T = tc.micro_batch, tc.seq_len

    def zeros() -> torch.Tensor:  # a tensor each: aliased inputs would be guarded on and recompile at step 1
        return torch.zeros(B, T, dtype=torch.int64, device=device)

    seg = zeros() if tc.doc_mask else None
    pos = torch.arange(T, device=device).expand(B, T).contiguous() if tc.doc_mask else None
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.time()
    try:
        with autocast():
            loss = step_model(zeros(), zeros(), seg, pos, tc.loss_chunk)
        loss.backward()
    except Exception as exc:
        raise RuntimeError(f"torch.compile of the training step failed ({type(exc).__name__}); rerun with "
                           f"--set train.compile=false (FlexAttention still applies the document mask)") from exc
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    step_model.zero_grad(set_to_none=True)
    return time.time() - t0


def train(tc: TrainConfig, plan: SamplePlan, vocab_size: int, seed: int, env: DistEnv,
          ckpts: Checkpoints, amp: torch.dtype | None, mixture: Any = None,
          attention: AttentionKind = "sdpa", compiled: bool = False) -> TrainResult:
    """Run (or resume) the training loop; every rank calls it, rank 0 keeps the history.
    ``attention``/``compiled``: how the steps run (``resolve_execution``), not what they compute."""
    model = build_model(tc, vocab_size, seed, attention).to(env.device)
    opt = make_optimizer(model, tc)
    res = TrainResult("done", model, opt, 0, LoaderState(), attention=attention, compiled=compiled)
    _resume(res, tc, env, ckpts)
    if compiled:
        model.compile(**COMPILE_OPTIONS)  # before DDP wraps it; state_dict keys stay unprefixed
    ddp = DDP(model, device_ids=[env.local_rank] if env.device.type == "cuda" else None) if env.world > 1 else model
    # per-source data (pack.by_source) draws through the mixture sampler (train/mixture.py)
    loader = (MixtureRankLoader(plan, mixture, env.rank, res.loader_state) if mixture is not None
              else RankLoader(plan, tc.micro_batch, env.rank, env.world, res.loader_state))
    tokens_per_step = tc.micro_batch * tc.seq_len * tc.grad_accum * env.world
    autocast = (lambda: torch.autocast(env.device.type, dtype=amp, enabled=True)) if amp else contextlib.nullcontext

    def run_eval(step: int) -> None:
        t0 = time.time()
        vl, n = evaluate(model, plan, tc, env, amp)
        res.eval_s += time.time() - t0
        res.val.append({"step": step, "val_loss": vl, "tokens": n})
        log.info("step %d: validation loss %.4f over %s held-out tokens (%.1f s)", step, vl, f"{n:,}", time.time() - t0)

    # CPU only: bounds a heap that keeps one step's high-water mark per glibc arena (train/heap.py)
    guard = HeapGuard(enabled=env.device.type == "cpu")
    if res.step == 0:
        run_eval(0)
    if compiled and res.step < tc.max_steps:
        log.info("compiling the training step (torch.compile, %s attention)", attention)
        res.compile_s = compile_step(ddp, tc, env.device, autocast)
        log.info("compiled in %.1f s (not counted in tokens/s)", res.compile_s)
    for step in range(res.step + 1, tc.max_steps + 1):
        t0 = time.time()
        lr = lr_at(step, tc)
        for g in opt.param_groups:
            g["lr"] = lr
        loss_sum, mine, toks = _accumulate(ddp, loader, tc, env, autocast, compiled)
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip if tc.grad_clip > 0 else float("inf"))
        opt.step()
        opt.zero_grad(set_to_none=True)
        mean_loss = float(env.all_reduce_sum(loss_sum) / (tc.grad_accum * env.world))
        samples = env.all_gather(torch.from_numpy(np.concatenate(mine)).to(env.device))
        # the step ledger (ledger.py): what each rank trained on, checkable by a replay of the schedule
        digests = env.all_gather(torch.from_numpy(digest_words(token_digest(toks))).to(env.device))
        dt = time.time() - t0
        res.train_s += dt
        guard.after_step()
        res.heap = guard.to_json()
        res.step, res.loader_state = step, loader.state
        res.history.append({"step": step, "loss": mean_loss, "lr": lr, "grad_norm": float(gnorm),
                            "tokens": step * tokens_per_step, "tokens_per_s": round(tokens_per_step / dt, 1),
                            "step_s": round(dt, 4), "mem_mb": memory_mb(env.device)})
        res.batches.append({"step": step, "samples": [s.cpu().tolist() for s in samples],
                            "token_hash": [words_digest(d.cpu().numpy()) for d in digests]})
        if step % tc.log_interval == 0 or step == 1:
            log.info("step %d/%d loss %.4f lr %.2e grad norm %.2f %s tok/s mem %.0f MB", step, tc.max_steps,
                     mean_loss, lr, float(gnorm), f"{tokens_per_step / dt:,.0f}", res.history[-1]["mem_mb"])
        if not math.isfinite(mean_loss):
            log.error("step %d: loss is %s; stopping (see the report's failure notes)", step, mean_loss)
            res.status = "nonfinite"
            break
        if step % tc.eval_interval == 0 or step == tc.max_steps:
            run_eval(step)
        stop = step == tc.stop_at_step
        if env.is_main and (stop or (tc.checkpoint_interval and step % tc.checkpoint_interval == 0
                                     and step < tc.max_steps)):
            ckpts.save(resume_payload(res), step)
        if stop:
            log.warning("stopped after step %d (train.stop_at_step); rerun with train.resume=true to continue", step)
            res.status = "stopped"
            break
    env.barrier()
    return res


def _resume(res: TrainResult, tc: TrainConfig, env: DistEnv, ckpts: Checkpoints) -> None:
    """With ``train.resume``, the latest checkpoint's model, optimizer, loader state and history into ``res``
    (rank 0 picks the checkpoint, every rank loads it); nothing when there is none."""
    path = env.broadcast_object(ckpts.latest() if tc.resume and env.is_main else None)  # rank 0 decides
    if path is None:
        return
    payload = load_checkpoint(path)
    check_resume_payload(payload, path)
    log.info("resuming from %s (step %d)", path, payload["step"])
    try:
        res.model.load_state_dict(payload["model"])
        res.optimizer.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:  # shapes or names of another model
        raise CheckpointError(f"checkpoint {printable(str(path))} does not fit this model and optimizer "
                              f"({type(exc).__name__}: {_first_line(exc)}); {_FRESH}") from None
    res.step, res.loader_state = payload["step"], LoaderState(**payload["loader_state"])
    res.history, res.val, res.batches = payload["history"], payload["val"], payload["batches"]
    res.resumed_from = res.step


def _accumulate(ddp: Any, loader: Any, tc: TrainConfig, env: DistEnv, autocast: Any,
                compiled: bool) -> tuple[torch.Tensor, list[np.ndarray], list[np.ndarray]]:
    """One optimizer step's forward/backward over ``grad_accum`` micro-batches (gradients synchronized on the
    last one only); returns the summed loss and the micro-batches' sample ids and tokens (the ledger's)."""
    loss_sum = torch.zeros((), dtype=torch.float32, device=env.device)
    mine, toks = [], []
    for micro in range(tc.grad_accum):
        b = loader.next_batch(tc.doc_mask)
        mine.append(b.samples)
        toks.append(b.tokens)
        x, y, seg, pos = to_device(b, env.device, tc.doc_mask, single_doc_causal=not compiled)
        sync = micro == tc.grad_accum - 1 or env.world == 1
        with (contextlib.nullcontext() if sync else ddp.no_sync()), autocast():
            loss = ddp(x, y, seg, pos, tc.loss_chunk)
        (loss / tc.grad_accum).backward()
        loss_sum += loss.detach().float()
    return loss_sum, mine, toks


class CheckpointError(ConfigError):
    """A checkpoint cannot be used: truncated, damaged, or not shaped like the ones this trainer writes."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint holds something other than tensors and plain types (it could run code)."""


_FRESH = "delete it (or set train.resume=false) to start fresh"
# what resume_payload writes, and the type each key must have
_RESUME_KEYS = {"model": dict, "optimizer": dict, "step": int, "loader_state": dict, "history": list, "val": list,
                "batches": list}


def _first_line(exc: BaseException) -> str:
    return printable((str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``: only tensors, numbers, strings, lists, tuples and
    dicts are unpickled, so a checkpoint handed over by someone else cannot run code when resumed
    (``weights_only=False`` would call whatever the pickle names). Every payload we write is such
    plain types (``resume_payload``/``final_checkpoint``); anything else is refused in one line, as is a
    truncated or damaged file (exit 2, never a traceback). Paths and torch's words are printed with
    control characters escaped: a crafted file name or pickle must not write to the terminal."""
    import pickle

    where = printable(str(path))
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch's message is a multi-line how-to-override; keep only what was refused
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        detail = re.search(r"WeightsUnpickler error: ([^\n.]+)", str(exc))
        reason = (f"it names the callable {printable(found.group(1))}" if found
                  else printable(detail.group(1).strip()) if detail else type(exc).__name__)
        raise UnsafeCheckpointError(
            f"refusing to load checkpoint {where}: it holds objects other than tensors and plain types "
            f"({reason}); it was not written by this trainer, or was tampered with. Delete it (or set "
            f"train.resume=false) to start fresh; never load it with weights_only=False") from None
    except Exception as exc:  # noqa: BLE001 - a cut file (no zip directory), not a torch file, an I/O error
        raise CheckpointError(f"cannot load checkpoint {where}: {type(exc).__name__}: {_first_line(exc)}; it is "
                              f"truncated or damaged: {_FRESH}") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"checkpoint {where} holds a {type(payload).__name__}, not this trainer's payload; "
                              f"{_FRESH}")
    return payload


def check_resume_payload(payload: dict[str, Any], path: str | Path) -> None:
    """A resume checkpoint must carry every key ``resume_payload`` writes, with its type."""
    bad = [k for k, t in _RESUME_KEYS.items() if not isinstance(payload.get(k), t) or isinstance(payload.get(k), bool)]
    ls = payload.get("loader_state")
    if isinstance(ls, dict) and set(ls) != {"epoch", "position"}:
        bad.append("loader_state")
    if bad:
        raise CheckpointError(f"checkpoint {printable(str(path))} is malformed (missing or wrong: {', '.join(bad)}); "
                              f"{_FRESH}")


def resume_payload(res: TrainResult) -> dict[str, Any]:
    return {"model": res.model.state_dict(), "optimizer": res.optimizer.state_dict(), "step": res.step,
            "loader_state": {"epoch": res.loader_state.epoch, "position": res.loader_state.position},
            "history": res.history, "val": res.val, "batches": res.batches}


def final_checkpoint(res: TrainResult, identity: dict[str, Any], model_cfg: ModelConfig) -> dict[str, Any]:
    """What the artifact's checkpoint.pt holds: weights, optimizer, loader state, no timings."""
    return {"model": res.model.state_dict(), "optimizer": res.optimizer.state_dict(), "step": res.step,
            "loader_state": {"epoch": res.loader_state.epoch, "position": res.loader_state.position},
            "model_config": model_cfg.__dict__, "identity": identity}


def state_digest(model: GPT, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """sha256 of every weight and optimizer tensor, in a fixed order.

    ``torch.save`` files are not byte-stable (a per-save serialization id; pickle memo layout that
    follows object identity, which differs after a resume), so checkpoint.pt is volatile and this
    digest is what puts the trained state into the artifact's fingerprint."""
    import hashlib

    def h(t: torch.Tensor) -> str:
        return hashlib.sha256(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()

    weights = {k: h(v) for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    states = {f"{i}.{k}": h(v) if torch.is_tensor(v) else repr(v)
              for i in sorted(opt["state"]) for k, v in sorted(opt["state"][i].items())}
    total = hashlib.sha256(repr((sorted(weights.items()), sorted(states.items()))).encode()).hexdigest()
    return {"sha256": total, "weights": weights, "optimizer": states}
