"""Stage 5 driver: ``packed`` + ``tokenizer`` -> ``data/<run>/smoke_train/`` (metrics.jsonl,
batches.jsonl, checkpoint.pt, loss plot, report) and ``reports/<run>/smoke_train.{md,json}`` +
``smoke_train_loss.png``.

Every rank checks the upstream manifests (read-only, before any process group exists, so a stale
input stops all of them with the same exit code 2) and the up-to-date test; then they train
together and rank 0 alone writes, under the stage contract (temp dir, manifest last, rename).
The artifact is also stale when the rank count changes: the global batch and the data each rank
reads depend on it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from .. import pipeline
from ..artifact import InputRef, Manifest, StaleInputError, publish_reports
from ..config import to_plain
from ..fsio import write_json_atomic, write_text_atomic
from ..invocation import Command, rerun_hint
from ..pipeline import PACKED, TOKENIZER, producer
from ..progress import Laps
from ..provenance import peak_rss_mb
from ..rng import rng_for
from ..stage import StageRun, require_upstream
from .autosize import fit_to_data
from .config import TrainStageConfig
from .dist import DistEnv
from .flops import mfu_report
from .loader import PackedBlocks, SamplePlan
from .maskbench import bench_doc_mask
from .mixrun import MIXTURE_FILES, build_mixture, source_ranges, val_loss_by_source, write_mixture
from .report import REPORT_FILES, criteria, plot, report_markdown, spikes
from .samples import generate, packed_samples
from .trainer import (
    Checkpoints,
    TrainResult,
    final_checkpoint,
    model_config,
    resolve_device,
    resolve_execution,
    setup_torch,
    state_digest,
    train,
)

log = logging.getLogger(__name__)

# the stage's identity is the registry's (minideepseek/pipeline.py), written once
SPEC = pipeline.stage("smoke_train")
STAGE, ARTIFACT = SPEC.name, SPEC.artifact
SCHEMA_VERSION = 2  # 2: batches.jsonl carries token_hash (ledger.py)
# What the report's peak RSS is: stated with it, so a reader knows what to compare it with.
MEMORY_COUNTS = ("the largest resident set of rank 0's process (ru_maxrss, or of a waited-for child when larger): "
                 "the Python interpreter and torch's libraries, the model, gradients and AdamW state, one micro-batch's "
                 "activations and one loss chunk's logits (loss_chunk x vocab floats), the tokenizer, and the pages "
                 "of the memory-mapped packed shards it has read; freed heap blocks glibc keeps for the next step "
                 "count too (bounded by train/heap.py)")
# Timings/memory, torch.save's non-byte-stable file, and the reports: their validation losses are float
# reductions whose order follows the thread count (a fresh run on another machine differed from the
# committed demo's mixture.json by ~1e-5). state_digest.json + batches.jsonl are reproducible on CPU and
# make up the fingerprint.
VOLATILE = ("metrics.jsonl", "checkpoint.pt", *REPORT_FILES, *MIXTURE_FILES)


def run_smoke_train(cfg: TrainStageConfig, upstream_hashes: dict[str, str], command: Command,
                    force: bool = False) -> Manifest:
    """Run stage 5 under the contract; returns the manifest (rank 0), or {"status": "stopped"}."""
    env = DistEnv.from_environ()
    run_dir = cfg.run.run_dir
    packed = require_upstream(run_dir, PACKED, producer(PACKED).script, upstream_hashes[PACKED], command)
    tok_man = require_upstream(run_dir, TOKENIZER, producer(TOKENIZER).script, upstream_hashes[TOKENIZER], command)
    packed_tok = {i["name"]: i["fingerprint"] for i in packed.get("inputs", [])}.get(TOKENIZER)
    if packed_tok != tok_man["fingerprint"]:
        raise StaleInputError(f"{run_dir / PACKED} was packed with a different tokenizer than {run_dir / TOKENIZER}; "
                              f"rerun {rerun_hint('pack_shuffle.py', command)}")
    inputs = [InputRef(name=PACKED, path=str(run_dir / PACKED), fingerprint=packed["fingerprint"]),
              InputRef(name=TOKENIZER, path=str(run_dir / TOKENIZER), fingerprint=tok_man["fingerprint"])]
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    if not force and stage.up_to_date():
        old_world = stage.existing["counters"].get("world_size")  # type: ignore[index]
        if old_world == env.world:
            log.info("%s: %s is up to date; skipping (use --force to rerun)", STAGE, stage.final_dir)
            if env.is_main:
                publish_reports(stage.final_dir, cfg.run.report_dir, REPORT_FILES + MIXTURE_FILES)
            return stage.existing  # type: ignore[return-value]
        log.info("%s: %s was trained on %s rank(s), now %s; rerunning", STAGE, stage.final_dir, old_world, env.world)
    kind, amp = resolve_device(cfg.train)
    resolve_execution(cfg.train, kind)  # a bad attention/device pair stops here, before any process group
    threads = setup_torch(cfg.train, kind, env)
    env.init(kind)
    try:
        if env.is_main:
            stage.begin()
        man = _train_and_write(cfg, stage, packed, tok_man, env, amp, threads)
    except BaseException:
        if env.is_main:
            stage.abort()
        raise
    finally:
        env.close()
    return man


def _train_and_write(cfg: TrainStageConfig, stage: StageRun, packed: dict[str, Any], tok_man: dict[str, Any],
                     env: DistEnv, amp: torch.dtype | None, threads: int) -> dict[str, Any]:
    seed, run_dir = cfg.run.seed, cfg.run.run_dir
    tok_path = run_dir / TOKENIZER / "tokenizer.json"
    tok = Tokenizer.from_file(str(tok_path))
    vocab = tok.get_vocab_size()
    blocks = PackedBlocks(run_dir / PACKED)
    # settings the packed data cannot support, lowered and said (train/autosize.py); the report shows them
    tc, sizing = fit_to_data(cfg.train, blocks.num_blocks, blocks.seq_len, env.world)
    cfg = dataclasses.replace(cfg, train=tc)
    plan = SamplePlan(blocks, tc.seq_len, tc.val_blocks, seed, vocab_size=vocab,
                      val_windows_per_block=tc.val_windows_per_block, strata=source_ranges(packed))
    attention, compiled = resolve_execution(tc, env.device.type)
    log.info("%s: %s blocks of %s from %s -> %s training samples of %s (%s held-out blocks); vocab %s; %s rank(s) "
             "on %s, %s thread(s) each, %s, %s attention%s", STAGE, f"{blocks.num_blocks:,}", f"{blocks.seq_len:,}",
             run_dir / PACKED, f"{len(plan.train_samples):,}", tc.seq_len, tc.val_blocks, f"{vocab:,}", env.world,
             env.device, threads, "bf16 autocast" if amp else "float32", attention, ", compiled" if compiled else "")
    identity = {"config_hash": stage.config_hash, PACKED: packed["fingerprint"],
                TOKENIZER: tok_man["fingerprint"], "world_size": env.world}
    ckpts = Checkpoints(run_dir / f"{ARTIFACT}.ckpt", identity)
    t0 = time.time()
    mixture = build_mixture(tc, plan, packed, run_dir, env.world)
    res = train(tc, plan, vocab, seed, env, ckpts, amp, mixture, attention, compiled)
    wall = time.time() - t0
    if res.status == "stopped":
        if env.is_main:
            stage.abort()
        blocks.close()
        return {"status": "stopped", "step": res.step, "checkpoints": str(ckpts.dir)}
    out: dict[str, Any] = {}
    if env.is_main:
        if mixture is not None:
            val = val_loss_by_source(res.model, plan, packed["by_source"], tc, env.device, amp)
            write_mixture(stage, mixture, plan, packed["by_source"], res.batches, tc, val)
        out = _write(cfg, stage, res, plan, tok, tok_path, tok_man, packed, env, amp, identity, wall, threads, sizing)
        publish_reports(stage.final_dir, cfg.run.report_dir, MIXTURE_FILES)
        shutil.rmtree(ckpts.dir, ignore_errors=True)  # the artifact holds the final checkpoint
    passed = env.broadcast_object(out.get("counters", {}).get("passed"))
    env.barrier()
    blocks.close()
    return out or {"counters": {"passed": passed}}


def _write(cfg: TrainStageConfig, stage: StageRun, res: TrainResult, plan: SamplePlan, tok: Tokenizer, tok_path: Path,
           tok_man: dict[str, Any], packed: dict[str, Any], env: DistEnv, amp: torch.dtype | None,
           identity: dict[str, Any], wall: float, threads: int, sizing: list[dict[str, Any]]) -> dict[str, Any]:
    tc, seed = cfg.train, cfg.run.seed
    tmp = stage.tmp_dir
    assert tmp is not None
    laps = Laps(STAGE, log)  # after the last step: each phase logged with its time
    mcfg = model_config(tc, plan.vocab_size or 0)
    torch.save(final_checkpoint(res, identity, mcfg), tmp / "checkpoint.pt")
    write_json_atomic(tmp / "state_digest.json", state_digest(res.model, res.optimizer))
    laps.lap("checkpoint + state digest")
    if tc.bench_steps:
        laps.start(f"doc-mask benchmark ({tc.bench_steps} steps with and without the mask)")
    bench = bench_doc_mask(res.model, plan, tc, env.device, amp, tc.bench_steps) if tc.bench_steps else None
    laps.lap("doc-mask benchmark")
    packed_dec = packed_samples(plan, tok, tc.decode_samples, rng_for(seed, "train", "decode"))
    laps.start(f"generating {tc.generate_tokens} tokens for each of the report's prompts")
    gens = generate(res.model, tok, env.device, tc.generate_tokens, seed)
    laps.lap("decoded samples + generations")
    with (tmp / "metrics.jsonl").open("w", encoding="utf-8") as fh:
        for h in res.history:
            fh.write(json.dumps({"kind": "train", **h}) + "\n")
        for v in res.val:
            fh.write(json.dumps({"kind": "val", **v}) + "\n")
    with (tmp / "batches.jsonl").open("w", encoding="utf-8") as fh:
        for b in res.batches:
            fh.write(json.dumps(b) + "\n")

    report = build_report(cfg, stage, res, plan, tok_path, tok_man, packed, env, amp, bench, packed_dec, gens, wall,
                          threads)
    report["sizing"] = sizing
    plot(res.history, res.val, report["loss"]["spikes"], tmp / "smoke_train_loss.png",
         f"{cfg.run.name}: {report['model']['params']['total'] / 1e6:.1f}M params, {report['batch']['global_tokens']:,} "
         f"tokens/step")
    write_json_atomic(tmp / "smoke_train.json", report)
    write_text_atomic(tmp / "smoke_train.md", report_markdown(report))
    laps.lap("report + loss plot")
    c = report["criteria"]
    counters = {"steps": res.step, "world_size": env.world, "params": report["model"]["params"]["total"],
                "tokens_trained": res.step * report["batch"]["global_tokens"], "first_loss": report["loss"]["first"],
                "last_loss": report["loss"]["last"], "val_first": report["val"]["first"],
                "val_last": report["val"]["last"], "spikes": len(report["loss"]["spikes"]),
                "median_tokens_per_s": report["throughput"]["median_tokens_per_s"], "passed": c["passed"],
                "criteria": {k: c[k]["ok"] for k in ("loss_finite", "loss_decreased", "val_decreased")},
                "status": res.status, "resumed_from": res.resumed_from}
    man = stage.commit(counters, volatile=VOLATILE, extra={"device": str(env.device), "dtype": report["dtype"],
                                                           "sizing": sizing})
    publish_reports(stage.final_dir, cfg.run.report_dir, REPORT_FILES)
    log.info("%s: criteria %s", STAGE, "; ".join(f"{k}: {'ok' if c[k]['ok'] else 'FAILED'} ({c[k]['detail']})"
                                                 for k in ("loss_finite", "loss_decreased", "val_decreased")))
    return man


def build_report(cfg: TrainStageConfig, stage: StageRun, res: TrainResult, plan: SamplePlan, tok_path: Path,
                 tok_man: dict[str, Any], packed: dict[str, Any], env: DistEnv, amp: torch.dtype | None,
                 bench: dict[str, Any] | None, packed_dec: list[dict[str, Any]], gens: list[dict[str, Any]],
                 wall: float, threads: int) -> dict[str, Any]:
    tc = cfg.train
    losses = [h["loss"] for h in res.history]
    rates = [h["tokens_per_s"] for h in res.history[min(2, len(res.history) - 1):]]  # skip warm-up steps
    gtok = tc.micro_batch * tc.grad_accum * env.world * tc.seq_len
    new_steps = res.step - (res.resumed_from or 0)
    spk = spikes(losses)
    val = res.val
    median_rate = median(rates) if rates else 0.0
    trained = np.array([s for b in res.batches for rank in b["samples"] for s in rank], np.int64)
    device_name = torch.cuda.get_device_name(env.device) if env.device.type == "cuda" else None
    mfu = mfu_report(res.model.cfg, int(plan.attended_pairs(trained, tc.doc_mask).sum()), len(trained) * tc.seq_len,
                     median_rate, env.world, device_name, tc.peak_tflops, amp == torch.bfloat16)
    return {
        "run": cfg.run.name, "artifact": str(stage.final_dir), "status": res.status, "config_hash": stage.config_hash,
        "device": str(env.device), "dtype": "bfloat16 autocast" if amp else "float32", "threads_per_rank": threads,
        "wall_s": round(wall, 1), "data_dir": str(cfg.run.run_dir / PACKED),
        "data": {"blocks": plan.blocks.num_blocks, "shards": len(plan.blocks.paths), "fingerprint": packed["fingerprint"],
                 "packed_seq_len": plan.blocks.seq_len, "windows": plan.windows,
                 "unused_per_block": plan.unused_per_block, "train_samples": len(plan.train_samples),
                 "val_samples": len(plan.val_samples),
                 "epochs_seen": round(res.step * tc.micro_batch * tc.grad_accum * env.world / len(plan.train_samples), 3)},
        "seq_len": tc.seq_len, "doc_mask": tc.doc_mask,
        "batch": {"micro_batch": tc.micro_batch, "grad_accum": tc.grad_accum, "world_size": env.world,
                  "global_sequences": tc.micro_batch * tc.grad_accum * env.world, "global_tokens": gtok},
        "model": {"n_layer": tc.n_layer, "d_model": tc.d_model, "n_head": tc.n_head, "params": res.model.num_params(),
                  "d_ff": res.model.cfg.d_ff},
        TOKENIZER: {"path": str(tok_path), "vocab_size": plan.vocab_size, "fingerprint": tok_man["fingerprint"]},
        "steps": {"first": 1 if res.history else 0, "last": res.step, "max_steps": tc.max_steps,
                  "resumed_from": res.resumed_from},
        "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None,
                 "min": min(losses) if losses else None, "spikes": spk,
                 "spike_rule": "loss > 1.5 x median of the previous 20 steps"},
        "val": {"first": val[0]["val_loss"] if val else None, "last": val[-1]["val_loss"] if val else None,
                "first_step": val[0]["step"] if val else None, "last_step": val[-1]["step"] if val else None,
                "tokens": val[-1]["tokens"] if val else 0, "blocks": tc.val_blocks, "series": val},
        "throughput": {"median_tokens_per_s": median_rate,
                       "overall_tokens_per_s": new_steps * gtok / max(wall, 1e-9),
                       "train_s": round(res.train_s, 1), "eval_s": round(res.eval_s, 1),
                       "attention": res.attention, "compiled": res.compiled,
                       "compile_s": None if res.compile_s is None else round(res.compile_s, 1),
                       "device_name": device_name, "mfu": mfu, "mask_bench": bench},
        "memory": {"peak_mb": max((h["mem_mb"] for h in res.history), default=peak_rss_mb()),
                   "kind": "torch.cuda.max_memory_allocated" if env.device.type == "cuda" else "peak RSS (ru_maxrss)",
                   "peak_rss_mb": peak_rss_mb(), "counts": MEMORY_COUNTS, "heap": res.heap},
        "samples": {PACKED: packed_dec, "generated": gens},
        "criteria": criteria(res.history, val, res.status),
        "config": to_plain(tc),
    }
