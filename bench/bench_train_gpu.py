"""Issue 36's one-GPU measurement: today's dense-mask SDPA step vs FlexAttention + torch.compile.

    python bench/bench_train_gpu.py                  # one CUDA GPU, ~5-6 min on an H200; installs nothing
    OUT=/some/dir python bench/bench_train_gpu.py    # also writes $OUT/bench_train_gpu.json (+ stage reports, logs)
    python bench/bench_train_gpu.py --device cpu --tiny --backend aot_eager   # the script's own dry run

Part 1, micro-benchmark (needs torch only): the project's ``GPT`` at the issue's shapes (12 layers,
d_model 768, 150K tied vocabulary, seq_len 4096, micro-batch 8, bf16 autocast, loss chunk 4096) on
synthetic packed windows whose document spans follow a log-normal length distribution tuned to ~7
documents per window (the issue's batch; token ids are random: throughput does not depend on them).
Each variant is a fresh model from one seed doing fwd + bwd + grad clip + AdamW: 3 warm-up steps, then
``--timed-steps`` timed ones (median). Variants: (a) today's dense document mask, SDPA, eager;
(b) FlexAttention block mask + ``model.compile`` (fullgraph, the stage's options), compile time on
its own; (c) FlexAttention, eager model (the fallback, and the figure kept if (b) fails); (d) no
mask (plain causal: wrong for packed data, the ceiling). Peak memory per variant, MFU with the FLOP
count of ``minideepseek/train/flops.py``, and the block-mask build time.

Part 2, the stage itself, when ``data/demo/{packed,tokenizer}`` and ``data/demo/mixed_raw/manifest.json``
exist and the repo's requirements import: ``smoke_train.py --config configs/demo.yaml`` with the
``train:`` section of ``configs/gpu_8x.yaml`` on one GPU at micro-batch 8 x accum 2 (the run of
MEASURED_FACTS.md), ``--stage-steps`` steps, twice on the same data order: ``attention=sdpa
compile=false`` (today) and ``attention=auto compile=auto`` (FlexAttention + compile); if the latter
fails, ``attention=flex compile=false`` too. It compares their loss curves step by step. It rewrites
``data/demo/smoke_train``; the reports it publishes into ``reports/demo`` are put back afterwards.
Without the data, part 1 also trains its variants ``--loss-steps`` steps on synthetic Zipf-distributed
token ids (labelled so) for the loss-curve comparison. Carry the data to the GPU machine from a
finished demo run: ``data/demo/packed`` (37 MB), ``data/demo/tokenizer`` (12 MB) and
``data/demo/mixed_raw/manifest.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from minideepseek.train.flops import document_pairs, mfu_report  # noqa: E402
from minideepseek.train.model import GPT, ModelConfig, document_block_mask  # noqa: E402

T0 = time.time()
RESULT: dict[str, Any] = {}
STAGE_TODAY = {"train.attention": "sdpa", "train.compile": "false"}
STAGE_NEW = {"train.attention": "auto", "train.compile": "auto"}
STAGE_FLEX_EAGER = {"train.attention": "flex", "train.compile": "false"}


def say(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


def save(out: Path | None) -> None:
    """Rewritten after every phase, so a run cut short still leaves what it measured."""
    if out is not None:
        (out / "bench_train_gpu.json").write_text(json.dumps(RESULT, indent=2) + "\n")


# -- synthetic packed windows ----------------------------------------------------------------------

def packed_windows(n: int, T: int, mean_len: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(segments, positions) of ``n`` consecutive windows cut from a stream of documents, numbered as
    the loader numbers them: a document continuing from the previous window is segment 0 and its
    positions restart at the window start. Lengths: log-normal (sigma 1), mean ``mean_len``."""
    sigma = 1.0
    lengths = rng.lognormal(np.log(mean_len) - sigma**2 / 2, sigma, size=4 * n * T // int(mean_len) + 16)
    ends = np.cumsum(np.clip(lengths.round(), 8, 8 * T).astype(np.int64))
    starts = np.concatenate(([0], ends[:-1]))
    t = np.arange(T)
    seg, pos = np.zeros((n, T), np.int64), np.zeros((n, T), np.int64)
    for w in range(n):
        lo = w * T
        k = np.searchsorted(ends, lo + t, side="right")
        seg[w] = k - k[0]
        pos[w] = lo + t - np.maximum(starts[k], lo)
    return seg, pos


def zipf_tokens(shape: tuple[int, ...], vocab: int, rng: np.random.Generator) -> np.ndarray:
    """Token ids with a Zipf(1.3) unigram distribution: a loss curve with a shape (it falls from
    ln(vocab) towards the unigram entropy) without real text. Labelled synthetic in the results."""
    return np.minimum(rng.zipf(1.3, size=shape), vocab - 1).astype(np.int64)


# -- part 1 ----------------------------------------------------------------------------------------

def optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """trainer.make_optimizer's AdamW (not imported: the trainer pulls pyarrow through the loader)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=6e-4, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step: int, steps: int, warmup: int = 10, lr: float = 6e-4, min_lr: float = 6e-5) -> float:
    if step <= warmup:
        return lr * step / warmup
    return min_lr + 0.5 * (lr - min_lr) * (1 + np.cos(np.pi * min(1.0, (step - warmup) / max(1, steps - warmup))))


def run_variant(name: str, a: argparse.Namespace, cfg: ModelConfig, batches: list[tuple[torch.Tensor, ...]],
                attention: str, compiled: bool, masked: bool, loss_batches: list[tuple[torch.Tensor, ...]] | None,
                flops_args: dict[str, Any]) -> dict[str, Any]:
    """One variant: fresh model (seed 0), warm-up (compile) + timed steps; then, with ``loss_batches``,
    the same model reset to its initial weights trains on them (same data order for every variant)."""
    dev = torch.device(a.device)
    res: dict[str, Any] = {"variant": name, "attention": attention, "compiled": compiled, "document_mask": masked}
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        res["allocated_before_gb"] = round(torch.cuda.memory_allocated(dev) / 1e9, 2)  # leftovers would show here
    torch.manual_seed(0)
    model = GPT(cfg, attention).to(dev)  # type: ignore[arg-type]
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = optimizer(model)

    def amp() -> torch.autocast:  # bf16 autocast on CUDA as the stage does; fp32 for the CPU dry run
        return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def step(model: GPT, opt: torch.optim.Optimizer, b: tuple[torch.Tensor, ...], lr: float) -> tuple[float, torch.Tensor]:
        x, y, seg, pos = b
        for g in opt.param_groups:
            g["lr"] = lr
        sync()
        t = time.perf_counter()
        with amp():
            loss = model(x, y, seg if masked else None, pos if masked else None, a.loss_chunk)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        return time.perf_counter() - t, loss.detach()

    try:
        if compiled:
            opts: dict[str, Any] = {"fullgraph": True, "dynamic": False}
            if a.backend:
                opts["backend"] = a.backend
            model.compile(**opts)
        times = [step(model, opt, batches[i % len(batches)], 6e-4)[0] for i in range(3 + a.timed_steps)]
    except Exception as exc:  # reported, and the other variants still run
        res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:600]
        res["traceback_tail"] = traceback.format_exc()[-2000:]
        say(f"{name}: FAILED {res['error']}")
        del model, opt
        release(compiled)
        return res
    timed = times[3:]
    tokens = a.micro_batch * a.seq_len
    res["first_step_s"] = round(times[0], 2)
    if compiled or attention == "flex":  # the first call compiles (the model, or FlexAttention's kernel alone)
        res["compile_s"] = round(times[0] - statistics.median(timed), 2)
    res["step_s_median"] = statistics.median(timed)
    res["tokens_per_s"] = round(tokens / res["step_s_median"])
    res["tokens_per_s_all_timed"] = [round(tokens / t) for t in timed]
    pairs = flops_args["pairs"] if masked else a.micro_batch * document_pairs([a.seq_len])
    res["mfu"] = mfu_report(cfg, round(pairs), tokens, res["tokens_per_s"], 1, flops_args["device_name"], 0.0,
                            dev.type == "cuda")
    if dev.type == "cuda":
        res["peak_gb"] = round(torch.cuda.max_memory_allocated(dev) / 1e9, 2)
    if compiled:
        from torch._dynamo.utils import counters

        res["dynamo_unique_graphs_so_far"] = int(counters["stats"]["unique_graphs"])
    if loss_batches:
        model.load_state_dict(init)  # in place: the compiled graph stays valid
        opt = optimizer(model)
        n = len(loss_batches)
        res["loss_curve"] = [round(float(step(model, opt, b, lr_at(i + 1, n))[1]), 5) for i, b in enumerate(loss_batches)]
    mf = res["mfu"]
    say(f"{name}: {res['tokens_per_s']:,} tok/s, MFU {100 * (mf['mfu'] or 0):.1f}%, "
        f"peak {res.get('peak_gb', '-')} GB" + (f", compile {res['compile_s']} s" if "compile_s" in res else ""))
    del model, opt, init
    release(compiled)
    return res


def release(compiled: bool) -> None:
    """Free a variant's memory before the next one: dynamo's caches hold the compiled model's tensors."""
    if compiled:
        torch._dynamo.reset()
    gc.collect()


def part1(a: argparse.Namespace, out: Path | None, with_loss: bool) -> None:
    dev = torch.device(a.device)
    rng = np.random.default_rng(0)
    B, T = a.micro_batch, a.seq_len
    cfg = ModelConfig(vocab_size=a.vocab, n_layer=a.layers, d_model=a.d_model, n_head=a.heads, max_seq_len=T)
    seg, pos = packed_windows(B * 8, T, a.mean_doc_len, rng)
    docs = (seg.max(axis=1) + 1).astype(float)
    pairs_all = [document_pairs(np.bincount(r)) for r in seg]

    def put(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(x).to(dev)

    batches = [(put(rng.integers(3, a.vocab, (B, T))), put(rng.integers(3, a.vocab, (B, T))),
                put(seg[i * B:(i + 1) * B]), put(pos[i * B:(i + 1) * B])) for i in range(8)]
    loss_batches = None
    if with_loss:
        lseg, lpos = packed_windows(B * a.loss_steps, T, a.mean_doc_len, np.random.default_rng(1))
        toks = zipf_tokens((B * a.loss_steps, T + 1), a.vocab, np.random.default_rng(2))
        loss_batches = [(put(toks[i * B:(i + 1) * B, :-1]), put(toks[i * B:(i + 1) * B, 1:]),
                         put(lseg[i * B:(i + 1) * B]), put(lpos[i * B:(i + 1) * B])) for i in range(a.loss_steps)]
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else None
    p1: dict[str, Any] = {
        "shapes": {"n_layer": a.layers, "d_model": a.d_model, "n_head": a.heads, "vocab": a.vocab, "seq_len": T,
                   "micro_batch": B, "loss_chunk": a.loss_chunk, "dtype": "bf16 autocast" if dev.type == "cuda" else "fp32"},
        "data": {"kind": "synthetic packed spans (log-normal document lengths), random token ids",
                 "docs_per_window_mean": float(docs.mean()), "docs_per_window_min": int(docs.min()),
                 "docs_per_window_max": int(docs.max()), "mean_doc_len_param": a.mean_doc_len},
        "loss_curve_data": ("synthetic Zipf(1.3) token ids on synthetic spans (no real packed data here)"
                            if with_loss else "none here: part 2 trains the stage on the real packed demo data"),
        "timed_steps": a.timed_steps, "warmup_steps": 3, "variants": {},
    }
    RESULT["part1_micro_benchmark"] = p1
    say(f"part 1: {B} x {T} windows, {docs.mean():.1f} documents per window (min {docs.min():.0f}, "
        f"max {docs.max():.0f}); {device_name or dev}")
    if dev.type == "cuda":  # the block mask alone (eager build, as the eager FlexAttention path builds it)
        document_block_mask(batches[0][2])
        torch.cuda.synchronize(dev)
        t = time.perf_counter()
        for b in batches[:5]:
            document_block_mask(b[2])
        torch.cuda.synchronize(dev)
        p1["block_mask_build_ms_eager"] = round(1000 * (time.perf_counter() - t) / 5, 2)
    plans = [("a_sdpa_dense_mask_eager", "sdpa", False, True, True),
             ("b_flex_block_mask_compiled", "flex", True, True, True),
             ("c_flex_block_mask_eager", "flex", False, True, True),
             ("d_no_mask_eager", "sdpa", False, False, False)]
    for name, attention, compiled, masked, curve in plans:
        if attention == "flex" and dev.type != "cuda":
            if not a.tiny:
                p1["variants"][name] = {"skipped": "FlexAttention has no backward on CPU"}
                continue
            attention = "sdpa"  # the CPU dry run exercises the compile and loss-curve code with the dense mask
        if not masked and time.time() - T0 > a.deadline_s * 0.4:  # the reference variant is optional
            p1["variants"][name] = {"skipped": "time budget"}
            continue
        pairs = sum(pairs_all) / len(batches)  # per step: the timed steps cycle through the batches
        p1["variants"][name] = run_variant(name, a, cfg, batches, attention, compiled, masked,
                                           loss_batches if curve else None,
                                           {"pairs": pairs, "device_name": device_name})
        save(out)
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # part 2's processes get the memory
    v = p1["variants"]
    base = v.get("a_sdpa_dense_mask_eager", {}).get("tokens_per_s")
    for k in v:
        if base and v[k].get("tokens_per_s"):
            v[k]["speedup_vs_a"] = round(v[k]["tokens_per_s"] / base, 3)
    if with_loss:
        p1["loss_curve_comparison"] = compare_curves(v.get("a_sdpa_dense_mask_eager", {}).get("loss_curve"),
                                                     (v.get("b_flex_block_mask_compiled", {}).get("loss_curve")
                                                      or v.get("c_flex_block_mask_eager", {}).get("loss_curve")))
    save(out)


def compare_curves(a: list[float] | None, b: list[float] | None) -> dict[str, Any] | None:
    """How close two loss curves over the same data order are (bf16: not bit-equal)."""
    if not a or not b:
        return None
    x, y = np.array(a), np.array(b)
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    tail = max(1, min(10, n // 5))
    return {"steps": n, "max_abs_diff": float(np.abs(x - y).max()), "mean_abs_diff": float(np.abs(x - y).mean()),
            "first": [float(x[0]), float(y[0])], f"mean_last_{tail}": [float(x[-tail:].mean()), float(y[-tail:].mean())],
            "corr": float(np.corrcoef(x, y)[0, 1]) if n > 2 and x.std() > 0 and y.std() > 0 else None}


# -- part 2 ----------------------------------------------------------------------------------------

def stage_ready() -> str | None:
    """Why the stage cannot run here, or None."""
    need = [ROOT / "data/demo/packed/manifest.json", ROOT / "data/demo/tokenizer/manifest.json",
            ROOT / "data/demo/mixed_raw/manifest.json"]
    missing = [str(p.relative_to(ROOT)) for p in need if not p.is_file()]
    if missing:
        return f"missing {missing}: carry them from a finished demo run (data/demo/...)"
    probe = subprocess.run([sys.executable, "-c", "import smoke_train, minideepseek.validate, minideepseek.train.stage"],
                           cwd=ROOT, capture_output=True, text=True)
    if probe.returncode:
        return f"the repo's requirements do not import with {sys.executable}: {probe.stderr.strip().splitlines()[-1]}"
    return None


def stage_sets(a: argparse.Namespace) -> list[str]:
    """The train: section of configs/gpu_8x.yaml, on one GPU at micro-batch 8 x accum 2."""
    import yaml

    train = yaml.safe_load((ROOT / "configs/gpu_8x.yaml").read_text())["train"]
    train.update({"micro_batch": 8, "grad_accum": 2, "max_steps": a.stage_steps, "checkpoint_interval": 0,
                  "resume": False, "bench_steps": 2, "generate_tokens": 20, "fail_on_criteria": False})
    if a.tiny:  # the dry run: a tiny model on CPU
        train.update({"n_layer": 2, "d_model": 64, "n_head": 2, "seq_len": 256, "micro_batch": 2, "loss_chunk": 256,
                      "dtype": "float32", "device": "cpu", "eval_interval": 2, "warmup": 1, "generate_tokens": 2})
    def text(v: Any) -> str:  # as YAML reads it back: true/false; 0.00006, not 6e-05 (a string to YAML 1.1)
        if isinstance(v, bool):
            return json.dumps(v)
        return np.format_float_positional(v, trim="-") if isinstance(v, float) else str(v)

    out = []
    for k, v in train.items():
        out += ["--set", f"train.{k}={text(v)}"]
    return out


def run_stage(label: str, extra: dict[str, Any], a: argparse.Namespace, out: Path | None,
              expect_report: bool = True) -> dict[str, Any]:
    cmd = [sys.executable, "smoke_train.py", "--config", "configs/demo.yaml", "--force", *stage_sets(a)]
    for k, v in extra.items():
        cmd += ["--set", f"{k}={v}"]
    limit = int(min(a.stage_timeout_s, a.deadline_s - (time.time() - T0) - 15))  # the JSON must still be written
    if limit < 60:
        say(f"part 2: stage 5 ({label}) skipped: {limit} s left before --deadline-s")
        return {"label": label, "skipped": f"time: {limit} s left before --deadline-s {a.deadline_s}"}
    say(f"part 2: stage 5 ({label}): {' '.join(f'{k}={v}' for k, v in extra.items())} (limit {limit} s)")
    t = time.time()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, log = 124, f"timed out after {limit} s\n{exc.stdout or ''}{exc.stderr or ''}"
    res: dict[str, Any] = {"label": label, "exit_code": rc, "wall_s": round(time.time() - t, 1),
                           "command": " ".join(cmd[1:])}
    if out is not None:
        (out / f"stage_{label}.log").write_text(log if isinstance(log, str) else str(log))
    if not expect_report:  # a run stopped early (train.stop_at_step) commits nothing
        say(f"  {label}: exit {rc}")
        return res
    art = ROOT / "data/demo/smoke_train"
    if rc not in (0, 1) or not (art / "smoke_train.json").is_file():
        res["error_tail"] = str(log)[-2500:]
        say(f"  {label}: exit {rc}; see stage_{label}.log\n{str(log)[-1200:]}")
        return res
    rep = json.loads((art / "smoke_train.json").read_text())
    rows = [json.loads(x) for x in (art / "metrics.jsonl").read_text().splitlines()]
    th = rep["throughput"]
    res.update({"passed": rep["criteria"]["passed"], "median_tokens_per_s": th["median_tokens_per_s"],
                "compile_s": th.get("compile_s"), "attention": th.get("attention"), "compiled": th.get("compiled"),
                "mfu": th.get("mfu"), "peak_mb": rep["memory"]["peak_mb"], "mask_bench": th.get("mask_bench"),
                "train_s": th["train_s"], "eval_s": th["eval_s"], "wall_s_stage": rep["wall_s"],
                "resumed_from": rep["steps"]["resumed_from"],
                "loss_curve": [r["loss"] for r in rows if r["kind"] == "train"],
                "val": [(r["step"], r["val_loss"]) for r in rows if r["kind"] == "val"],
                "batches_sha": __import__("hashlib").sha256((art / "batches.jsonl").read_bytes()).hexdigest()})
    if out is not None:
        dst = out / f"stage_{label}"
        dst.mkdir(exist_ok=True)
        for f in ("smoke_train.json", "smoke_train.md", "smoke_train_loss.png", "metrics.jsonl"):
            if (art / f).is_file():
                (dst / f).write_bytes((art / f).read_bytes())
    m = res["mfu"] or {}
    say(f"  {label}: {'PASS' if res['passed'] else 'FAIL'}, {res['median_tokens_per_s']:,.0f} tok/s median, MFU "
        f"{100 * (m.get('mfu') or 0):.1f}%, peak {res['peak_mb']:,.0f} MB, compile {res['compile_s']} s, "
        f"loss {res['loss_curve'][0]:.3f} -> {res['loss_curve'][-1]:.3f}")
    return res


def part2(a: argparse.Namespace, out: Path | None) -> None:
    """The stage publishes its reports into reports/demo/ (committed files): they are put back after."""
    kept = {f: f.read_bytes() for f in sorted((ROOT / "reports/demo").glob("*")) if f.is_file()}
    try:
        _part2(a, out)
    finally:
        for f, data in kept.items():
            f.write_bytes(data)


def _part2(a: argparse.Namespace, out: Path | None) -> None:
    p2: dict[str, Any] = {"data": "real packed demo data (data/demo/packed), same seed => same data order", "runs": {}}
    RESULT["part2_stage"] = p2
    runs = p2["runs"]
    runs["new"] = run_stage("new", STAGE_NEW, a, out)  # first: the figure the issue is about
    save(out)
    runs["today"] = run_stage("today", STAGE_TODAY, a, out)
    save(out)
    if "error_tail" in runs["new"]:  # compile failed: the eager FlexAttention figure instead
        runs["flex_eager"] = run_stage("flex_eager", STAGE_FLEX_EAGER, a, out)
    new = runs["new"] if "loss_curve" in runs["new"] else runs.get("flex_eager", {})
    if "loss_curve" in runs["today"] and "loss_curve" in new:
        p2["same_data_order"] = runs["today"]["batches_sha"] == new["batches_sha"]
        p2["loss_curve_comparison"] = compare_curves(runs["today"]["loss_curve"], new["loss_curve"])
        p2["val_today_vs_new"] = list(zip(runs["today"]["val"], new["val"]))
        p2["speedup"] = round(new["median_tokens_per_s"] / runs["today"]["median_tokens_per_s"], 3)
        p2["goal_2x_of_116664"] = new["median_tokens_per_s"] >= 2 * 116_664
    save(out)
    if a.check_resume and "loss_curve" in runs["new"]:  # issue item 4 on the GPU: stop halfway, resume
        half = max(1, a.stage_steps // 2)
        runs["new_stop"] = run_stage("new_stop", {**STAGE_NEW, "train.stop_at_step": half, "train.resume": "true"},
                                     a, out, expect_report=False)
        runs["new_resumed"] = run_stage("new_resumed", {**STAGE_NEW, "train.resume": "true"}, a, out)
        r = runs["new_resumed"]
        if "loss_curve" in r:
            p2["resume"] = {"stopped_at": half, "same_data_order": r["batches_sha"] == runs["new"]["batches_sha"],
                            "after_resume_vs_uninterrupted": compare_curves(runs["new"]["loss_curve"][half:],
                                                                             r["loss_curve"][half:]),
                            "before_stop_identical": r["loss_curve"][:half] == runs["new"]["loss_curve"][:half]}
        save(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=150_000)
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--loss-chunk", type=int, default=4096)
    p.add_argument("--mean-doc-len", type=float, default=620.0, help="log-normal mean: ~7 documents per 4096 window")
    p.add_argument("--timed-steps", type=int, default=10)
    p.add_argument("--loss-steps", type=int, default=60, help="part 1's synthetic loss curve (only without data)")
    p.add_argument("--stage-steps", type=int, default=100)
    p.add_argument("--stage-timeout-s", type=int, default=300, help="at most this per stage run")
    p.add_argument("--deadline-s", type=int, default=540,
                   help="total wall time: stage runs are cut to fit, optional work skipped, the JSON written")
    p.add_argument("--backend", default=None, help="torch.compile backend (default inductor; aot_eager for dry runs)")
    p.add_argument("--skip-stage", action="store_true")
    p.add_argument("--skip-micro", action="store_true", help="part 2 only")
    p.add_argument("--check-resume", action="store_true",
                   help="part 2 also stops the new run halfway and resumes it (+~2 min)")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (a dry run of the script on CPU)")
    a = p.parse_args(argv)
    if a.tiny:
        a.layers, a.d_model, a.heads, a.vocab, a.seq_len, a.micro_batch, a.loss_chunk = 2, 64, 2, 2000, 256, 2, 256
        a.mean_doc_len, a.timed_steps, a.loss_steps, a.stage_steps = 40.0, 3, 8, 4
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"no CUDA device visible to torch {torch.__version__} ({sys.executable}); nothing measured")
        return 2
    cache = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", f"/tmp/torchinductor_{os.environ.get('USER', 'root')}"))
    RESULT["env"] = {"python": sys.executable, "torch": torch.__version__, "cuda": torch.version.cuda,
                     "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
                     "inductor_cache_existed_before": cache.exists(), "argv": sys.argv[1:]}
    say(f"torch {torch.__version__} on {RESULT['env']['device']}")
    why = "--skip-stage" if a.skip_stage else stage_ready()
    RESULT["part2_skipped"] = why
    try:
        if not a.skip_micro:
            part1(a, out, with_loss=why is not None)
    except Exception:  # part 2 still runs
        RESULT["part1_error"] = traceback.format_exc()[-3000:]
        say(f"part 1 failed:\n{RESULT['part1_error']}")
    save(out)
    if why is None:
        part2(a, out)
    else:
        say(f"part 2 (the stage) skipped: {why}")
    RESULT["total_s"] = round(time.time() - T0, 1)
    save(out)
    summary()
    return 0


def summary() -> None:
    """The figures the issue asks for, in a few lines (the JSON has the rest)."""
    v = RESULT.get("part1_micro_benchmark", {}).get("variants", {})
    print("\n== part 1: micro-benchmark (fwd + bwd + AdamW), tokens/s median | MFU | peak GB | compile s ==")
    for k, r in v.items():
        if "tokens_per_s" in r:
            m = r["mfu"]
            print(f"{k:30s} {r['tokens_per_s']:>9,} | {100 * (m['mfu'] or 0):5.1f}% of {m['peak_tflops_per_device']} "
                  f"TFLOP/s ({m['flops_per_token'] / 1e9:.3f} GFLOP/token) | {r.get('peak_gb', '-')} | "
                  f"{r.get('compile_s', '-')} | x{r.get('speedup_vs_a', '-')}")
        else:
            print(f"{k:30s} {r.get('skipped') or r.get('error')}")
    p2 = RESULT.get("part2_stage")
    if p2:
        print("\n== part 2: stage 5, demo data, gpu_8x train section, 1 GPU, micro 8 x accum 2 ==")
        for k, r in p2["runs"].items():
            if "skipped" in r:
                print(f"{k:12s} skipped: {r['skipped']}")
            elif "median_tokens_per_s" in r:
                mfu = (r["mfu"] or {}).get("mfu") or 0
                print(f"{k:12s} {r['median_tokens_per_s']:>9,.0f} tok/s | MFU {100 * mfu:.1f}% "
                      f"| peak {r['peak_mb']:,.0f} MB | compile {r['compile_s']} s | {'PASS' if r['passed'] else 'FAIL'}")
            else:
                print(f"{k:12s} exit {r['exit_code']}: {r.get('error_tail', '')[-300:]}")
        for k in ("speedup", "goal_2x_of_116664", "same_data_order", "loss_curve_comparison", "resume"):
            print(f"{k}: {p2.get(k)}")
    elif RESULT.get("part1_micro_benchmark", {}).get("loss_curve_comparison"):
        print(f"loss curves (synthetic): {RESULT['part1_micro_benchmark']['loss_curve_comparison']}")
    print(f"total {RESULT.get('total_s')} s")


if __name__ == "__main__":
    raise SystemExit(main())
