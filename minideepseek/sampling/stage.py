"""Stage 1 driver: sources -> normalized, recipe-sampled documents in ``data/<run>/mixed_raw``.

Per source, in config order: records come in seeded sampling order, are extracted and validated in
a process pool (ordered results, so parallelism does not change the output), counted with the
DeepSeek tokenizer, and accepted against the source's quota. Accepted rows are spilled per source;
the final dataset is assembled from the spills (after a possible ``shrink`` truncation) and the
source-mix report is computed from exactly the rows written.

Memory does not grow with the sources' size: finite sources spool their records to
``<tmp>/_spool`` (removed when sampling ends, before the commit) and the pool works on one batch
(``sampler.batch_size`` records) at a time. What does grow, per *accepted* document: the set of ids
already emitted (duplicate-id renaming must see every earlier id; ~105 bytes an id, measured: ~52 MB
for the seed's 500K documents of 1B tokens) and each Taker's units array (8 bytes a document); and
one ``FileReport`` per input file of a local source (they are part of source_mix.json).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .. import pipeline
from ..arrow_io import DatasetWriter, iter_dataset_rows
from ..config import ConfigError
from ..executor import LocalExecutor
from ..fsio import write_json_atomic, write_text_atomic
from ..invocation import Command
from ..mdsafe import redact
from ..progress import RateLog
from ..records import DOC_FEATURES, SCHEMA_VERSION, RawDoc, Reject, copy_epoch
from ..sources import make_source
from ..stage import InputRef, Manifest, StageRun
from ..tickets import Matcher, TicketLog, log_matcher
from ..tokencount import TokenCounter
from .config import MixSamplerConfig
from .filter_report import build_filter_report, filter_report_markdown
from .pilot import needs_pilot, resolve_top_fraction
from .process import ProcessSettings, process_batch
from .quality_build import ensure_models
from .quality_report import quality_chains, write_quality_report
from .quota import Taker, run_quotas
from .report import build_source_mix, source_mix_markdown, verdict_line
from .resume import BatchLog, clear_leftovers
from .signals import STORE_DIR, SignalStore

log = logging.getLogger(__name__)

# the stage's identity is the registry's (minideepseek/pipeline.py), written once
SPEC = pipeline.stage("mix_sampler")
STAGE, ARTIFACT, REPORTS = SPEC.name, SPEC.artifact, SPEC.reports
EXAMPLES_PER_RULE = 3
DELETION_INPUT = "deletion_requests"


class _Fetcher:
    """Extract + validate batches in a pool, then count tokens. ``submit`` starts a batch and returns
    the call that collects it, so the Taker can have the next batch extracted while it takes this one.
    With ``batches`` every collected batch is a unit of work (resume.py): recorded once counted, read
    back instead of fetched when a killed run had finished it."""

    def __init__(self, pool: ProcessPoolExecutor | None, settings: ProcessSettings, counter: TokenCounter,
                 withdrawn: Matcher | None = None, store: SignalStore | None = None,
                 batches: BatchLog | None = None) -> None:
        self.pool = pool
        self.settings = settings
        self.counter = counter
        self.withdrawn = withdrawn
        self.store = store
        self.batches = batches

    def __call__(self, raws: list[RawDoc]) -> list[dict | Reject]:
        return self.submit(raws)()

    def submit(self, raws: list[RawDoc]) -> Callable[[], list[dict | Reject]]:
        if self.batches is None:
            collect = self._fetch(raws)
        else:
            collect = self.batches.batch(self.settings.source, lambda: self._fetch(raws))
        return lambda: self._stored(collect())

    def _fetch(self, raws: list[RawDoc]) -> Callable[[], list[dict | Reject]]:
        if self.pool is None:
            return lambda: self._finish(process_batch((raws, self.settings)))
        # split the batch across workers; results are re-joined in order
        n = max(1, len(raws) // (self.pool._max_workers * 2))  # noqa: SLF001
        futs: list[Future] = [self.pool.submit(process_batch, (raws[i:i + n], self.settings))
                              for i in range(0, len(raws), n)]
        return lambda: self._finish([x for f in futs for x in f.result()])

    def _finish(self, items: list[dict | Reject]) -> list[dict | Reject]:
        """In this process and in batch order: deletion requests, then the token counts (of the kept
        rows, and with the signal store of what a dropped document's text would weigh)."""
        if self.withdrawn:
            items = [_withdrawn_reject(x, self.withdrawn) for x in items]
        rows = [x for x in items if not isinstance(x, Reject)]
        for row, n_tok in zip(rows, self.counter.count([r["text"] for r in rows]), strict=True):
            row["n_tokens"] = n_tok
        if self.store is not None:
            # signals: full: the count of what a dropped document's text would weigh if a looser rule kept it
            dropped = [x.store for x in items if isinstance(x, Reject) and x.store is not None and "_text" in x.store]
            for row, n_tok in zip(dropped, self.counter.count([r["_text"] for r in dropped]), strict=True):
                row["n_tokens"] = n_tok
                del row["_text"]  # counted: the store never keeps it (nor does a recorded batch)
        return items

    def _stored(self, items: list[dict | Reject]) -> list[dict | Reject]:
        """Signal-store rows, in batch order: a kept row's token count, a dropped one's row as fetched."""
        if self.store is None:
            return items
        for x in items:
            if isinstance(x, Reject):
                if x.store is not None:
                    self.store.add(self.settings.source, x.store)
            elif "_store" in x:
                row = x.pop("_store")
                row["n_tokens"] = x["n_tokens"]
                self.store.add(self.settings.source, row)
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
        if not hasattr(src, "load") or not getattr(src, "reads_up_front", True):
            continue  # streaming/demo sources validate each record as it is sampled; warc reads files as needed
        records = src.load()
        for rej in src.rejects:
            reject_counts[name][rej.reason] += 1
            rejects_fh.write(rej.to_json() + "\n")
        takers[name].count_ingestion_rejects(src.rejects)
        out["sources"][name] = _ingestion_entry(src.file_reports, len(records), sum(reject_counts[name].values()))
        files = out["sources"][name]["files"]
        if not records:
            top = ", ".join(f"{r}={n:,}" for r, n in reject_counts[name].most_common(4)) or "none"
            problems = "; ".join(f"{f['file']}: {f['problem']}" for f in files if f["status"] != "ok")[:400]
            _empty_source(cfg, name, f"0 valid records in {len(files)} file(s) (rejects: {top}"
                          + (f"; file problems: {problems}" if problems else "") + ")", out)
    return out


def _ingestion_entry(reports: list[Any], records: int, rejects: int) -> dict[str, Any]:
    """A file-based source's line of the ingestion report, from its per-file reports."""
    files = [r.to_dict() for r in reports]
    entry = {"files": files, "records": records, "rejects": rejects, "lines": sum(f["lines"] for f in files),
             "blank_lines": sum(f["blank_lines"] for f in files), "file_problems": sum(f["status"] != "ok" for f in files)}
    skipped: Counter = Counter()
    for f in files:
        skipped.update(f.get("skipped", {}))
    if skipped:  # WARC records that are no documents by design (request, metadata, non-200, non-HTML)
        entry["skipped"] = dict(sorted(skipped.items()))
    return entry


def _read_as_needed(sources: dict, ingestion: dict[str, Any]) -> None:
    """After sampling: the files a source read as the sampler needed them (``warc``), in name order, with
    how many of its files that was (reading stops when the recipe is full)."""
    for name, src in sources.items():
        if getattr(src, "reads_up_front", True):
            continue
        reports = sorted(src.file_reports, key=lambda r: r.file)
        entry = _ingestion_entry(reports, sum(r.records for r in reports), sum(sum(r.rejects.values()) for r in reports))
        entry["files_listed"], entry["files_read"] = len(src.entries), len(reports)
        ingestion["sources"][name] = entry


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


def run_mix_sampler(cfg: MixSamplerConfig, upstream: dict[str, str] | None = None, command: Command = "",
                    force: bool = False, executor: Any = None, restart: bool = False) -> Manifest:
    """Run stage 1 under the contract. It reads no upstream artifact (``upstream``, ``command``:
    the registry's uniform signature, unused)."""
    run_dir = cfg.run.run_dir
    sources = {s.name: make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers, cfg.sampler.max_chars)
               for s in cfg.sources}
    if cfg.demo_corpus.strict:  # drift / unpinned demo-corpus packages stop the run (demo_corpus/pins.py)
        for corpus in {id(s.corpus): s.corpus for s in sources.values() if hasattr(s, "corpus")}.values():
            corpus.require_pinned()
    inputs = [src.input_ref() for src in sources.values()]
    # a quality filter's model: built here first when its config says train: (from the pinned corpus), and
    # fingerprinted either way, so a changed model makes this stage stale
    inputs += ensure_models(cfg)
    deletions = deletion_input(cfg)
    if deletions is not None:
        inputs.append(deletions)
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    return stage.execute(lambda tmp: _build(cfg, sources, tmp, stage, executor), cfg.run.report_dir, REPORTS, force,
                         restart=restart)


@dataclass
class _Sampled:
    """What phase 1 (sampling) hands to assembly and the reports."""

    takers: dict[str, Taker]
    outcome: dict[str, Any]
    ingestion: dict[str, Any]
    reject_counts: dict[str, Counter]
    mods: dict[str, Counter]  # cleanup modifier counts per source (filter report)
    examples: dict[str, dict[tuple[str, str], list[dict]]]  # filtered examples per (filter, reason)
    dup_ids: Counter  # ids a source reused, made unique
    pilots: dict[str, dict[str, Any]] = field(default_factory=dict)  # quality top_fraction pilots, per source


class _Collector:
    """Where accepted rows and rejects go while sampling: a spill dataset per source (in sampling order),
    rejects.jsonl, and the counters the reports are built from."""

    def __init__(self, cfg: MixSamplerConfig, names: list[str], tmp: Path) -> None:
        sc = cfg.sampler
        self.unit = sc.unit
        self.spill_root = tmp / "_spill"
        self.spool_root = tmp / "_spool"  # the finite sources' record spools (sources/spool.py), while sampling
        self.spills = {n: DatasetWriter(self.spill_root / n, DOC_FEATURES, sc.max_shard_bytes) for n in names}
        self.rejects_fh = (tmp / "rejects.jsonl").open("w", encoding="utf-8")
        self.reject_counts: dict[str, Counter] = {n: Counter() for n in names}
        self.seen_ids: set[str] = set()
        self.dup_ids: Counter = Counter()
        self.mods: dict[str, Counter] = {n: Counter() for n in names}
        self.examples: dict[str, dict[tuple[str, str], list[dict]]] = {n: {} for n in names}
        self.bar = tqdm(total=sc.target, unit=sc.unit, desc="sampling", dynamic_ncols=True, mininterval=2)
        self.rate = RateLog("sampling", sc.target, sc.unit, logger=log)

    def emitter(self, name: str) -> Callable[[dict], None]:
        def emit(row: dict) -> None:
            row_mods = row.pop("_mods", None) or {}
            self.mods[name].update(row_mods)
            if row_mods:
                self.mods[name]["docs_modified"] += 1
            if row["id"] in self.seen_ids:  # the source reused an id: keep the doc, make its id unique
                k = 2
                while f"{row['id']}~{k}" in self.seen_ids:
                    k += 1
                row["id"] = f"{row['id']}~{k}"
                row["audit_trace"] = [*row["audit_trace"], "sampler:duplicate_source_id"]
                self.dup_ids[name] += 1
            self.seen_ids.add(row["id"])
            self.spills[name].append(row)
            n = 1 if self.unit == "docs" else row["n_tokens"]
            self.bar.update(n)
            self.rate.update(n)
        return emit

    def on_reject(self, rej: Reject) -> None:
        if rej.kind == "filtered":
            ex = self.examples[rej.source].setdefault((rej.filter, rej.reason), [])
            if len(ex) < EXAMPLES_PER_RULE:
                # reports are published (and committed): the example is PII-redacted like the kept text
                ex.append({"id": rej.id, "url": redact(rej.url), "text": redact(rej.snippet[:200])})
        elif rej.kind == "withdrawn":  # counted by its Taker; the ticket log is its record, not rejects.jsonl
            return
        else:
            self.reject_counts[rej.source][rej.reason] += 1
        self.rejects_fh.write(rej.to_json() + "\n")

    def close(self) -> None:
        self.bar.close()
        self.rejects_fh.close()


def _sample(cfg: MixSamplerConfig, sources: dict, col: _Collector, counter: TokenCounter, withdrawn: Matcher | None,
            executor: Any, batches: BatchLog | None = None) -> _Sampled:
    """Phase 1: ingestion checks, then every source's quota drawn by the recipe weights."""
    sc = cfg.sampler
    # the extraction/filter pool: local processes, or Ray tasks (--executor ray); results are re-joined
    # in submission order, so the sample does not depend on where they ran
    pool = (executor or LocalExecutor()).pool(sc.num_proc)
    # finite sources spool their records inside the stage's tmp dir (removed below, or with the tmp dir
    # when the stage fails or is killed) instead of holding them in memory
    for src in sources.values():
        if hasattr(src, "spool_dir"):
            src.spool_dir = col.spool_root
    try:
        takers, fetchers = {}, {}
        store = (SignalStore(col.spill_root.parent / STORE_DIR, {s.name: s.filters for s in cfg.sources})
                 if sc.signals != "none" else None)
        for s in cfg.sources:
            settings = ProcessSettings(source=s.name, min_chars=sc.min_chars, max_chars=sc.max_chars,
                                       extract=cfg.extract, filters=s.filters, lang=s.lang, signals=sc.signals)
            fetchers[s.name] = _Fetcher(pool, settings, counter, withdrawn, store, batches)
            takers[s.name] = Taker(s.name, sources[s.name].iter_raw, sc.unit, s.max_epochs,
                                   fetchers[s.name], col.emitter(s.name), col.on_reject,
                                   sc.batch_size, sc.max_reject_fraction)
        weights = {s.name: s.weight for s in cfg.sources}
        ingestion = _ingest_files(cfg, sources, takers, col.reject_counts, col.rejects_fh)
        pilots = {}
        for name, f in fetchers.items():  # a quality top_fraction becomes a threshold before the quota counts
            if name not in ingestion["empty_sources"]:
                f.settings, pilot = _pilot(f.settings, sources[name].iter_raw, sc.batch_size, pool, batches)
                if pilot is not None:
                    pilots[name] = pilot
                if store is not None:
                    store.set_chain(name, f.settings.filters)
        for name in ingestion["empty_sources"]:
            weights[name] = 0.0  # sampler.empty_source=skip: out of the recipe, reported
        if not any(weights.values()):
            raise ConfigError("stage 1: every source is empty after ingestion; see the warnings above")
        outcome = run_quotas(takers, weights, sc.target, sc.unit, sc.shortfall)
        _read_as_needed(sources, ingestion)
        _check_empty_after_sampling(cfg, takers, ingestion)
        if store is not None:
            # a finite source is read to the end of its first pass, so what-ifs that need more documents than
            # the quota took are answerable (measured cost: bench/bench_signal_store.py); a stream is not
            t0 = time.perf_counter()
            read_all = {n: t.drain_first_pass(sc.signals_headroom) if sc.signals == "full"
                        and hasattr(sources[n], "spool_dir")
                        else t.stats.unique_units is not None for n, t in takers.items()}
            if sc.signals == "full":  # its cost grows with the sources' surplus over the quota (docs/scale.md)
                log.info("signal store: the rest of each finite source's first pass read in %.1f s",
                         time.perf_counter() - t0)
            store.close(_store_meta(cfg, takers, weights, read_all))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        for src in sources.values():
            if hasattr(src, "close"):
                src.close()
        shutil.rmtree(col.spool_root, ignore_errors=True)
        col.close()
    for spill in col.spills.values():
        spill.close()
    return _Sampled(takers, outcome, ingestion, col.reject_counts, col.mods, col.examples, col.dup_ids, pilots)


def _pilot(settings: ProcessSettings, iter_raw: Any, batch_size: int, pool: Any,
           batches: BatchLog | None) -> tuple[ProcessSettings, dict[str, Any] | None]:
    """The quality pilot (pilot.py), a unit of its own when the chain has one: a resumed run reuses it."""
    def run() -> tuple[ProcessSettings, dict[str, Any] | None]:
        return resolve_top_fraction(settings, iter_raw, batch_size, pool)

    if batches is None or not needs_pilot(settings):
        return run()
    return batches.once(f"pilot.source={settings.source}.size={batch_size}", run)


def _store_meta(cfg: MixSamplerConfig, takers: dict[str, Taker], weights: dict[str, float],
                read_all: dict[str, bool]) -> dict[str, Any]:
    """What the what-if planner needs besides the rows: how far each source was read, and the sampler."""
    sc = cfg.sampler
    return {"mode": sc.signals, "weights": weights,
            "sampler": {"unit": sc.unit, "target": sc.target, "shortfall": sc.shortfall, "batch_size": sc.batch_size,
                        "max_reject_fraction": sc.max_reject_fraction, "min_chars": sc.min_chars,
                        "max_chars": sc.max_chars},
            "sources": {n: {"first_pass_read_to_end": read_all[n], "max_epochs": t.max_epochs,
                            "epochs_started": t.stats.epochs_started,
                            # with a headroom (absent without one: the stores of earlier runs are unchanged)
                            **({"first_pass_records_read": t.first_pass_read} if sc.signals_headroom is not None
                               else {})} for n, t in takers.items()},
            **({"signals_headroom": sc.signals_headroom} if sc.signals_headroom is not None else {})}


def _assemble(cfg: MixSamplerConfig, sampled: _Sampled, spill_root: Path, tmp: Path) -> tuple[DatasetWriter, list[str],
                                                                                              dict[str, Counter]]:
    """Phase 2: sources in config order, each in sampling order, truncated where shrink says so."""
    writer = DatasetWriter(tmp, DOC_FEATURES, cfg.sampler.max_shard_bytes)
    realized: dict[str, Counter] = {}
    for s in cfg.sources:
        keep = sampled.outcome[s.name]["keep"]
        c: Counter = Counter()
        for i, row in enumerate(iter_dataset_rows(spill_root / s.name)):
            if keep is not None and i >= keep:
                c["dropped_by_shrink"] += 1
                continue
            c["docs"] += 1
            c["tokens"] += row["n_tokens"]
            c["chars"] += row["n_chars"]
            c[f"epoch_{copy_epoch(row['id'])}"] += 1
            writer.append(row)
        writer.flush()  # a source's last batch ends with it (the record batches are part of the bytes)
        realized[s.name] = c
    shards = writer.close()
    shutil.rmtree(spill_root)
    return writer, shards, realized


def _build(cfg: MixSamplerConfig, sources: dict, tmp: Path, stage: StageRun, executor: Any = None) -> Manifest:
    withdrawn = log_matcher(cfg.run.deletion_log_path)
    if withdrawn:
        log.info("%s: excluding documents withdrawn by the tickets in %s", STAGE, cfg.run.deletion_log_path)
    counter = TokenCounter(cfg.sampler.token_counter)
    if stage.resumed_from is not None:  # what the killed run wrote besides its units: rebuilt from them below
        clear_leftovers(tmp)
    batches = BatchLog(stage.units, cfg.sampler.batch_size)
    col = _Collector(cfg, list(sources), tmp)
    sampled = _sample(cfg, sources, col, counter, withdrawn, executor, batches)
    log.info("%s: units: %s", STAGE, batches.summary())
    writer, shards, realized = _assemble(cfg, sampled, col.spill_root, tmp)

    # Phase 3: reports and the manifest
    takers = sampled.takers
    mix = build_source_mix(cfg, takers, sampled.outcome, realized, sampled.reject_counts)
    mix["ingestion"] = ingestion = sampled.ingestion
    write_json_atomic(tmp / "source_mix.json", mix)
    write_text_atomic(tmp / "source_mix.md", source_mix_markdown(mix))
    freport = build_filter_report(cfg, takers, realized, sampled.mods, sampled.examples, sampled.pilots)
    write_json_atomic(tmp / "filter_report.json", freport)
    write_text_atomic(tmp / "filter_report.md", filter_report_markdown(freport))
    chains = {s.name: _resolved_chain(s.filters, sampled.pilots.get(s.name)) for s in cfg.sources}
    if quality_chains(chains):  # the model's scores per source, its card's held-out AUC, model against rules
        write_quality_report(tmp, tmp, cfg.run.name, chains)
    counters = {
        "docs": writer.num_rows,
        "shards": len(shards),
        "rejects": {n: dict(sorted(c.items())) for n, c in sampled.reject_counts.items()},
        "per_source": {n: dict(sorted(c.items())) for n, c in realized.items()},
        "duplicate_source_ids": dict(sorted(sampled.dup_ids.items())),
        "filtered": {n: sum(t.stats.filtered.values()) for n, t in takers.items()},
        "file_problems": [{"source": n, **f} for n, v in ingestion["sources"].items() for f in v["files"]
                          if f["status"] != "ok" or f.get("notes")],
        "empty_sources": ingestion["empty_sources"],
    }
    if withdrawn:
        counters["withdrawn_at_ingestion"] = {n: t.stats.withdrawn for n, t in takers.items()}
    return stage.commit(counters, extra={"token_counter": {"name": counter.name, "path": str(counter.path)}})


def _resolved_chain(filters: tuple[dict[str, Any], ...], pilot: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """The chain with a top_fraction's pilot threshold filled in (as the signal store records it)."""
    if pilot is None:
        return filters
    i = pilot["filter_index"]
    return (*filters[:i], {**filters[i], "pilot_threshold": pilot["threshold"]}, *filters[i + 1:])


def _mix(cfg: Any) -> dict[str, Any] | None:
    path = cfg.run.run_dir / ARTIFACT / "source_mix.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def summary_line(cfg: Any, man: dict[str, Any]) -> str:
    """The one line the stage script prints when it is done: what was written, and whether the recipe was
    met (every source that missed it, against the tolerance)."""
    c = man["counters"]
    mix = _mix(cfg)
    verdict = f"\n{verdict_line(mix)}" if mix else ""
    return (f"mixed_raw: {c['docs']:,} docs in {cfg.run.run_dir / ARTIFACT}; report: "
            f"{cfg.run.report_dir / 'source_mix.md'}{verdict}")


def strict_failure(cfg: Any, man: dict[str, Any]) -> str | None:
    """With ``sampler.strict`` (``run_pipeline.sh --strict``): why this run must stop (exit 3), or None."""
    if not cfg.sampler.strict:
        return None
    mix = _mix(cfg)
    if mix is None or (mix.get("recipe") or {}).get("met", True):
        return None
    return (f"{verdict_line(mix)}; sampler.strict is set, so the pipeline stops here (exit 3). Raise the short "
            "sources' max_epochs, lower the target, or drop --strict to accept the mix as sampled")
