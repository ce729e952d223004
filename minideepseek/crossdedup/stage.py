"""Stage 2 driver: ``mixed_raw`` -> ``mixed_dedup`` (exact dedup, MinHash-LSH near dedup across
sources, benchmark decontamination).

Order of work, each step on the survivors of the previous one:
1. exact: documents whose normalized-text hash (NFKC, casefold, whitespace) is equal;
2. near: MinHash signatures (datasketch-equivalent, computed in a process pool) -> LSH band buckets
   (bands x rows chosen for recall at the threshold) -> candidate pairs -> verified edges (exact
   Jaccard >= threshold) -> keep policy (:mod:`.keep`: greedy by default, so every removal has a
   kept partner >= threshold; ``dedup.cluster: transitive`` for union-find clusters) -> residual
   check of the survivors;
3. decontamination: word n-gram overlap with benchmark items (the best-matching item is named).
Keep order, in exact groups and for the near policy: source priority (recipe order unless
``dedup.source_priority`` says otherwise), then the longest text, then the smallest id.
Upsampled copies (ids ending ``#eK``, made by stage 1 on purpose) are not deduplicated against
their original: they follow it (kept if it is kept, removed with it).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from .. import pipeline
from ..arrow_io import DatasetWriter
from ..config import ConfigError
from ..executor import LocalExecutor
from ..fsio import write_json_atomic, write_text_atomic
from ..invocation import Command
from ..pipeline import producer
from ..profile import profile_dataset, profile_markdown
from ..progress import Laps, phases_line
from ..records import DOC_FEATURES
from ..stage import InputRef, Manifest, StageRun, require_upstream
from .certificate import FILES as CERT_FILES
from .certificate import Certifier
from .config import DedupStageConfig
from .decontam import ContaminationIndex, ScanBlock, scan_block
from .docs import Docs, Texts, read_docs
from .granular import Granular
from .granular_report import granular_markdown
from .granular_tasks import POOL_MIN_CHARS
from .keep import greedy_keep, transitive_keep
from .near import NearDedup
from .ray_near import RayNearDedup
from .report import (
    build_dedup_report,
    contamination_markdown,
    dedup_markdown,
    measure_s_curve,
    post_dedup_mix,
    stage_counters,
)
from .resume import Memo, clear_leftovers

log = logging.getLogger(__name__)

# the stage's identity is the registry's (minideepseek/pipeline.py), written once
SPEC = pipeline.stage("cross_source_dedup")
STAGE, ARTIFACT, REPORTS = SPEC.name, SPEC.artifact, SPEC.reports
(UPSTREAM,) = SPEC.upstream
# 2: + data_profile (per source); 3: + url/lines/paragraphs/substrings, dedup_index; 4: + exact_after_cleaning,
# http/https one page
SCHEMA_VERSION = 4
DECONTAM_DOCS = 1024  # documents per decontamination unit (~0.5 s on the demo)
RAY_WORK = ".near-work"  # the Ray engine's block files (in tmp; kept across a kill: its units name them)


def run_dedup(cfg: DedupStageConfig, upstream: dict[str, str], command: Command, force: bool = False,
              executor: Any = None, restart: bool = False) -> Manifest:
    run_dir = cfg.run.run_dir
    up = require_upstream(run_dir, UPSTREAM, producer(UPSTREAM).script, upstream[UPSTREAM], command)
    inputs = [InputRef(name=UPSTREAM, path=str(run_dir / UPSTREAM), fingerprint=up["fingerprint"])]
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    return stage.execute(lambda tmp: _build(cfg, up, run_dir / UPSTREAM, tmp, stage, executor), cfg.run.report_dir,
                         REPORTS, force, restart=restart)


def _read(cfg: DedupStageConfig, up: dict[str, Any], src_dir: Path) -> Docs:
    """The stage's one read of ``mixed_raw``'s columns, keep order from the recipe (or source_priority)."""
    recipe = [s["name"] for s in up["config"]["sources"]]
    order = list(cfg.dedup.source_priority) or recipe
    unknown = sorted(set(order) - set(recipe))
    if unknown:
        raise ConfigError(f"dedup.source_priority names {unknown}, not sources of the recipe {recipe}")
    return read_docs(src_dir, order)


def _exact(d: Docs, reason: str = "exact") -> int:
    """Exact duplicates among the documents still in (same normalized-text hash; URL duplicates are gone
    already), the first in keep order kept; returns the number of groups. Phase 1 (``exact``), and again
    after the cleaning steps (``exact_after_cleaning``: documents that differed only by a stripped
    boilerplate line or a cut span, on the cleaned texts' hashes)."""
    groups: dict[str, list[int]] = {}
    for i in range(d.n):
        if not d.copies[i] and i not in d.removed:
            groups.setdefault(d.hashes[i], []).append(i)
    n_groups = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        n_groups += 1
        keep = min(members, key=d.keep_key)
        for i in members:
            if i != keep:
                d.remove(i, reason, keep, 1.0)
    return n_groups


def _near(cfg: DedupStageConfig, d: Docs, texts: Texts, tmp: Path, executor: Any, memo: Memo
          ) -> tuple[Any, dict[str, Any]]:
    """Phase 2: MinHash-LSH near duplicates among the survivors, verified, kept by the cluster policy;
    returns the engine (its pair sampler serves the report) and its figures."""
    dc = cfg.dedup
    todo = d.live()
    if executor is not None and executor.kind == "ray":  # the four phases as Ray tasks (ray_near.py)
        # absolute path: a Ray worker's working directory is not the driver's
        nd = RayNearDedup(dc, executor, (tmp / RAY_WORK).resolve(), memo)
        nd.signatures(texts, todo)
        clusters, near_info = nd.clusters()
        near_info["ray"] = nd.stats
    else:
        pool = LocalExecutor().pool(dc.num_proc)
        try:
            nd = NearDedup(dc, pool, memo)
            nd.signatures(texts, todo)
            clusters, near_info = nd.clusters()
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    giant = [c for c in clusters if len(c) > dc.max_cluster_size]
    if giant and dc.giant_cluster == "error":
        raise ConfigError(f"{len(giant)} near-duplicate cluster(s) larger than dedup.max_cluster_size="
                          f"{dc.max_cluster_size} (largest {max(map(len, giant)):,}); inspect the dedup report, "
                          f"raise the threshold, or set dedup.giant_cluster=warn")
    rank = {}  # keep order over the documents that have a verified edge
    edges = [(a, b, j) for a, b, j, _ in near_info["verified_edges"]]
    for x in sorted({x for e in edges for x in e[:2]}, key=d.keep_key):
        rank[x] = len(rank)
    greedy = greedy_keep(edges, rank)
    transitive = transitive_keep(edges, rank)
    edge_set = {(a, b) for a, b, _ in edges}
    near_info["policy"] = {
        "cluster": dc.cluster,
        "greedy_removes": len(greedy), "transitive_removes": len(transitive),
        # transitive removals whose survivor is not a verified (>= threshold) neighbour: chains
        "transitive_without_kept_partner": sum(1 for x, k in transitive.items()
                                               if (min(x, k), max(x, k)) not in edge_set),
    }
    if dc.cluster == "greedy":
        # exact verification: the edge's Jaccard is exact; estimated: compute the exact one (in bulk)
        gl = sorted(greedy.items())
        jacs = ([round(j, 4) for _, (_, j) in gl] if dc.verify == "exact"
                else nd.pair_jaccards([(i, k) for i, (k, _) in gl]))
        for (i, (k, _)), jac in zip(gl, jacs):
            d.remove(i, "near", k, jac)
    else:
        tl = sorted(transitive.items())  # survivor may be no verified neighbour: compute J (in bulk)
        for (i, k), jac in zip(tl, nd.pair_jaccards(tl)):
            d.remove(i, "near", k, jac)
    near_info["clusters"] = [sorted(c) for c in clusters]
    kept_near = {i for i in todo if i not in d.removed}
    near_info["residual"] = res = nd.residual(kept_near, edges, cfg.run.seed)
    res["found"] = [(d.ids[a], d.ids[b], j) for a, b, j in res.get("found", [])]
    if near_info["residual"]["verified_edges_between_kept"]:
        raise AssertionError(f"keep policy left {near_info['residual']['verified_edges_between_kept']} verified "
                             f"near-duplicate edge(s) between kept documents (a bug: please report it)")
    return nd, near_info


def _decontaminate(cfg: DedupStageConfig, d: Docs, texts: Texts, memo: Memo) -> tuple[
        list[Any], list[dict[str, Any]], dict[str, Any], Any]:
    """Phase 3: benchmark n-gram overlap of what is left; returns (hits, best hit per document, report, index)."""
    hits_all: list[Any] = []
    best_hits: list[dict[str, Any]] = []  # per document hit: its best item, and how many items it hit
    if not cfg.decontam.enabled:
        return hits_all, best_hits, {"enabled": False}, None
    index = ContaminationIndex(cfg.decontam)
    todo = np.array(d.live(), dtype=np.int64)
    blocks = [todo[s0:s0 + DECONTAM_DOCS] for s0 in range(0, len(todo), DECONTAM_DOCS)]

    def scan(rows: np.ndarray) -> list[list[Any]]:  # a unit: the hits of a block of documents
        return [index.scan(d.ids[i], d.srcs[i], t) for i, t in zip(rows.tolist(), texts.take(rows))]

    def task(k: int) -> ScanBlock:  # the same unit for a worker process
        rows = blocks[k]
        return ScanBlock(cfg.decontam, texts.task(rows), tuple(d.ids[i] for i in rows.tolist()),
                         tuple(d.srcs[i] for i in rows.tolist()))

    names = [f"decontam.docs={DECONTAM_DOCS}.k={k:06d}" for k in range(len(blocks))]
    # one process scanned the whole 100M size's survivors; the scan of a document depends on no other
    # document, so large inputs go to the pool (each worker builds its own index once) and come back in order
    pool = (LocalExecutor().pool(cfg.dedup.num_proc)
            if sum(d.n_chars0[i] for i in todo.tolist()) >= POOL_MIN_CHARS and len(blocks) > 1 else None)
    if pool is not None:
        log.info("decontamination: %d blocks of up to %d documents in %d worker processes", len(blocks),
                 DECONTAM_DOCS, cfg.dedup.num_proc)
    units = memo.imap(names, scan_block, task, pool) if pool is not None else memo.imap(names, scan, lambda k: blocks[k])
    try:
        _collect_hits(cfg, d, zip(blocks, units), len(todo), hits_all, best_hits)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    contamination = {"ngram": cfg.decontam.ngram, "action": cfg.decontam.action,
                     "benchmarks": {b: {"items": index.items[b], "ngrams": index.ngrams[b]} for b in index.items}}
    return hits_all, best_hits, contamination, index


def _collect_hits(cfg: DedupStageConfig, d: Docs, blocks: Any, n_docs: int, hits_all: list[Any],
                  best_hits: list[dict[str, Any]]) -> None:
    """Each block's hits in row order: every hit, the best per document, and the removals."""
    with tqdm(total=n_docs, unit="docs", desc="decontam", mininterval=2) as bar:
        for rows, block_hits in blocks:
            bar.update(len(rows))
            for i, hits in zip(rows.tolist(), block_hits):
                if not hits:
                    continue
                hits_all.extend(hits)
                best_hits.append({**hits[0].__dict__, "items_hit": len(hits)})
                if cfg.decontam.action == "remove":
                    h = hits[0]  # the best match: most shared n-grams (scan orders hits best first)
                    d.removed[i] = {"reason": "contamination", "benchmark": h.benchmark, "item": h.item_id,
                                    "matched_ngrams": h.matches, "item_share": h.share, "ngram": h.ngram,
                                    "items_hit": len(hits)}


def _follow_copies(d: Docs) -> None:
    """Upsampled copies follow their original."""
    for i in np.flatnonzero(d.copies).tolist():
        orig = d.orig[i]
        if orig is not None and orig in d.removed:
            d.removed[i] = {"reason": "copy_of_removed", "kept": None, "original": d.ids[orig]}


def _write(d: Docs, texts: Texts, tmp: Path, hits_all: list[Any]) -> set[str]:
    """Survivors in input order, removals with their reasons, contamination hits; returns flagged ids."""
    flagged = {h.doc_id for h in hits_all}
    writer = DatasetWriter(tmp, DOC_FEATURES, 256 << 20)
    for row in texts.rows():
        if d.index_of[row["id"]] in d.removed:
            continue
        row["stage"] = STAGE
        trace = f"{STAGE}:kept" + (":contamination_flagged" if row["id"] in flagged else "")
        row["audit_trace"] = [*row["audit_trace"], trace]
        writer.append(row)
    writer.close()
    with (tmp / "removed.jsonl").open("w", encoding="utf-8") as fh:
        for i in sorted(d.removed):
            fh.write(json.dumps({"id": d.ids[i], "source": d.srcs[i], **d.removed[i]}, ensure_ascii=False) + "\n")
    with (tmp / "contamination_hits.jsonl").open("w", encoding="utf-8") as fh:
        for h in hits_all:
            fh.write(json.dumps(h.__dict__, ensure_ascii=False) + "\n")
    return flagged


@dataclass
class _Done:
    """What the steps leave for the reports."""

    gran: Granular
    cert: Certifier | None
    nd: Any  # the near engine (None: dedup.near is off)
    near_info: dict[str, Any]
    exact_groups: int
    hits_all: list[Any]
    best_hits: list[dict[str, Any]]
    contamination: dict[str, Any]
    flagged: set[str]


def _build(cfg: DedupStageConfig, up: dict[str, Any], src_dir: Path, tmp: Path, stage: StageRun,
           executor: Any = None) -> Manifest:
    ray = executor is not None and executor.kind == "ray"
    if stage.resumed_from is not None:  # only the unit results survive a kill: everything else is rebuilt
        gone = clear_leftovers(tmp, keep=(RAY_WORK,) if ray else ())
        log.info("%s: resuming: removed what the killed run left outside its finished units: %s", STAGE,
                 ", ".join(gone) or "nothing")
    memo = Memo(stage.units)
    d = _read(cfg, up, src_dir)  # the stage's one read of the per-document columns: every step uses this table
    laps = Laps(STAGE, log)  # every phase's time goes to the log and the report (wall = the whole stage)
    done = _steps(cfg, up, d, Texts(src_dir), tmp, memo, laps, executor)
    return _report(cfg, up, d, tmp, stage, memo, laps, done)


def _steps(cfg: DedupStageConfig, up: dict[str, Any], d: Docs, raw: Texts, tmp: Path, memo: Memo, laps: Laps,
           executor: Any) -> _Done:
    """Every step in order, on the table ``d`` (removals recorded in it) and the texts of ``raw``, then the
    cleaned texts; writes the survivors."""
    dc = cfg.dedup
    gran = Granular(cfg, up, d, raw, tmp, memo)  # URL/origin dedup now; lines, paragraphs, substrings after `near`
    gran.prepare()
    log.info("%s: %s documents from %s", STAGE, f"{d.n:,}", raw.dir)
    exact_groups = _exact(d) if dc.exact else 0
    laps.lap("read + exact")
    nd, near_info = _near(cfg, d, raw, tmp, executor, memo) if dc.near else (None, {})
    laps.lap("near (signatures, candidates, verification)")
    # canaries ask each step's index after the step, never join it: no real document's fate changes
    cert = Certifier(cfg, d, raw, gran.recipe) if cfg.canaries.enabled else None
    if cert is not None:
        cert.documents(nd)  # exact, url, near: before rewrite() replaces the hashes
        laps.lap("canaries (exact, url, near)")
    gran.against(nd)  # dedup.against: earlier runs' indexes
    laps.lap("against earlier runs")
    texts = gran.rewrite()  # survivors' texts cleaned (and the table's sizes and hashes); read from here on
    if dc.exact and texts is not raw:
        before = len(d.removed)
        _exact(d, "exact_after_cleaning")
        log.info("%s: %s document(s) made identical by the cleaning steps removed (exact_after_cleaning)", STAGE,
                 f"{len(d.removed) - before:,}")
    laps.lap("lines, paragraphs, substrings")
    hits_all, best_hits, contamination, cindex = _decontaminate(cfg, d, texts, memo)
    laps.lap("decontamination")
    if cert is not None:
        cert.cleaned(gran, texts)
        cert.contamination(cindex, texts)
        laps.lap("canaries (lines, paragraphs, substrings, decontamination)")
    _follow_copies(d)
    flagged = _write(d, texts, tmp, hits_all)
    laps.lap("write survivors")
    return _Done(gran, cert, nd, near_info, exact_groups, hits_all, best_hits, contamination, flagged)


def _report(cfg: DedupStageConfig, up: dict[str, Any], d: Docs, tmp: Path, stage: StageRun, memo: Memo, laps: Laps,
            done: _Done) -> Manifest:
    """The stage's reports beside the survivors, then the commit."""
    dc, nd, gran = cfg.dedup, done.nd, done.gran
    kept_mask = np.ones(d.n, dtype=bool)
    kept_mask[list(d.removed)] = False
    recipe = [(s["name"], s["weight"]) for s in up["config"]["sources"]]
    mix = post_dedup_mix(recipe, d.srcs, d.n_tokens, d.n_chars, kept_mask)
    # the S-curve check edits real documents and signs them again (~2.5 s on the demo): a unit
    s_curve = memo.one("report.s_curve", lambda: measure_s_curve(nd, dc, cfg.run.seed)) if nd is not None else None
    report = build_dedup_report(cfg, d.ids, d.srcs, d.n_chars, d.removed, done.near_info, done.exact_groups, mix, nd,
                                stage.elapsed(), d.components, d.index_of, s_curve)
    certified = done.cert.finish(tmp) if done.cert is not None else None  # certificate.{json,md}: volatile reports
    report["granular"] = gran.finish(tmp)
    laps.lap("report (sampled pairs, S-curve check)")
    gran.close()
    if nd is not None:
        nd.close()  # the Ray engine's work files live in tmp: gone before the commit lists the outputs
    contamination, best_hits = done.contamination, done.best_hits
    contamination.update({"hits": len(done.hits_all), "docs_hit": len(done.flagged),
                          # documents, counted once, under the benchmark of their best-matching item
                          "per_benchmark": dict(Counter(h["benchmark"] for h in best_hits)),
                          "per_source": dict(sorted(Counter(h["source"] for h in best_hits).items())),
                          "listing": best_hits[:200]})
    laps.start("data profile")
    profile = memo.one("data_profile", lambda: profile_dataset(tmp))  # of the survivors just written: a unit
    laps.lap("data profile")
    report["wall_s"], report["phases_s"] = round(stage.elapsed(), 2), laps.as_dict()  # all but the commit's checksums
    log.info("%s: phases %s", STAGE, phases_line(report["phases_s"]))
    write_json_atomic(tmp / "data_profile.json", profile)
    write_text_atomic(tmp / "data_profile.md", profile_markdown(profile))
    write_json_atomic(tmp / "dedup_report.json", report)
    write_text_atomic(tmp / "dedup_report.md", dedup_markdown(report) + granular_markdown(report))
    write_json_atomic(tmp / "contamination_report.json", contamination)
    write_text_atomic(tmp / "contamination_report.md", contamination_markdown(contamination))
    counters = stage_counters(d.n, int(kept_mask.sum()), dict(Counter(r["reason"] for r in d.removed.values())),
                              len(done.hits_all))
    extra = {"upstream_config_hash": up["config_hash"], "dedup_params": report["params"]}
    if certified is not None:
        extra["certificate"] = certified
    # the certificate is volatile: out of the fingerprint, so stages 3-4 see the same mixed_dedup either way
    return stage.commit(counters, extra=extra, volatile=("dedup_report.json", "dedup_report.md", *CERT_FILES))


def strict_failure(cfg: Any, man: dict[str, Any]) -> str | None:
    """A failed recall certificate stops the pipeline (exit 3) unless ``canaries.fail: warn``."""
    cert = man.get("certificate")
    if cfg.canaries.enabled and not cert:  # canaries are not in the config hash: an up-to-date stage was skipped
        log.warning("canaries.enabled, but %s was built without canaries and is up to date: rerun stage 2 with "
                    "--force to certify it", cfg.run.run_dir / ARTIFACT)
    if not cfg.canaries.enabled or not cert or cert["passed"]:
        return None
    where = cfg.run.report_dir / "certificate.md"
    if cfg.canaries.fail == "warn":
        log.warning("canary certificate %s (canaries.fail=warn: continuing); see %s", cert["line"], where)
        return None
    return (f"canary certificate {cert['line']}; see {where}. Fix the step's config, or set canaries.fail=warn "
            f"to continue")


def summary_line(cfg: Any, man: dict[str, Any]) -> str:
    """The one line the stage script prints when it is done."""
    c = man["counters"]
    removed = c.get("removed") or {}
    # every removal reason, so the parts add up to docs_in - docs_out
    parts = ", ".join(f"{k} -{v:,}" for k, v in sorted(removed.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"mixed_dedup: {c['docs_out']:,} of {c['docs_in']:,} docs kept ({sum(removed.values()):,} removed: "
            f"{parts or 'none'}; {c['contamination_hits']:,} benchmark hit(s)) in {cfg.run.run_dir / ARTIFACT}; "
            f"report: {cfg.run.report_dir / 'dedup_report.md'}"
            + (f"; canary certificate {man['certificate']['line']}" if man.get("certificate") else ""))
