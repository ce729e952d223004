"""How a withdrawal removes documents from ``mixed_dedup`` and refreshes stage 2's reports (the registry's
``remove_ids`` for cross_source_dedup): shards, the dedup index, removed.jsonl and contamination hits
without the ids; the report's totals, rates, per-source table, source matrix and clusters recomputed
from what is left with the stage's own definitions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..arrow_io import read_columns
from ..edits import (
    ArtifactEdit,
    EditContext,
    EditHost,
    filter_dataset,
    filter_jsonl,
    load_report,
    note_withdrawal,
    redact,
    save_report,
)
from ..profile import profile_dataset, profile_markdown
from .certificate import certificate_markdown
from .docs import Docs, read_docs
from .granular_report import granular_markdown
from .index import INDEX_DIR, INDEX_FILES, filter_index
from .report import contamination_markdown, dedup_markdown, histogram, post_dedup_mix, stage_counters
from .stage import ARTIFACT, UPSTREAM


def remove_from_mixed_dedup(w: EditHost, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry = c.ids, c.bases, c.entry
    # the two JSONL files are rewritten in place (open "w"): never a hard link to the old artifact's
    own = {"removed.jsonl", "contamination_hits.jsonl", *INDEX_FILES}  # rewritten here, never linked
    shards = filter_dataset(w.run_dir / ARTIFACT, tmp, ids, skip=own)
    src = w.run_dir / ARTIFACT
    filter_index(src / INDEX_DIR, tmp / INDEX_DIR, ids)  # the dedup index lists kept documents too
    filter_jsonl(src / "removed.jsonl", tmp / "removed.jsonl", ids, ("id", "kept", "original"))
    filter_jsonl(src / "contamination_hits.jsonl", tmp / "contamination_hits.jsonl", ids, ("doc_id",))
    refresh_mixed_dedup(tmp, w.run_dir / UPSTREAM, bases, entry)
    rep = json.loads((tmp / "dedup_report.json").read_text())
    removed = rep["removed"]
    result = {"shards": shards}
    w.commit(ed, man, tmp, entry,
             stage_counters(rep["docs_in"], rep["docs_out"], removed,
                            len((tmp / "contamination_hits.jsonl").read_text().splitlines())),
             {UPSTREAM: w.fingerprint(UPSTREAM)}, result)
    return result


def refresh_mixed_dedup(tmp: Path, raw_dir: Path, bases: set[str], entry: dict[str, Any]) -> None:
    rep = load_report(tmp / "dedup_report.json")
    raw = read_docs(raw_dir)  # the stage's document table of mixed_raw, as the stage built it
    kept_ids = set(read_columns(tmp, ["id"])["id"])
    kept = np.array([i in kept_ids for i in raw.ids], dtype=bool)
    recipe = [(r["source"], r["target_share"]) for r in rep["post_dedup_mix"]["sources"]]
    rep["post_dedup_mix"] = post_dedup_mix(recipe, raw.srcs, raw.n_tokens, raw.n_chars, kept)
    removed = [json.loads(x) for x in (tmp / "removed.jsonl").read_text(encoding="utf-8").splitlines()]
    rep["docs_in"], rep["docs_out"] = raw.n, int(kept.sum())
    reasons = Counter(r["reason"] for r in removed)
    rep["removed"] = dict(sorted(reasons.items()))
    n = rep["docs_in"]
    # the stage's definitions: rate = every removal, dup_rate = exact + near duplicates only
    rep["rate"] = round(sum(reasons.values()) / n, 6) if n else 0.0
    rep["dup_rate"] = round((reasons["exact"] + reasons["near"]) / n, 6) if n else 0.0
    _refresh_clusters(rep, removed, raw)
    per: dict[str, Counter] = {}
    for s in raw.srcs:
        per.setdefault(s, Counter())["docs_in"] += 1
    for r in removed:
        per.setdefault(r["source"], Counter())[r["reason"]] += 1
    rep["per_source"] = {s: {**dict(c), "rate": round((sum(c.values()) - c["docs_in"]) / c["docs_in"], 6)
                             if c["docs_in"] else 0.0} for s, c in per.items()}
    counts = rep["source_matrix"]["counts"]
    for a in counts:
        for b in counts[a]:
            counts[a][b] = 0
    for r in removed:
        if r["reason"] in ("exact", "near") and r.get("kept_source") in counts.get(r["source"], {}):
            counts[r["source"]][r["kept_source"]] += 1
    rep, n = redact(rep, bases)
    note_withdrawal(rep, entry, n)
    save_report(tmp, "dedup_report", rep, lambda r: dedup_markdown(r) + granular_markdown(r))
    profile = profile_dataset(tmp)
    note_withdrawal(profile, entry, 0)
    save_report(tmp, "data_profile", profile, profile_markdown)
    con, n = redact(load_report(tmp / "contamination_report.json"), bases)
    if "listing" in con:
        con["hits"] = sum(1 for _ in (tmp / "contamination_hits.jsonl").read_text().splitlines())
    note_withdrawal(con, entry, n)
    save_report(tmp, "contamination_report", con, contamination_markdown)
    if (tmp / "certificate.json").is_file():  # canaries name the documents they were derived from
        cert, n = redact(load_report(tmp / "certificate.json"), bases)
        note_withdrawal(cert, entry, n)
        save_report(tmp, "certificate", cert, certificate_markdown)


def _refresh_clusters(rep: dict[str, Any], removed: list[dict[str, Any]], raw: Docs) -> None:
    """Component pairs and near-duplicate cluster sizes from what is left of removed.jsonl (a near
    cluster = its kept document + the documents removed as its near duplicates)."""
    comp = dict(zip(raw.ids, raw.components))
    src = dict(zip(raw.ids, raw.srcs))
    pairs: Counter = Counter()
    sizes: Counter = Counter()
    for r in removed:
        if r["reason"] in ("exact", "near") and r.get("kept") in src:
            pairs[(f"{r['source']}:{comp.get(r['id'], '')}", f"{src[r['kept']]}:{comp[r['kept']]}")] += 1
        if r["reason"] == "near":
            sizes[r["kept"]] += 1
    rep["component_pairs"] = [{"removed": a, "kept": b, "count": c}
                              for (a, b), c in sorted(pairs.items(), key=lambda x: (-x[1], x[0]))]
    clusters = sorted((k + 1 for k in sizes.values()), reverse=True)
    rep["cluster_size_histogram"] = histogram(clusters)
    rep["largest_clusters"] = clusters[:10]
