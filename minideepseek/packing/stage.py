"""Stage 4 driver: ``mixed_dedup`` + ``tokenizer`` -> ``data/<run>/packed/`` (uint32 blocks of
``seq_len`` with document spans, shuffled, bounded ``.arrow`` shards) and
``reports/<run>/packing_report.{json,md}``.

Two seeded shuffles, both from ``run.seed``: documents before packing (so a block mixes sources
instead of holding one source's run of documents) and blocks after packing (so a training run
that reads shards in order still sees a shuffled stream). Their orders' sha256 are in the
manifest. See ``packer.py`` for how memory stays bounded.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .. import pipeline
from ..arrow_io import shard_paths
from ..fastbpe import encoder_summary, use_encoder
from ..fsio import write_json_atomic, write_text_atomic
from ..invocation import Command
from ..mapped import MappedArrow
from ..pipeline import MIXED_DEDUP, MIXED_RAW, TOKENIZER, producer
from ..provenance import peak_rss_mb
from ..rng import rng_for
from ..sizing import Sizing
from ..stage import InputRef, Manifest, StageRun, read_manifest, require_upstream
from ..tokenizer.io import load_tokenizer
from .by_source import pack_by_source
from .config import PackConfig, PackStageConfig
from .packer import DocBatch, order_sha256, pack_documents
from .partition import pack_partitioned
from .report import REPORT_FILES, build_report, decode_samples, report_markdown

log = logging.getLogger(__name__)

# the stage's identity is the registry's (minideepseek/pipeline.py), written once
SPEC = pipeline.stage("pack_shuffle")
STAGE, ARTIFACT = SPEC.name, SPEC.artifact
DOCS = MIXED_DEDUP
SCHEMA_VERSION = 1


def run_pack(cfg: PackStageConfig, upstream_hashes: dict[str, str], command: Command,
             force: bool = False, executor: Any = None, restart: bool = False) -> Manifest:
    """Run stage 4 under the contract (skip when up to date, refuse stale upstreams)."""
    run_dir = cfg.run.run_dir
    docs = require_upstream(run_dir, DOCS, producer(DOCS).script, upstream_hashes[DOCS], command)
    tok = require_upstream(run_dir, TOKENIZER, producer(TOKENIZER).script, upstream_hashes[TOKENIZER], command)
    inputs = [InputRef(name=DOCS, path=str(run_dir / DOCS), fingerprint=docs["fingerprint"]),
              InputRef(name=TOKENIZER, path=str(run_dir / TOKENIZER), fingerprint=tok["fingerprint"])]
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    return stage.execute(lambda tmp: _build(cfg, docs, tmp, stage, executor), cfg.run.report_dir, REPORT_FILES,
                         force, restart=restart)


def doc_batches(docs: MappedArrow, order: np.ndarray, batch_docs: int) -> Iterator[DocBatch]:
    """Documents in ``order``, ``batch_docs`` at a time, gathered from the memory-mapped upstream."""
    for j in range(0, len(order), batch_docs):
        t = docs.take(order[j:j + batch_docs])
        docs.release()  # the copy is taken: drop the mapped pages it faulted in (see mapped.py)
        yield DocBatch(t.column("id").to_pylist(), t.column("source").to_pylist(), t.column("text").to_pylist())


def _pack_once(pc: PackConfig, docs: MappedArrow, doc_order: np.ndarray, tok: Any, seed: int, out: Path,
               run_dir: Path, executor: Any, units: Any = None) -> tuple[Any, dict[str, Any] | None, np.ndarray]:
    """Tokenize, pack and write every document into ``out`` at ``pc.seq_len``: (stats, by-source table or
    None, the document order used). With the stage's ``units`` the work is done in resumable units named
    "s=<seq_len>." + what the packer, the partitions or the write call them."""
    ray = executor is not None and executor.kind == "ray"
    tag = f"s={pc.seq_len}."
    out.mkdir(parents=True, exist_ok=True)
    if pc.by_source:  # one source at a time; on Ray each source's partitions are tasks
        shards = [str(p.resolve()) for p in shard_paths(run_dir / DOCS)]
        tok_path = str((run_dir / TOKENIZER / "tokenizer.json").resolve())
        return pack_by_source(docs, lambda order: doc_batches(docs, order, pc.batch_docs), tok, pc, seed, out,
                              out / ".work", executor if ray else None, shards, tok_path, units, tag)
    if ray:  # tokenize + pack per partition (partition.py)
        shards = [str(p.resolve()) for p in shard_paths(run_dir / DOCS)]  # a Ray worker's cwd is not ours
        tok_path = str((run_dir / TOKENIZER / "tokenizer.json").resolve())
        stats = pack_partitioned(executor, shards, doc_order, tok_path, tok.get_vocab_size(), pc,
                                 rng_for(seed, "pack", "blocks"), out, out / ".work", units, tag)
        return stats, None, doc_order
    stats = pack_documents(lambda k: doc_batches(docs, doc_order[k:], pc.batch_docs), tok, pc,
                           rng_for(seed, "pack", "blocks"), out, out / ".work", units, tag)
    return stats, None, doc_order


def resize_reason(stats: Any, pc: PackConfig) -> str | None:
    """Why ``pc.seq_len`` is too coarse for this run's tokens (``pack.auto_seq_len``), or None: fewer than
    ``min_blocks`` blocks, or more than ``max_tail_share`` of the tokens lost to the tail (or padding)."""
    produced = max(1, stats.tokens_produced)
    waste = stats.dropped_tail_tokens if pc.tail == "drop" else stats.pad_tokens
    if stats.blocks < pc.min_blocks:
        return (f"{stats.tokens_produced:,} tokens fill {stats.blocks:,} block(s) of {pc.seq_len:,}, fewer than "
                f"pack.min_blocks={pc.min_blocks}")
    if waste / produced > pc.max_tail_share:
        what = "dropped as the tail" if pc.tail == "drop" else "padding"
        return (f"{waste:,} of {stats.tokens_produced:,} tokens ({100 * waste / produced:.1f}%) would be {what}, "
                f"more than pack.max_tail_share={pc.max_tail_share}")
    return None


def recipe_weights(run_dir: Path) -> dict[str, float]:
    """The recipe's source weights, from the config stage 1 recorded in mixed_raw's manifest."""
    man = read_manifest(run_dir / MIXED_RAW) or {}
    return {s["name"]: float(s["weight"]) for s in man.get("config", {}).get("sources", [])}


def stage1_target(run_dir: Path) -> dict[str, Any] | None:
    """What stage 1's quota counted, from its manifest: the report compares shares against it."""
    sampler = ((read_manifest(run_dir / MIXED_RAW) or {}).get("config") or {}).get("sampler") or {}
    for unit in ("docs", "tokens"):
        if sampler.get(f"target_{unit}"):
            return {"unit": unit, "value": sampler[f"target_{unit}"]}
    return None


def _build(cfg: PackStageConfig, docs_man: dict[str, Any], tmp: Path, stage: StageRun,
           executor: Any = None) -> Manifest:
    pc, seed, run_dir = cfg.pack, cfg.run.seed, cfg.run.run_dir
    tok = load_tokenizer(run_dir / TOKENIZER / "tokenizer.json", pc.num_threads)
    use_encoder(tok, pc.encoder)
    docs = MappedArrow(shard_paths(run_dir / DOCS), "stream", columns=["id", "source", "text"])
    doc_order = rng_for(seed, "pack", "documents").permutation(docs.num_rows)
    log.info("%s: %s documents from %s, tokenizer vocab %s, seq_len %s, tail %s", STAGE, f"{docs.num_rows:,}",
             run_dir / DOCS, f"{tok.get_vocab_size():,}", f"{pc.seq_len:,}", pc.tail)
    by_source: dict[str, Any] | None = None
    sizing: list[dict[str, Any]] = []
    first_why: str | None = None
    configured = pc.seq_len
    try:
        while True:
            # each attempt in its own directory: one too coarse for the data is discarded whole (and recorded
            # as the unit "s=<seq_len>.rejected", so a resumed run does not pack at that seq_len again)
            att = tmp / f".attempt-{pc.seq_len}"
            rejected = f"s={pc.seq_len}.rejected"
            if stage.units.done(rejected):
                why = (stage.units.get(rejected) or {})["why"]
            else:
                stats, by_source, order = _pack_once(pc, docs, doc_order, tok, seed, att, run_dir, executor,
                                                     stage.units)
                why = resize_reason(stats, pc) if pc.auto_seq_len else None
                if why is None or pc.seq_len // 2 < pc.min_seq_len:
                    break
                stage.units.finish(rejected, {"why": why})
            first_why = first_why or why
            log.info("%s: %s; packing again at seq_len %s", STAGE, why, f"{pc.seq_len // 2:,}")
            shutil.rmtree(att, ignore_errors=True)
            pc = dataclasses.replace(pc, seq_len=pc.seq_len // 2)
        for p in sorted(att.iterdir()):  # (a resumed run finds what a killed one had not moved yet)
            p.rename(tmp / p.name)
        att.rmdir()
        doc_order = order
        if pc.seq_len != configured:
            left = f"; at {pc.seq_len:,}: {why}" if why else ""
            sizing.append(Sizing(STAGE, "pack.seq_len", configured, pc.seq_len,
                                 f"at {configured:,}, {first_why}{left}").announce().to_json())
    finally:
        docs.close()
    assert stats.docs == docs.num_rows == docs_man["counters"].get("docs_out", stats.docs), \
        "every upstream document is packed"
    samples = decode_samples(tmp, tok, pc.decode_samples, rng_for(seed, "pack", "decode"))
    report = build_report(stats, pc, recipe_weights(run_dir), samples, wall_s=stage.elapsed(),
                          peak_rss=peak_rss_mb(), threads=pc.num_threads)
    report["stage1_target"] = stage1_target(run_dir)
    report["encoder"] = encoder_summary(tok)
    report["orders"] = {"doc_order_sha256": order_sha256(doc_order),
                        "block_order_sha256": stats.block_order_sha256}
    report["sizing"] = sizing
    extra: dict[str, Any] = {"orders": report["orders"], "sizing": sizing}
    if by_source is not None:
        report["by_source"] = extra["by_source"] = by_source
    write_json_atomic(tmp / "packing_report.json", report)
    write_text_atomic(tmp / "packing_report.md", report_markdown(report))
    counters = {k: report[k] for k in ("docs", "blocks", "seq_len", "tokens_produced", "tokens_in_blocks",
                                       "packing_efficiency", "dropped_tail_tokens", "pad_tokens", "eot")}
    counters["shards"] = len(stats.shards)
    return stage.commit(counters, volatile=REPORT_FILES, extra=extra)


def summary_line(cfg: Any, man: dict[str, Any]) -> str:
    """The one line the stage script prints when it is done."""
    c = man["counters"]
    tail = (f"dropped tail {c['dropped_tail_tokens']:,} tokens" if cfg.pack.tail == "drop"
            else f"{c['pad_tokens']:,} pad tokens")
    return (f"packed: {c['docs']:,} docs, {c['tokens_produced']:,} tokens -> {c['blocks']:,} blocks of "
            f"{c['seq_len']:,} (efficiency {100 * c['packing_efficiency']:.3f}%, {tail}) in {c['shards']} shard(s) at "
            f"{cfg.run.run_dir / ARTIFACT}; report: {cfg.run.report_dir / 'packing_report.md'}")
