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
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ..arrow_io import DatasetWriter, iter_dataset_rows, read_columns, shard_paths
from ..config import ConfigError
from ..decontam import ContaminationIndex
from ..executor import LocalExecutor
from ..profile import profile_dataset, profile_markdown
from ..progress import Laps, phases_line
from ..records import DOC_FEATURES, base_id
from ..runconfig import stage_config_hash
from ..stage import InputRef, StageRun, require_upstream, write_json_atomic, write_text_atomic
from .config import DedupStageConfig
from .granular import Granular
from .granular_report import granular_markdown
from .keep import greedy_keep, transitive_keep
from .near import NearDedup
from .ray_near import RayNearDedup
from .report import build_dedup_report, contamination_markdown, dedup_markdown, post_dedup_mix

log = logging.getLogger(__name__)

STAGE = "cross_source_dedup"
ARTIFACT = "mixed_dedup"
UPSTREAM = "mixed_raw"
REPORTS = ("dedup_report.json", "dedup_report.md", "contamination_report.json", "contamination_report.md",
           "data_profile.json", "data_profile.md")
SCHEMA_VERSION = 3  # 2: + data_profile (per source); 3: + url/lines/paragraphs/substrings, dedup_index


def run_dedup(cfg: DedupStageConfig, upstream_config_hash: str, config_path: str, force: bool = False,
              executor: Any = None) -> dict[str, Any]:
    run_dir = cfg.run.run_dir
    up = require_upstream(run_dir, UPSTREAM, "mix_sampler.py", upstream_config_hash, config_path)
    inputs = [InputRef(name=UPSTREAM, path=str(run_dir / UPSTREAM), fingerprint=up["fingerprint"])]
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    return stage.execute(lambda tmp: _build(cfg, up, run_dir / UPSTREAM, tmp, stage, executor), cfg.run.report_dir,
                         REPORTS, force)


def _keep_key(priority: dict[str, int], source: str, n_chars: int, doc_id: str) -> tuple:
    return (priority.get(source, len(priority)), -n_chars, doc_id)


def _build(cfg: DedupStageConfig, up: dict[str, Any], src_dir: Path, tmp: Path, stage: StageRun,
           executor: Any = None) -> dict[str, Any]:
    dc = cfg.dedup
    recipe = [(s["name"], s["weight"]) for s in up["config"]["sources"]]
    order = list(dc.source_priority) or [name for name, _ in recipe]
    unknown = sorted(set(order) - {n for n, _ in recipe})
    if unknown:
        raise ConfigError(f"dedup.source_priority names {unknown}, not sources of the recipe {[n for n, _ in recipe]}")
    priority = {name: i for i, name in enumerate(order)}
    gran = Granular(cfg, up, src_dir, tmp)  # URL/origin dedup now; lines, paragraphs, substrings after `near`
    gran.prepare()

    meta = read_columns(src_dir, ["id", "source", "n_chars", "n_tokens", "hash", "audit_trace"])
    ids: list[str] = meta["id"]
    srcs: list[str] = meta["source"]
    n_chars: list[int] = meta["n_chars"]
    n_tokens: list[int] = meta["n_tokens"]
    hashes: list[str] = meta["hash"]
    # stage 1's first audit entry is "source:<source>:<component or format>": finer than the source
    components = [t[0].split(":", 2)[-1] if t else "" for t in meta.pop("audit_trace")]
    n = len(ids)
    log.info("%s: %s documents from %s", STAGE, f"{n:,}", src_dir)
    laps = Laps(STAGE, log)  # every phase's time goes to the log and the report (wall = the whole stage)
    is_copy = np.array(["#e" in i for i in ids], dtype=bool)
    index_of = {doc_id: i for i, doc_id in enumerate(ids)}
    removed: dict[int, dict[str, Any]] = dict(gran.removed)  # doc index -> why

    # 1. exact duplicates
    exact_groups = 0
    if dc.exact:
        groups: dict[str, list[int]] = {}
        for i in range(n):
            if not is_copy[i] and i not in removed:
                groups.setdefault(hashes[i], []).append(i)
        for members in groups.values():
            if len(members) < 2:
                continue
            exact_groups += 1
            keep = min(members, key=lambda i: _keep_key(priority, srcs[i], n_chars[i], ids[i]))
            for i in members:
                if i != keep:
                    removed[i] = {"reason": "exact", "kept": ids[keep], "kept_source": srcs[keep], "jaccard": 1.0}
    n_exact = len(removed) - len(gran.removed)
    laps.lap("read + exact")

    # 2. near duplicates among the survivors
    near_info: dict[str, Any] = {}
    if dc.near:
        todo = [i for i in range(n) if not is_copy[i] and i not in removed]
        if executor is not None and executor.kind == "ray":  # the four phases as Ray tasks (ray_near.py)
            # absolute paths: a Ray worker's working directory is not the driver's
            nd = RayNearDedup(dc, executor, (tmp / ".near-work").resolve(), [p.resolve() for p in shard_paths(src_dir)])
            nd.signatures(src_dir, todo)
            clusters, near_info = nd.clusters(src_dir)
            near_info["ray"] = nd.stats
        else:
            pool = LocalExecutor().pool(dc.num_proc)
            try:
                nd = NearDedup(dc, pool)
                nd.signatures(src_dir, todo)
                clusters, near_info = nd.clusters(src_dir)
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
        for d in sorted({x for e in edges for x in e[:2]},
                        key=lambda i: _keep_key(priority, srcs[i], n_chars[i], ids[i])):
            rank[d] = len(rank)
        greedy = greedy_keep(edges, rank)
        transitive = transitive_keep(edges, rank)
        edge_set = {(a, b) for a, b, _ in edges}
        near_info["policy"] = {
            "cluster": dc.cluster,
            "greedy_removes": len(greedy), "transitive_removes": len(transitive),
            # transitive removals whose survivor is not a verified (>= threshold) neighbour: chains
            "transitive_without_kept_partner": sum(1 for d, k in transitive.items()
                                                   if (min(d, k), max(d, k)) not in edge_set),
        }
        if dc.cluster == "greedy":
            # exact verification: the edge's Jaccard is exact; estimated: compute the exact one (in bulk)
            gl = sorted(greedy.items())
            jacs = ([round(j, 4) for _, (_, j) in gl] if dc.verify == "exact"
                    else nd.pair_jaccards(src_dir, [(i, k) for i, (k, _) in gl]))
            for (i, (k, _)), jac in zip(gl, jacs):
                removed[i] = {"reason": "near", "kept": ids[k], "kept_source": srcs[k], "jaccard": jac}
        else:
            tl = sorted(transitive.items())  # survivor may be no verified neighbour: compute J (in bulk)
            for (i, k), jac in zip(tl, nd.pair_jaccards(src_dir, tl)):
                removed[i] = {"reason": "near", "kept": ids[k], "kept_source": srcs[k], "jaccard": jac}
        near_info["clusters"] = [sorted(c) for c in clusters]
        kept_near = {i for i in todo if i not in removed}
        near_info["residual"] = res = nd.residual(kept_near, edges, cfg.run.seed)
        res["found"] = [(ids[a], ids[b], j) for a, b, j in res.get("found", [])]
        if near_info["residual"]["verified_edges_between_kept"]:
            raise AssertionError(f"keep policy left {near_info['residual']['verified_edges_between_kept']} verified "
                                 f"near-duplicate edge(s) between kept documents (a bug: please report it)")
    n_near = len(removed) - n_exact - len(gran.removed)
    laps.lap("near (signatures, candidates, verification)")
    gran.against(removed, hashes, nd if dc.near else None)  # dedup.against: earlier runs' indexes
    laps.lap("against earlier runs")
    src_dir = gran.rewrite(removed, n_chars, n_tokens, hashes)  # survivors' texts cleaned; read from here on
    laps.lap("lines, paragraphs, substrings")

    # 3. decontamination of what is left
    hits_all = []
    best_hits: list[dict[str, Any]] = []  # per document hit: its best item, and how many items it hit
    if cfg.decontam.enabled:
        index = ContaminationIndex(cfg.decontam)
        rows = iter_dataset_rows(src_dir, columns=["id", "source", "text"])
        for row in tqdm(rows, total=n, unit="docs", desc="decontam", mininterval=2):
            i = index_of[row["id"]]
            if i in removed or is_copy[i]:
                continue
            hits = index.scan(row["id"], row["source"], row["text"])
            if hits:
                hits_all.extend(hits)
                best_hits.append({**hits[0].__dict__, "items_hit": len(hits)})
                if cfg.decontam.action == "remove":
                    h = hits[0]  # the best match: most shared n-grams (scan orders hits best first)
                    removed[i] = {"reason": "contamination", "benchmark": h.benchmark, "item": h.item_id,
                                  "matched_ngrams": h.matches, "item_share": h.share, "ngram": h.ngram,
                                  "items_hit": len(hits)}
        contamination = {"ngram": cfg.decontam.ngram, "action": cfg.decontam.action,
                         "benchmarks": {b: {"items": index.items[b], "ngrams": index.ngrams[b]} for b in index.items}}
    else:
        contamination = {"enabled": False}
    flagged = {h.doc_id for h in hits_all}
    laps.lap("decontamination")

    # upsampled copies follow their original
    for i in np.flatnonzero(is_copy).tolist():
        orig = index_of.get(base_id(ids[i]))
        if orig is not None and orig in removed:
            removed[i] = {"reason": "copy_of_removed", "kept": None, "original": ids[orig]}

    # write survivors in input order; removals with their reasons
    writer = DatasetWriter(tmp, DOC_FEATURES, 256 << 20)
    batch: list[dict] = []
    for row in iter_dataset_rows(src_dir):
        i = index_of[row["id"]]
        if i in removed:
            continue
        row["stage"] = STAGE
        trace = f"{STAGE}:kept" + (":contamination_flagged" if row["id"] in flagged else "")
        row["audit_trace"] = [*row["audit_trace"], trace]
        batch.append(row)
        if len(batch) >= 512:
            writer.write_rows(batch)
            batch.clear()
    writer.write_rows(batch)
    writer.close()
    with (tmp / "removed.jsonl").open("w", encoding="utf-8") as fh:
        for i in sorted(removed):
            fh.write(json.dumps({"id": ids[i], "source": srcs[i], **removed[i]}, ensure_ascii=False) + "\n")
    with (tmp / "contamination_hits.jsonl").open("w", encoding="utf-8") as fh:
        for h in hits_all:
            fh.write(json.dumps(h.__dict__, ensure_ascii=False) + "\n")

    laps.lap("write survivors")
    kept_mask = np.ones(n, dtype=bool)
    kept_mask[list(removed)] = False
    mix = post_dedup_mix(recipe, srcs, n_tokens, n_chars, kept_mask)
    report = build_dedup_report(cfg, ids, srcs, n_chars, removed, near_info, exact_groups, mix,
                                nd if dc.near else None, stage.elapsed(), components, index_of)
    report["granular"] = gran.finish(tmp, removed, hashes, n_chars)
    laps.lap("report (sampled pairs, S-curve check)")
    gran.close()
    if dc.near:
        nd.close()  # the Ray engine's work files live in tmp: gone before the commit lists the outputs
    contamination.update({"hits": len(hits_all), "docs_hit": len(flagged),
                          # documents, counted once, under the benchmark of their best-matching item
                          "per_benchmark": dict(Counter(h["benchmark"] for h in best_hits)),
                          "per_source": dict(sorted(Counter(h["source"] for h in best_hits).items())),
                          "listing": best_hits[:200]})
    laps.start("data profile")
    profile = profile_dataset(tmp)
    laps.lap("data profile")
    report["wall_s"], report["phases_s"] = round(stage.elapsed(), 2), laps.as_dict()  # all but the commit's checksums
    log.info("%s: phases %s", STAGE, phases_line(report["phases_s"]))
    write_json_atomic(tmp / "data_profile.json", profile)
    write_text_atomic(tmp / "data_profile.md", profile_markdown(profile))
    write_json_atomic(tmp / "dedup_report.json", report)
    write_text_atomic(tmp / "dedup_report.md", dedup_markdown(report) + granular_markdown(report))
    write_json_atomic(tmp / "contamination_report.json", contamination)
    write_text_atomic(tmp / "contamination_report.md", contamination_markdown(contamination))
    counters = {"docs_in": n, "docs_out": int(kept_mask.sum()), "exact_removed": n_exact, "near_removed": n_near,
                "contamination_hits": len(hits_all), "removed": dict(Counter(r["reason"] for r in removed.values()))}
    return stage.commit(counters, extra={"upstream_config_hash": up["config_hash"], "dedup_params": report["params"]},
                        volatile=("dedup_report.json", "dedup_report.md"))



def upstream_hash(config_path: str, overrides: list[str]) -> str:
    """The config hash stage 1 would have for this YAML + overrides (to detect a stale mixed_raw)."""
    from ..sampling.config import MixSamplerConfig

    return stage_config_hash(MixSamplerConfig, config_path, overrides)
