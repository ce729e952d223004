"""``smoke_train.{json,md}`` + ``smoke_train_loss.png``: every row of the seed's table P11-7, pass criteria.

Spike: a step whose loss exceeds 1.5x the median of the 20 steps before it. Pass criteria: every
loss finite; the mean of the last 50 steps below 0.9x the mean of the first 10 (with fewer than 60
steps: the last n - 10); the last validation loss below the first.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from statistics import mean, median
from typing import Any

from .. import pipeline

log = logging.getLogger(__name__)

# the registry's list (minideepseek/pipeline.py), written once: the run's own reports; mixture.* (mixrun.py)
# are written with a train.mixture only
REPORT_FILES = tuple(r for r in pipeline.stage("smoke_train").reports if r.startswith("smoke_train"))
SPIKE_FACTOR, SPIKE_WINDOW = 1.5, 20
DROP_FACTOR = 0.9

FAILURE_NOTES = [
    ("Loss is NaN or inf",
     "Training stops at the first non-finite loss and the report marks it. Check the data first: every "
     "input_ids row must be exactly seq_len long and every id below the tokenizer's vocab size (the loader "
     "checks); decode the samples below for garbage. Then the numerics: lower train.lr or raise train.warmup, "
     "keep train.grad_clip on, and on GPU compare dtype float32 against bfloat16."),
    ("Loss does not decrease",
     "Before touching hyperparameters, go back to the data (the seed's order): are blocks full length, do the "
     "decoded samples show real text with sensible <|endoftext|> boundaries, is the content massively "
     "duplicated or meaningless tokens (see dedup_report and packing_report), is the shuffle seeded and the "
     "order sane? Check that pack and train use the same tokenizer (its manifest fingerprint is recorded "
     "here). Then the model config: too low or too high lr, too few steps for the vocab size."),
    ("Out of memory",
     "The logits are the largest tensor with a 150K vocab: lower train.loss_chunk (positions per chunk of "
     "the output projection), then train.micro_batch (keep the global batch with train.grad_accum), then "
     "train.seq_len. The peak memory column of metrics.jsonl shows where it grows. On CPU, peak RSS also "
     "counts the memory-mapped shards' touched pages."),
    ("A rank hangs",
     "Every rank must run the same number of steps and collectives: the loader gives each rank the same "
     "count of micro-batches per epoch, so look for a rank that died (its traceback is in the log; the "
     "--nproc launcher then stops the other ranks) or one stuck on I/O (a slow or missing shard). "
     "Collectives time out after 10 minutes instead of hanging forever; rerun with NCCL_DEBUG=INFO (GPU) or "
     "TORCH_DISTRIBUTED_DEBUG=DETAIL. A "
     "resumed run restarts from the last checkpoint, bit for bit on CPU."),
    ("Throughput lower than expected",
     "Compare tokens/s with and without the document mask (below) and the MFU against the device's peak. On "
     "a GPU, train.attention=auto applies the mask with FlexAttention and train.compile=auto compiles the "
     "step (the log says which ran; a compile failure names train.compile=false as the way out). Tiny .arrow "
     "shards, too few loader workers or a slow disk show up as time outside forward/backward; on CPU set "
     "THP_MEM_ALLOC_ENABLE=1 (smoke_train.py does) and one thread count per core."),
]


def spikes(losses: list[float]) -> list[dict[str, float]]:
    out = []
    for i in range(SPIKE_WINDOW, len(losses)):
        med = median(losses[i - SPIKE_WINDOW:i])
        if losses[i] > SPIKE_FACTOR * med:
            out.append({"step": i + 1, "loss": losses[i], "running_median": med})
    return out


def criteria(history: list[dict[str, Any]], val: list[dict[str, Any]], status: str) -> dict[str, Any]:
    losses = [h["loss"] for h in history]
    n = len(losses)
    finite = status != "nonfinite" and all(math.isfinite(x) for x in losses)
    n_last = min(50, max(1, n - 10))
    first = mean(losses[:10]) if losses else float("nan")
    last = mean(losses[-n_last:]) if losses else float("nan")
    dropped = finite and n > 1 and last < DROP_FACTOR * first
    vals = [v["val_loss"] for v in val]
    val_ok = len(vals) >= 2 and all(math.isfinite(v) for v in vals) and vals[-1] < vals[0]
    return {
        "loss_finite": {"ok": finite, "detail": f"{n} steps, all finite" if finite else "a loss was NaN/inf"},
        "loss_decreased": {"ok": dropped, "detail": f"mean of last {n_last} = {last:.4f} vs {DROP_FACTOR} x mean of "
                                                    f"first 10 = {DROP_FACTOR * first:.4f}",
                           "first10_mean": first, "last_mean": last, "last_n": n_last},
        "val_decreased": {"ok": val_ok, "detail": (f"val loss {vals[0]:.4f} (step {val[0]['step']}) -> {vals[-1]:.4f} "
                                                   f"(step {val[-1]['step']})") if len(vals) >= 2
                          else "fewer than two validation points"},
        "passed": finite and dropped and val_ok,
    }


def plot(history: list[dict[str, Any]], val: list[dict[str, Any]], spk: list[dict[str, float]], path: Path,
         title: str) -> bool:
    """Write the loss curve; False (logged) when matplotlib is missing: training must not be lost
    for a plot, and the numbers are in metrics.jsonl and the report anyway."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no loss-curve PNG (pip install -r requirements.txt)")
        return False

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    steps, losses = [h["step"] for h in history], [h["loss"] for h in history]
    ax.plot(steps, losses, lw=0.8, color="#9ecae1", label="train loss")
    if len(losses) >= 10:  # a trailing mean of 10 steps: small batches make the raw curve noisy
        smooth = [mean(losses[max(0, i - 9):i + 1]) for i in range(len(losses))]
        ax.plot(steps, smooth, lw=1.6, color="#1f77b4", label="train loss (mean of 10)")
    if val:
        ax.plot([v["step"] for v in val], [v["val_loss"] for v in val], "o-", color="#d62728", label="validation loss")
    if spk:
        ax.plot([s["step"] for s in spk], [s["loss"] for s in spk], "x", color="k", label="spike")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def _fmt(x: float | None, nd: int = 4) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _mfu_line(th: dict[str, Any]) -> str:
    """The tokens/s row's tail: how the step ran, compile time, the FLOP count and the MFU."""
    m = th.get("mfu")
    how = f"; {th.get('attention', 'sdpa')} attention, " + ("compiled" if th.get("compiled") else "eager")
    if th.get("compile_s") is not None:
        how += f" (compile {th['compile_s']:.1f} s, not in tokens/s)"
    if not m:
        return how
    flops = (f"; {m['flops_per_token'] / 1e9:.3f} GFLOP/token ({m['matmul_flops_per_token'] / 1e9:.3f} matmuls incl. "
             f"the tied head + {m['attention_flops_per_token'] / 1e9:.3f} attention over "
             f"{m['attended_pairs_per_token']:,.0f} attended pairs per token) = {m['achieved_tflops']:,.1f} TFLOP/s")
    if m["mfu"] is None:
        return how + flops + f"; MFU: {m['peak_source']}"
    return how + flops + (f"; MFU {100 * m['mfu']:.1f}% of {m['devices']} x {m['peak_tflops_per_device']:,.1f} "
                          f"TFLOP/s ({m['peak_source']})")


def report_markdown(r: dict[str, Any]) -> str:
    b, m, c = r["batch"], r["model"], r["criteria"]
    th, tk = r["throughput"], r[pipeline.TOKENIZER]
    rows = [
        ("数据目录 data dir", f"`{r['data_dir']}` ({r['data']['blocks']:,} blocks, {r['data']['shards']} shard(s), "
                            f"fingerprint `{r['data']['fingerprint'][:12]}`)"),
        ("样本长度 seq_len", f"train {r['seq_len']:,} (packed {r['data']['packed_seq_len']:,}: {r['data']['windows']} "
                          f"window(s) per block, {r['data']['unused_per_block']} token(s) unused per block)"),
        ("batch 配置", f"global {b['global_sequences']} sequences = {b['global_tokens']:,} tokens/step; micro "
                     f"{b['micro_batch']} x grad accum {b['grad_accum']} x {b['world_size']} rank(s)"),
        ("模型规模 model", f"{m['params']['total']:,} parameters ({m['params']['embedding']:,} tied embedding + "
                        f"{m['params']['non_embedding']:,} other); {m['n_layer']} layers, d_model {m['d_model']}, "
                        f"{m['n_head']} heads; a smoke-test model, not comparable to DeepSeek-V3 (671B)"),
        (pipeline.TOKENIZER, f"`{tk['path']}` (vocab {tk['vocab_size']:,}, fingerprint "
                             f"`{tk['fingerprint'][:12]}`, the one the packed data was built with)"),
        ("step 范围 steps", f"{r['steps']['first']}-{r['steps']['last']} of {r['steps']['max_steps']}"
                         + (f" (resumed at step {r['steps']['resumed_from']})" if r['steps']['resumed_from'] else "")),
        ("loss 曲线 loss", f"first {_fmt(r['loss']['first'])}, last {_fmt(r['loss']['last'])}, min "
                         f"{_fmt(r['loss']['min'])}; {len(r['loss']['spikes'])} spike(s) (> {SPIKE_FACTOR}x the "
                         f"running median of {SPIKE_WINDOW} steps)"),
        ("validation loss", f"{_fmt(r['val']['first'])} (step {r['val']['first_step']}) -> {_fmt(r['val']['last'])} "
                            f"(step {r['val']['last_step']}) on {r['val']['tokens']:,} held-out tokens "
                            f"({r['val']['blocks']} blocks)"),
        ("tokens/s", f"{th['median_tokens_per_s']:,.0f} median over steps ({th['overall_tokens_per_s']:,.0f} overall "
                     f"incl. evaluation); doc mask {'on' if r['doc_mask'] else 'off'}"
                     + (f"; mask on {th['mask_bench']['with_mask']:,.0f} vs off {th['mask_bench']['without_mask']:,.0f}"
                        if th.get("mask_bench") else "") + _mfu_line(th)),
        ("peak memory", f"{r['memory']['peak_mb']:,.0f} MB ({r['memory']['kind']}" + _heap_note(r["memory"]) + ")"),
        ("样本解码 decodes", f"{len(r['samples'][pipeline.PACKED])} packed training samples + "
                          f"{len(r['samples']['generated'])} model generations (below)"),
        ("失败样本处理 failures", "see *Failure handling* below"),
    ]
    out = [f"# Smoke training: {r['run']}", "",
           f"**{'PASS' if c['passed'] else 'FAIL'}** — {r['status']} on {r['device']} ({r['dtype']}), "
           f"{r['wall_s']:.0f} s wall. Proves the packed data trains; no benchmark claims.", "",
           "## Record (table P11-7)", "", "| item | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    out += ["", "## Pass criteria", "", "| criterion | ok | detail |", "|---|---|---|"]
    out += [f"| {k} | {'yes' if c[k]['ok'] else 'NO'} | {c[k]['detail']} |"
            for k in ("loss_finite", "loss_decreased", "val_decreased")]
    out += ["", "## Loss curve", "", "![loss curve](smoke_train_loss.png)", "",
            "| step | val loss |", "|---|---|"] + [f"| {v['step']} | {v['val_loss']:.4f} |" for v in r["val"]["series"]]
    if r["loss"]["spikes"]:
        out += ["", "Spikes: " + ", ".join(f"step {s['step']} ({s['loss']:.3f} vs median {s['running_median']:.3f})"
                                           for s in r["loss"]["spikes"][:20])]
    mb = th.get("mask_bench")
    if mb:
        out += ["", "## Document-mask cost", "",
                f"Forward+backward on the same {mb['steps']} training micro-batches of windows holding "
                f"{mb['docs_per_window_in_bench']:.1f} documents on average (fastest of alternating runs): "
                f"block-diagonal mask {mb['with_mask']:,.0f} tokens/s, plain causal {mb['without_mask']:,.0f} tokens/s "
                f"({100 * (mb['with_mask'] / mb['without_mask'] - 1):+.1f}%). Share of training windows with more "
                f"than one document: {100 * mb['multi_doc_share']:.0f}% (only those pay for the mask; a batch of "
                f"single-document windows runs plain causal attention). The mask as training applies it "
                f"({mb.get('attention', 'sdpa')}), on the eager model"
                + (f"; the dense SDPA mask instead of FlexAttention: {mb['dense_mask']:,.0f} tokens/s"
                   if "dense_mask" in mb else "") + "."]
    out += ["", "## Decoded packed samples (first 200 tokens; ⟦EOT⟧ = <|endoftext|>)", ""]
    for s in r["samples"][pipeline.PACKED]:
        out += [f"**sample {s['sample']}** (block {s['block']}, window {s['window']}, {s['documents_in_window']} "
                f"document(s) in the window)", "", "```text", s["text"].replace("```", "'''"), "```", ""]
    out += ["## Model generations", ""]
    for g in r["samples"]["generated"]:
        out += [f"**{g['prompt']!r}** ({g['mode']}, {g['tokens']} tokens)", "", "```text",
                (g["prompt"] + g["text"]).replace("```", "'''"), "```", ""]
    out += ["## Failure handling", ""] + [f"- **{k}.** {v}" for k, v in FAILURE_NOTES]
    out += ["", f"Config hash `{r['config_hash'][:12]}`; metrics per step in `{r['artifact']}/metrics.jsonl`, "
            f"batches per step and rank in `batches.jsonl`, final checkpoint `checkpoint.pt`.", ""]
    return "\n".join(out)


def _heap_note(mem: dict) -> str:
    """What the CPU peak counts, and whether the heap guard had to hand memory back (train/heap.py)."""
    heap = mem.get("heap") or {}
    if not heap or not mem.get("counts"):
        return ""
    trims = heap.get("trims", 0)
    guard = (f"; heap guard: {trims} trim(s) released {heap.get('released_mb', 0):,.0f} MB above the "
             f"{heap.get('limit_rss_mb') or 0:,.0f} MB limit" if trims else
             f"; never above the heap guard's {heap.get('limit_rss_mb') or 0:,.0f} MB limit")
    return f": {mem['counts']}{guard}"
