"""Stage 1 driver: sources -> normalized, recipe-sampled documents in ``data/<run>/mixed_raw``.

Per source, in config order: records come in seeded sampling order, are extracted and validated in
a process pool (ordered results, so parallelism does not change the output), counted with the
DeepSeek tokenizer, and accepted against the source's quota. Accepted rows are spilled per source;
the final dataset is assembled from the spills (after a possible ``shrink`` truncation) and the
source-mix report is computed from exactly the rows written.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..arrow_io import DatasetWriter, iter_dataset_rows
from ..config import ConfigError
from ..executor import LocalExecutor
from ..records import DOC_FEATURES, SCHEMA_VERSION, RawDoc, Reject
from ..sources import make_source
from ..stage import InputRef, StageRun, write_json_atomic, write_text_atomic
from ..tokencount import TokenCounter
from ..withdraw.tickets import Matcher, TicketLog, log_matcher
from .config import MixSamplerConfig
from .filter_report import build_filter_report, filter_report_markdown
from .process import ProcessSettings, process_batch
from .quota import Taker, run_quotas
from .report import build_source_mix, source_mix_markdown

log = logging.getLogger(__name__)

ARTIFACT = "mixed_raw"
EXAMPLES_PER_RULE = 3
REPORTS = ("source_mix.json", "source_mix.md", "filter_report.json", "filter_report.md")
STAGE = "mix_sampler"
DELETION_INPUT = "deletion_requests"


class _Fetcher:
    """Extract + validate batches in a pool with a small look-ahead window, then count tokens."""

    def __init__(self, pool: ProcessPoolExecutor | None, settings: ProcessSettings, counter: TokenCounter,
                 withdrawn: Matcher | None = None) -> None:
        self.pool = pool
        self.settings = settings
        self.counter = counter
        self.withdrawn = withdrawn

    def __call__(self, raws: list[RawDoc]) -> list[dict | Reject]:
        if self.pool is None:
            items = process_batch((raws, self.settings))
        else:
            # split the batch across workers; results are re-joined in order
            n = max(1, len(raws) // (self.pool._max_workers * 2))  # noqa: SLF001
            futs: list[Future] = [self.pool.submit(process_batch, (raws[i:i + n], self.settings))
                                  for i in range(0, len(raws), n)]
            items = [x for f in futs for x in f.result()]
        if self.withdrawn:
            items = [_withdrawn_reject(x, self.withdrawn) for x in items]
        rows = [x for x in items if not isinstance(x, Reject)]
        for row, n_tok in zip(rows, self.counter.count([r["text"] for r in rows]), strict=True):
            row["n_tokens"] = n_tok
        return items


def _withdrawn_reject(item: dict | Reject, matcher: Matcher) -> dict | Reject:
    """A document a deletion request withdrew becomes a ``withdrawn`` reject: counted, logged with its
    id and ticket only (never its text), not charged to the error budget."""
    if isinstance(item, Reject):
        return item
    hit = matcher.match(item)
    if hit is None:
        return item
    return Reject(item["source"], item["id"], item.get("url") or "", "withdrawn", f"{hit[0]} ({hit[1]})", "",
                  kind="withdrawn", id=item["id"])


def deletion_input(cfg: MixSamplerConfig) -> InputRef | None:
    """The ticket log as a stage-1 input, once a deletion request was accepted (before that there is
    no such input, so runs that never withdrew anything keep their manifests)."""
    path = cfg.run.deletion_log_path
    fp = TicketLog(path).fingerprint()
    if fp is None:
        return None
    return InputRef(name=DELETION_INPUT, path=str(path), fingerprint=fp)


def _ingest_files(cfg: MixSamplerConfig, sources: dict, takers: dict[str, Taker],
                  reject_counts: dict[str, Counter], rejects_fh: Any) -> dict[str, Any]:
    """Read and validate every file of the file-based sources before sampling: their ingestion rejects
    go to rejects.jsonl (with file, line, offset) and count against the error budget; file-level
    problems are collected per file. A source left with no record stops the stage, unless
    ``sampler.empty_source=skip`` (then it leaves the recipe and the report says so)."""
    out: dict[str, Any] = {"sources": {}, "empty_sources": []}
    for name, src in sources.items():
        if not hasattr(src, "load"):
            continue  # streaming/demo sources validate each record as it is sampled
        records = src.load()
        for rej in src.rejects:
            reject_counts[name][rej.reason] += 1
            rejects_fh.write(rej.to_json() + "\n")
        takers[name].count_ingestion_rejects(src.rejects)
        files = [r.to_dict() for r in src.file_reports]
        out["sources"][name] = {
            "files": files, "records": len(records), "rejects": sum(reject_counts[name].values()),
            "lines": sum(f["lines"] for f in files), "blank_lines": sum(f["blank_lines"] for f in files),
            "file_problems": sum(f["status"] != "ok" for f in files)}
        if not records:
            top = ", ".join(f"{r}={n:,}" for r, n in reject_counts[name].most_common(4)) or "none"
            problems = "; ".join(f"{f['file']}: {f['problem']}" for f in files if f["status"] != "ok")[:400]
            _empty_source(cfg, name, f"0 valid records in {len(files)} file(s) (rejects: {top}"
                          + (f"; file problems: {problems}" if problems else "") + ")", out)
    return out


def _empty_source(cfg: MixSamplerConfig, name: str, why: str, ingestion: dict[str, Any]) -> None:
    if cfg.sampler.empty_source == "error":
        raise ConfigError(f"source {name} yields no documents: {why}; fix the source (path, format, text_field, "
                          f"filters) or set sampler.empty_source=skip to run without it")
    log.warning("source %s yields no documents (%s); skipped (sampler.empty_source=skip)", name, why)
    ingestion["empty_sources"].append(name)


def _check_empty_after_sampling(cfg: MixSamplerConfig, takers: dict[str, Taker], ingestion: dict[str, Any]) -> None:
    for name, t in takers.items():
        if t.stats.accepted == 0 and name not in ingestion["empty_sources"]:
            top = ", ".join(f"{r}={n:,}" for r, n in (t.stats.rejects + Counter(
                {f"{f}:{r}": n for (f, r), n in t.stats.filtered.items()})).most_common(4))
            _empty_source(cfg, name, f"{t.stats.seen:,} records seen, none kept ({top or 'no records'})", ingestion)


def run_mix_sampler(cfg: MixSamplerConfig, force: bool = False, executor: Any = None) -> dict[str, Any]:
    run_dir = cfg.run.run_dir
    sources = {s.name: make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers, cfg.sampler.max_chars)
               for s in cfg.sources}
    if cfg.demo_corpus.strict:  # drift / unpinned demo-corpus packages stop the run (demo_corpus/pins.py)
        for corpus in {id(s.corpus): s.corpus for s in sources.values() if hasattr(s, "corpus")}.values():
            corpus.require_pinned()
    inputs = [src.input_ref() for src in sources.values()]
    deletions = deletion_input(cfg)
    if deletions is not None:
        inputs.append(deletions)
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    return stage.execute(lambda tmp: _build(cfg, sources, tmp, stage, executor), cfg.run.report_dir, REPORTS, force)


def _build(cfg: MixSamplerConfig, sources: dict, tmp: Path, stage: StageRun, executor: Any = None) -> dict[str, Any]:
    sc = cfg.sampler
    withdrawn = log_matcher(cfg.run.deletion_log_path)
    if withdrawn:
        log.info("%s: excluding documents withdrawn by the tickets in %s", STAGE, cfg.run.deletion_log_path)
    counter = TokenCounter(sc.token_counter)
    spill_root = tmp / "_spill"
    spills = {name: DatasetWriter(spill_root / name, DOC_FEATURES, sc.max_shard_bytes) for name in sources}
    buffers: dict[str, list[dict]] = {name: [] for name in sources}
    rejects_fh = (tmp / "rejects.jsonl").open("w", encoding="utf-8")
    reject_counts: dict[str, Counter] = {name: Counter() for name in sources}
    bar = tqdm(total=sc.target, unit=sc.unit, desc="sampling", dynamic_ncols=True, mininterval=2)

    seen_ids: set[str] = set()
    dup_ids: Counter = Counter()
    mods: dict[str, Counter] = {name: Counter() for name in sources}
    examples: dict[str, dict[tuple[str, str], list[dict]]] = {name: {} for name in sources}

    def emitter(name: str) -> Callable[[dict], None]:
        def emit(row: dict) -> None:
            row_mods = row.pop("_mods", None) or {}
            mods[name].update(row_mods)
            if row_mods:
                mods[name]["docs_modified"] += 1
            if row["id"] in seen_ids:  # the source reused an id: keep the doc, make its id unique
                k = 2
                while f"{row['id']}~{k}" in seen_ids:
                    k += 1
                row["id"] = f"{row['id']}~{k}"
                row["audit_trace"] = [*row["audit_trace"], "sampler:duplicate_source_id"]
                dup_ids[name] += 1
            seen_ids.add(row["id"])
            buffers[name].append(row)
            bar.update(1 if sc.unit == "docs" else row["n_tokens"])
            if len(buffers[name]) >= 512:
                spills[name].write_rows(buffers[name])
                buffers[name].clear()
        return emit

    def on_reject(rej: Reject) -> None:
        if rej.kind == "filtered":
            ex = examples[rej.source].setdefault((rej.filter, rej.reason), [])
            if len(ex) < EXAMPLES_PER_RULE:
                ex.append({"id": rej.id, "url": rej.url, "text": rej.snippet[:200]})
        elif rej.kind == "withdrawn":  # counted by its Taker; the ticket log is its record, not rejects.jsonl
            return
        else:
            reject_counts[rej.source][rej.reason] += 1
        rejects_fh.write(rej.to_json() + "\n")

    # the extraction/filter pool: local processes, or Ray tasks (--executor ray); results are re-joined
    # in submission order, so the sample does not depend on where they ran
    pool = (executor or LocalExecutor()).pool(sc.num_proc)
    try:
        takers = {}
        for s in cfg.sources:
            settings = ProcessSettings(source=s.name, min_chars=sc.min_chars, max_chars=sc.max_chars,
                                       extract=cfg.extract, filters=s.filters, lang=s.lang)
            takers[s.name] = Taker(s.name, sources[s.name].iter_raw, sc.unit, s.max_epochs,
                                   _Fetcher(pool, settings, counter, withdrawn), emitter(s.name), on_reject,
                                   sc.batch_size, sc.max_reject_fraction)
        weights = {s.name: s.weight for s in cfg.sources}
        ingestion = _ingest_files(cfg, sources, takers, reject_counts, rejects_fh)
        for name in ingestion["empty_sources"]:
            weights[name] = 0.0  # sampler.empty_source=skip: out of the recipe, reported
        if not any(weights.values()):
            raise ConfigError("stage 1: every source is empty after ingestion; see the warnings above")
        outcome = run_quotas(takers, weights, sc.target, sc.unit, sc.shortfall)
        _check_empty_after_sampling(cfg, takers, ingestion)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        bar.close()
        rejects_fh.close()
    for name in sources:
        spills[name].write_rows(buffers[name])
        spills[name].close()

    # Assemble: sources in config order, each in sampling order, truncated where shrink says so.
    writer = DatasetWriter(tmp, DOC_FEATURES, sc.max_shard_bytes)
    realized: dict[str, Counter] = {}
    for s in cfg.sources:
        keep = outcome[s.name]["keep"]
        c: Counter = Counter()
        batch: list[dict] = []
        for i, row in enumerate(iter_dataset_rows(spill_root / s.name)):
            if keep is not None and i >= keep:
                c["dropped_by_shrink"] += 1
                continue
            c["docs"] += 1
            c["tokens"] += row["n_tokens"]
            c["chars"] += row["n_chars"]
            c[f"epoch_{row['id'].rsplit('#e', 1)[1] if '#e' in row['id'] else 1}"] += 1
            batch.append(row)
            if len(batch) >= 512:
                writer.write_rows(batch)
                batch.clear()
        writer.write_rows(batch)
        realized[s.name] = c
    shards = writer.close()
    shutil.rmtree(spill_root)

    mix = build_source_mix(cfg, takers, outcome, realized, reject_counts)
    mix["ingestion"] = ingestion
    write_json_atomic(tmp / "source_mix.json", mix)
    write_text_atomic(tmp / "source_mix.md", source_mix_markdown(mix))
    freport = build_filter_report(cfg, takers, realized, mods, examples)
    write_json_atomic(tmp / "filter_report.json", freport)
    write_text_atomic(tmp / "filter_report.md", filter_report_markdown(freport))
    counters = {
        "docs": writer.num_rows,
        "shards": len(shards),
        "rejects": {n: dict(sorted(c.items())) for n, c in reject_counts.items()},
        "per_source": {n: dict(sorted(c.items())) for n, c in realized.items()},
        "duplicate_source_ids": dict(sorted(dup_ids.items())),
        "filtered": {n: sum(t.stats.filtered.values()) for n, t in takers.items()},
        "file_problems": [{"source": n, **f} for n, v in ingestion["sources"].items() for f in v["files"]
                          if f["status"] != "ok" or f.get("notes")],
        "empty_sources": ingestion["empty_sources"],
    }
    if withdrawn:
        counters["withdrawn_at_ingestion"] = {n: t.stats.withdrawn for n, t in takers.items()}
    return stage.commit(counters, extra={"token_counter": {"name": counter.name, "path": str(counter.path)}})

