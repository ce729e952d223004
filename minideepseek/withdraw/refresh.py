"""Refresh each stage's reports after a withdrawal, from the rewritten artifacts themselves.

Figures that depend on which documents are present (mix shares, token counts, dedup totals, packing
efficiency, shard sizes) are recomputed from the new data; decisions that were made once (filter
thresholds, dedup pairs, tokenizer merges, timings of the original run) are kept and the report
says a withdrawal happened. Any list entry of a report that names a withdrawn id (sampled pairs,
dropped examples, decoded blocks) is removed, and every report gains a ``withdrawals`` section.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..arrow_io import read_columns
from ..crossdedup.granular_report import granular_markdown
from ..crossdedup.report import contamination_markdown, dedup_markdown, post_dedup_mix
from ..fsio import write_json_atomic, write_text_atomic
from ..packing.packer import PackStats, shard_info
from ..packing.report import build_report, decode_samples, report_markdown
from ..profile import profile_dataset, profile_markdown
from ..records import base_id, trace_component
from ..rng import rng_for
from ..sampling.filter_report import filter_report_markdown
from ..sampling.report import TOLERANCE_PP, recipe_verdict, source_mix_markdown
from ..tokenizer.config import EOT_ID
from ..tokenizer.report import eval_markdown
from .locate import iter_batches, shard_paths
from .verify import ID_TOKEN


def redact(obj: Any, bases: set[str]) -> tuple[Any, int]:
    """Drop list entries (and dict keys) that name a withdrawn id; blank strings that do."""
    def names(x: Any) -> bool:
        return any(t in bases for t in ID_TOKEN.findall(json.dumps(x, ensure_ascii=False)))

    n = 0

    def walk(x: Any) -> Any:
        nonlocal n
        if isinstance(x, list):
            keep = []
            for e in x:
                if names(e):
                    n += 1
                else:
                    keep.append(walk(e))
            return keep
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if any(t in bases for t in ID_TOKEN.findall(str(k))):
                    n += 1
                    continue
                out[k] = walk(v)
            return out
        if isinstance(x, str) and names(x):
            n += 1
            return "[withdrawn]"
        return x

    return walk(obj), n


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _note(report: dict[str, Any], entry: dict[str, Any], redacted: int) -> None:
    report.setdefault("withdrawals", []).append({**entry, "report_entries_redacted": redacted})


def _save(tmp: Path, name: str, report: dict[str, Any], markdown: Any) -> None:
    write_json_atomic(tmp / f"{name}.json", report)
    text = markdown(report)
    w = report.get("withdrawals")
    if w:
        text += "\n## Withdrawals\n\n" + "\n".join(
            f"- ticket `{x['ticket']}`: {x['summary']}; {x['report_entries_redacted']} report entries "
            f"naming withdrawn ids removed" for x in w) + "\n"
    write_text_atomic(tmp / f"{name}.md", text)


def refresh_mixed_raw(tmp: Path, bases: set[str], entry: dict[str, Any]) -> None:
    mix = _load(tmp / "source_mix.json")
    c = read_columns(tmp, ["source", "n_tokens", "n_chars"])
    per: dict[str, Counter] = {}
    for s, t, ch in zip(c["source"], c["n_tokens"], c["n_chars"]):
        per.setdefault(s, Counter()).update({"docs": 1, "tokens": t, "chars": ch})
    totals = {k: sum(v[k] for v in per.values()) for k in ("docs", "tokens", "chars")}
    unit = mix["unit"]
    for r in mix["sources"]:
        got = per.get(r["source"], Counter())
        for k in ("docs", "tokens", "chars"):
            r[k] = got[k]
            r[f"share_{k}"] = round(got[k] / totals[k], 6) if totals[k] else 0.0
        dev = 100 * (r[f"share_{unit}"] - r["target_share"])
        r["deviation_pp"], r["abs_deviation_pp"] = round(dev, 4), round(abs(dev), 4)
        r["within_tolerance"] = abs(dev) <= TOLERANCE_PP
    t = mix["totals"]
    t.update(totals)
    t["max_abs_deviation_pp"] = max((r["abs_deviation_pp"] for r in mix["sources"]), default=0.0)
    t["all_within_tolerance"] = all(r["within_tolerance"] for r in mix["sources"])
    target = None if mix["target"] == "all" else mix["target"]
    t["target_fill"] = None if target is None else round(totals[unit] / target, 6)
    if "recipe" in mix:  # the verdict after the withdrawal (a withdrawn document may push a source out of tolerance)
        mix["recipe"] = recipe_verdict(mix["sources"], unit, target, totals[unit], mix["shortfall_policy"])
    mix, n = redact(mix, bases)
    _note(mix, entry, n)
    _save(tmp, "source_mix", mix, source_mix_markdown)
    fr, n = redact(_load(tmp / "filter_report.json"), bases)
    _note(fr, entry, n)
    _save(tmp, "filter_report", fr, filter_report_markdown)


def refresh_mixed_dedup(tmp: Path, raw_dir: Path, bases: set[str], entry: dict[str, Any]) -> None:
    rep = _load(tmp / "dedup_report.json")
    raw = read_columns(raw_dir, ["id", "source", "n_tokens", "n_chars", "audit_trace"])
    kept_ids = set(read_columns(tmp, ["id"])["id"])
    kept = np.array([i in kept_ids for i in raw["id"]], dtype=bool)
    recipe = [(r["source"], r["target_share"]) for r in rep["post_dedup_mix"]["sources"]]
    rep["post_dedup_mix"] = post_dedup_mix(recipe, raw["source"], raw["n_tokens"], raw["n_chars"], kept)
    removed = [json.loads(x) for x in (tmp / "removed.jsonl").read_text(encoding="utf-8").splitlines()]
    rep["docs_in"], rep["docs_out"] = len(raw["id"]), int(kept.sum())
    reasons = Counter(r["reason"] for r in removed)
    rep["removed"] = dict(sorted(reasons.items()))
    n = rep["docs_in"]
    # the stage's definitions: rate = every removal, dup_rate = exact + near duplicates only
    rep["rate"] = round(sum(reasons.values()) / n, 6) if n else 0.0
    rep["dup_rate"] = round((reasons["exact"] + reasons["near"]) / n, 6) if n else 0.0
    _refresh_clusters(rep, removed, raw)
    per: dict[str, Counter] = {}
    for s in raw["source"]:
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
    _note(rep, entry, n)
    _save(tmp, "dedup_report", rep, lambda r: dedup_markdown(r) + granular_markdown(r))
    profile = profile_dataset(tmp)
    _note(profile, entry, 0)
    _save(tmp, "data_profile", profile, profile_markdown)
    con, n = redact(_load(tmp / "contamination_report.json"), bases)
    if "listing" in con:
        con["hits"] = sum(1 for _ in (tmp / "contamination_hits.jsonl").read_text().splitlines())
    _note(con, entry, n)
    _save(tmp, "contamination_report", con, contamination_markdown)


def _refresh_clusters(rep: dict[str, Any], removed: list[dict[str, Any]], raw: dict[str, list[Any]]) -> None:
    """Component pairs and near-duplicate cluster sizes from what is left of removed.jsonl (a near
    cluster = its kept document + the documents removed as its near duplicates)."""
    from ..crossdedup.report import _histogram

    comp = {i: trace_component(t) for i, t in zip(raw["id"], raw["audit_trace"])}
    src = dict(zip(raw["id"], raw["source"]))
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
    rep["cluster_size_histogram"] = _histogram(clusters)
    rep["largest_clusters"] = clusters[:10]


def refresh_tokenizer(tmp: Path, bases: set[str], entry: dict[str, Any]) -> None:
    rep, n = redact(_load(tmp / "tokenizer_eval.json"), bases)
    _note(rep, entry, n)
    _save(tmp, "tokenizer_eval", rep, eval_markdown)


def packed_stats(packed: Path, old: dict[str, Any], drop: set[str], doc_lens: dict[str, int],
                 in_block_before: dict[str, int], n_tokens_ours: dict[str, int]) -> PackStats:
    """Recount a packed dataset from its shards, carrying what only the original run knew (the dropped
    tail) minus the withdrawn documents; asserts that no other document lost a token."""
    S = old["seq_len"]
    st = PackStats(seq_len=S, vocab_size=old["vocab_size"])
    parts: Counter = Counter()
    for path in shard_paths(packed):
        for b in iter_batches(path):
            tok = b.column("input_ids").values.to_numpy().reshape(-1, S)
            st.eot_in_blocks += int(np.count_nonzero(tok == EOT_ID))
            if len(tok):
                st.max_id = max(st.max_id, int(tok.max()))
            for docs, s, e in zip(b.column("doc_ids").to_pylist(), b.column("starts").to_pylist(),
                                  b.column("ends").to_pylist()):
                st.blocks += 1
                st.spans_per_block[len(docs)] += 1
                for d, lo, hi in zip(docs, s, e):
                    parts[d] += 1
                    st.tokens_in_blocks += hi - lo
        st.shards.append(shard_info(path))
    tail = old["tail_docs"]
    st.tail_dropped_docs = [d for d in tail["dropped_entirely"] if d not in drop]
    st.tail_truncated_docs = [d for d in tail["truncated"] if d not in drop]
    gone = [d for d in drop if d in doc_lens]  # withdrawn documents that had been packed
    st.docs = old["docs"] - len(gone)
    st.tokens_produced = old["tokens_produced"] - sum(doc_lens[d] for d in gone)
    st.content_tokens = st.tokens_produced - st.docs
    st.eot_produced = st.docs
    st.dropped_tail_tokens = old["dropped_tail_tokens"] - sum(doc_lens[d] - in_block_before.get(d, 0) for d in gone)
    st.pad_tokens = st.blocks * S - st.tokens_in_blocks
    st.split_docs = sum(1 for d, k in parts.items() if k > 1)
    for name, s in old["per_source"].items():
        lost = [d for d in gone if d.split("/", 1)[0] == name]
        st.source_docs[name] = s["docs"] - len(lost)
        st.source_tokens[name] = s["tokens"] - sum(n_tokens_ours[d] for d in lost)
    assert st.tokens_in_blocks + st.dropped_tail_tokens == st.tokens_produced, (
        f"token accounting after withdrawal: {st.tokens_in_blocks:,} in blocks + {st.dropped_tail_tokens:,} tail != "
        f"{st.tokens_produced:,} produced")
    return st


def refresh_packed(tmp: Path, old: dict[str, Any], st: PackStats, pack_cfg: Any, recipe: dict[str, float],
                   tok: Any, seed: int, bases: set[str], entry: dict[str, Any],
                   by_source: dict[str, Any] | None = None) -> dict[str, Any]:
    samples = decode_samples(tmp, tok, pack_cfg.decode_samples, rng_for(seed, "pack", "decode"))
    t = old["timing"]
    rep = build_report(st, pack_cfg, recipe, samples, wall_s=t["wall_s"], peak_rss=t["peak_rss_mb"],
                       threads=t["threads"])
    rep["timing"] = t  # the original run's timing: a withdrawal does not re-pack the whole run
    rep["orders"] = old.get("orders")
    rep["stage1_target"] = old.get("stage1_target")
    if by_source:
        rep["by_source"] = by_source
    for w in old.get("withdrawals", []):
        rep.setdefault("withdrawals", []).append(w)
    rep, n = redact(rep, bases)
    _note(rep, entry, n)
    _save(tmp, "packing_report", rep, report_markdown)
    return rep


def bases_of(ids: set[str]) -> set[str]:
    return {base_id(i) for i in ids}
