"""``dedup_report.json`` / ``.md``, ``contamination_report`` and the post-dedup mix.

Everything here is computed from the stage's own decisions (``removed``) and the near-dedup state,
so the report cannot disagree with the artifact. The S-curve is measured on real documents with
seeded word edits: for each edited pair the exact Jaccard of the shingle sets is computed and the
pair counts as a candidate when any LSH band of the two signatures is equal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from tqdm import tqdm

from ..dedup import band_keys, exact_jaccard, s_curve
from ..progress import phases_line
from ..provenance import peak_rss_mb
from ..rng import rng_for

_EDIT_LEVELS = (0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6)
_HIST_BINS = ((2, 2), (3, 3), (4, 4), (5, 9), (10, 99), (100, 999), (1000, 10**12))


def post_dedup_mix(recipe: list[tuple[str, float]], srcs: list[str], n_tokens: list[int], n_chars: list[int],
                   kept: np.ndarray) -> dict[str, Any]:
    src = np.array(srcs)
    tok = np.array(n_tokens, dtype=np.int64)
    rows = []
    tot_before, tot_after = int(tok.sum()), int(tok[kept].sum())
    docs_after = int(kept.sum())
    for name, w in recipe:
        m = src == name
        before, after = int(tok[m].sum()), int(tok[m & kept].sum())
        share_b = before / tot_before if tot_before else 0.0
        share_a = after / tot_after if tot_after else 0.0
        rows.append({"source": name, "target_share": w, "docs_before": int(m.sum()), "docs_after": int((m & kept).sum()),
                     "tokens_before": before, "tokens_after": after,
                     "share_tokens_before": round(share_b, 6), "share_tokens_after": round(share_a, 6),
                     "share_docs_after": round(int((m & kept).sum()) / docs_after, 6) if docs_after else 0.0,
                     "drift_pp": round(100 * (share_a - share_b), 4), "deviation_pp": round(100 * (share_a - w), 4)})
    return {"unit": "tokens (DeepSeek counter, from stage 1)", "sources": rows,
            "max_abs_deviation_pp": max((abs(r["deviation_pp"]) for r in rows), default=0.0)}


def histogram(sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for lo, hi in _HIST_BINS:
        k = sum(1 for s in sizes if lo <= s <= hi)
        label = str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 10**12 else f">={lo}")
        out.append({"size": label, "clusters": k})
    return out


def _edit(words: list[str], q: float, rng: np.random.Generator) -> list[str]:
    w = list(words)
    k = max(1, int(round(q * len(w))))
    for pos in rng.choice(len(w), size=min(k, len(w)), replace=False).tolist():
        w[pos] = words[int(rng.integers(0, len(words)))] + "x"
    return w


def measure_s_curve(nd: Any, cfg: Any, seed: int) -> dict[str, Any]:
    """Candidate rate vs exact Jaccard on real documents edited at several levels."""
    if nd.sigs is None or not len(nd.doc_index):
        return {"points": [], "pairs": 0}
    rng = rng_for(seed, "scurve")
    picks = rng.choice(len(nd.doc_index), size=min(cfg.scurve_docs, len(nd.doc_index)), replace=False)
    js, cands = [], []
    for k in tqdm(sorted(picks.tolist()), unit="docs", desc="S-curve check", mininterval=2):
        text = nd.text_of(int(nd.doc_index[k]))
        words = text.split(" ")
        if len(words) < 30:
            continue
        variants = [" ".join(_edit(words, q, rng)) for q in _EDIT_LEVELS]
        sigs = nd.sig_of_texts(variants)
        base = nd.shingles_of_text(text)
        kb = band_keys(nd.sigs[k:k + 1], nd.b, nd.r)[0]
        kv = band_keys(sigs, nd.b, nd.r)
        for v, keys in zip(variants, kv):
            js.append(float(exact_jaccard(base, nd.shingles_of_text(v))))
            cands.append(bool((keys == kb).any()))
    js_a, c_a = np.array(js), np.array(cands)
    points = []
    for lo in np.arange(0.3, 1.0, 0.1):
        m = (js_a >= lo) & (js_a < lo + 0.1)
        if m.sum() < 5:
            continue
        p = float(c_a[m].mean())
        theory = float(np.mean([s_curve(j, nd.b, nd.r) for j in js_a[m]]))
        se = float(np.sqrt(max(theory * (1 - theory), 1e-12) / m.sum()))
        points.append({"j_bin": f"{lo:.1f}-{lo + 0.1:.1f}", "pairs": int(m.sum()), "measured_candidate_rate": round(p, 4),
                       "theory_mean_P": round(theory, 4), "std_err": round(se, 4),
                       "within_2se": abs(p - theory) <= 2 * se + 1e-9})
    return {"method": "real documents, seeded word edits at levels " + ", ".join(map(str, _EDIT_LEVELS)),
            "pairs": len(js), "points": points,
            "theory": [{"j": round(j, 2), "P": round(s_curve(j, nd.b, nd.r), 4)} for j in np.arange(0.1, 1.0001, 0.1)]}


def build_dedup_report(cfg: Any, ids: list[str], srcs: list[str], n_chars: list[int], removed: dict[int, dict],
                       near: dict[str, Any], exact_groups: int, mix: dict[str, Any], nd: Any,
                       elapsed_s: float, components: list[str], index_of: dict[str, int],
                       s_curve: dict[str, Any] | None = None) -> dict[str, Any]:
    """``s_curve``: the measured S-curve when the caller has it (a unit of a resumed run), else measured here."""
    dc = cfg.dedup
    n = len(ids)
    reasons = Counter(r["reason"] for r in removed.values())
    per_source: dict[str, Counter] = {}
    for s in srcs:
        per_source.setdefault(s, Counter())["docs_in"] += 1
    for i, r in removed.items():
        per_source[srcs[i]][r["reason"]] += 1
    names = list(per_source)
    matrix = {a: {b: 0 for b in names} for a in names}
    for i, r in removed.items():
        if r["reason"] in ("exact", "near"):
            matrix[srcs[i]][r["kept_source"]] += 1
    comp_pairs: Counter = Counter()
    for i, r in removed.items():
        if r["reason"] in ("exact", "near"):
            k = index_of[r["kept"]]
            comp_pairs[(f"{srcs[i]}:{components[i]}", f"{srcs[k]}:{components[k]}")] += 1
    clusters = near.get("clusters", [])
    giant = [{"size": len(c), "kept_candidates": [ids[i] for i in c[:5]], "sources": dict(Counter(srcs[i] for i in c))}
             for c in clusters if len(c) > dc.max_cluster_size]
    rng = rng_for(cfg.run.seed, "dedup-pairs")
    dup_idx = sorted(i for i, r in removed.items() if r["reason"] in ("exact", "near"))
    sample = sorted(rng.choice(dup_idx, size=min(dc.sample_pairs, len(dup_idx)), replace=False).tolist()) if dup_idx else []
    pairs = []
    for i in sample:
        r = removed[i]
        pairs.append({"removed": ids[i], "removed_source": srcs[i], "kept": r["kept"], "kept_source": r["kept_source"],
                      "reason": r["reason"], "jaccard_exact": r["jaccard"],
                      "removed_text": nd.text_of(i)[:160] if nd is not None else "",
                      "kept_text": nd.text_of(index_of[r["kept"]])[:160] if nd is not None else ""})
    return {
        "params": {"exact": dc.exact, "near": dc.near, "shingle": dc.shingle, "ngram": dc.ngram,
                   "num_perm": dc.num_perm, "base_hash": dc.base_hash, "threshold": dc.threshold, "bands": near.get("bands"),
                   "rows": near.get("rows"), "permutation_seed": dc.seed, "verify": dc.verify,
                   "banding": dc.banding, "min_recall": dc.min_recall, "cluster": dc.cluster,
                   "keep_policy": "source priority, then longest, then smallest id",
                   "source_priority": list(dc.source_priority) or "recipe order"},
        "docs_in": n,
        "docs_out": n - len(removed),
        "removed": dict(sorted(reasons.items())),
        "exact_groups": exact_groups,
        "rate": round(len(removed) / n, 6) if n else 0.0,
        "dup_rate": round((reasons["exact"] + reasons["near"]) / n, 6) if n else 0.0,
        "per_source": {s: {**dict(c), "rate": round(sum(v for k, v in c.items() if k != "docs_in") / c["docs_in"], 6)}
                       for s, c in per_source.items()},
        "source_matrix": {"rows": "source of the removed document", "cols": "source of the kept document",
                          "counts": matrix},
        "component_pairs": [{"removed": a, "kept": b, "count": c}
                            for (a, b), c in sorted(comp_pairs.items(), key=lambda x: (-x[1], x[0]))],
        "near": {k: v for k, v in near.items() if k not in ("verified_edges", "clusters")},
        "cluster_size_histogram": histogram([len(c) for c in clusters]),
        "largest_clusters": [len(c) for c in clusters[:10]],
        "giant_clusters": giant,
        "sampled_pairs": pairs,
        "s_curve": s_curve if s_curve is not None else measure_s_curve(nd, dc, cfg.run.seed) if nd is not None else {},
        "post_dedup_mix": mix,
        "wall_s": round(elapsed_s, 2),
        "peak_rss_mb": peak_rss_mb(),
    }


def dedup_markdown(rep: dict[str, Any]) -> str:
    lines = [*_md_totals(rep), *_md_sources(rep), *_md_near(rep), *_md_s_curve(rep), *_md_mix(rep), *_md_pairs(rep)]
    return "\n".join(lines) + "\n"


def _md_totals(rep: dict[str, Any]) -> list[str]:
    """Parameters, totals, removals per source."""
    p = rep["params"]
    lines = [
        "# Cross-source dedup report", "",
        f"Shingles: {p['shingle']} {p['ngram']}-grams; MinHash num_perm={p['num_perm']} "
        f"(permutation seed {p['permutation_seed']}); LSH bands x rows = {p['bands']} x {p['rows']} "
        f"(threshold {p['threshold']}); verify: {p['verify']} Jaccard >= threshold; "
        f"keep order: {p['keep_policy']} ({p['source_priority']}); near-duplicate policy: `{p['cluster']}`.", "",
        f"Documents: {rep['docs_in']:,} in, {rep['docs_out']:,} out; removed: "
        + ", ".join(f"{k} {v:,}" for k, v in rep["removed"].items()) + f" (rate {100 * rep['rate']:.2f}%, "
        f"duplicates {100 * rep['dup_rate']:.2f}%). Wall {rep['wall_s']} s (the whole stage"
        + (f": {phases_line(rep['phases_s'])}" if rep.get("phases_s") else "") + f"), peak RSS {rep['peak_rss_mb']} MB.", "",
        "## Per source", "", "| source | docs in | exact | near | contamination | rate |", "|---|---:|---:|---:|---:|---:|",
    ]
    for s, c in rep["per_source"].items():
        lines.append(f"| {s} | {c['docs_in']:,} | {c.get('exact', 0):,} | {c.get('near', 0):,} | "
                     f"{c.get('contamination', 0):,} | {100 * c['rate']:.2f}% |")
    return lines


def _md_sources(rep: dict[str, Any]) -> list[str]:
    """Source x source and component x component duplicates."""
    lines: list[str] = []
    names = list(rep["source_matrix"]["counts"])
    lines += ["", "## Source x source duplicates (row: removed doc's source, column: kept doc's source)", "",
              "| removed \\ kept | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for a in names:
        lines.append(f"| {a} | " + " | ".join(f"{rep['source_matrix']['counts'][a][b]:,}" for b in names) + " |")
    lines += ["", "## Duplicates by corpus component (removed -> kept)", "", "| removed | kept | docs |", "|---|---|---:|"]
    lines += [f"| {x['removed']} | {x['kept']} | {x['count']:,} |" for x in rep["component_pairs"][:30]]
    return lines


def _md_near(rep: dict[str, Any]) -> list[str]:
    """Near-duplicate clusters, banding, keep policy, residual check, giant clusters."""
    lines: list[str] = []
    nr = rep["near"]
    lines += ["", "## Near-duplicate clusters", "",
              f"Candidate pairs {nr.get('candidate_pairs', 0):,}, verified {nr.get('verified_pairs', 0):,}, "
              f"rejected by verification {nr.get('rejected_candidates', 0):,} ({nr.get('rejected_by_estimate', 0):,} of "
              f"them on the signature estimate alone, below threshold - prefilter_margin; exact Jaccard computed for "
              f"{nr.get('exact_jaccard_computed', 0):,}).", "",
              "| cluster size | clusters |", "|---|---:|"]
    lines += [f"| {h['size']} | {h['clusters']:,} |" for h in rep["cluster_size_histogram"]]
    bd = nr.get("banding")
    if bd:
        lines += ["", "## Banding", "", f"{bd['bands']} bands x {bd['rows']} rows, chosen by {bd['chosen_by']}. "
                  f"P(candidate) at J = {bd['threshold']}: **{bd['p_at_threshold']:.4f}** "
                  f"(at J + 0.02: {bd['p_at_threshold_plus_0.02']:.4f}); false-positive area below the threshold "
                  f"{bd['false_positive_area']:.4f}. S-curve 1-(1-J^r)^b:", "",
                  "| J | " + " | ".join(f"{x['j']:.2f}" for x in bd["s_curve"]) + " |",
                  "|---|" + "---:|" * len(bd["s_curve"]),
                  "| P | " + " | ".join(f"{x['p']:.3f}" for x in bd["s_curve"]) + " |"]
    pol = nr.get("policy")
    if pol:
        lines += ["", "## Keep policy", "",
                  f"Policy in use: `{pol['cluster']}`. On this run's verified edges, `greedy` removes "
                  f"{pol['greedy_removes']:,} documents (each with a kept partner at or above the threshold), "
                  f"`transitive` (union-find) would remove {pol['transitive_removes']:,}, "
                  f"{pol['transitive_without_kept_partner']:,} of them without a verified edge to their survivor."]
    res = nr.get("residual")
    if res:
        lines += ["", "## Residual check (kept documents)", "",
                  f"Verified near-duplicate edges between kept documents: **{res['verified_edges_between_kept']}** "
                  f"(0 expected) among {res['kept_docs']:,} kept documents that went through near dedup."]
        if "drawn" in res:
            lo = ", ".join(f"P({k}) = {v:.3f}" for k, v in res["loose_p_at"].items())
            bound = (f"; none found, so at most ~{res['upper_95_if_none_found']:,} (95%)"
                     if res.get("upper_95_if_none_found") is not None else "")
            lines += ["", f"Looser banding {res['loose_bands']} x {res['loose_rows']} ({lo}): "
                      f"{res['loose_bucket_pairs']:,} kept pairs share a bucket; {res['drawn']:,} drawn at random, "
                      f"{res['within_margin']:,} with a signature estimate within the prefilter margin of the "
                      f"threshold, {res['exact_checked']:,} checked by exact Jaccard, "
                      f"{res['exact_at_or_above_threshold']} at or above the threshold. Estimated near duplicates "
                      f"the banding missed: **{res['estimated_missed_near_dups']:,}**{bound}."]
            lines += [f"- `{a}` ~ `{b}`: J = {j}" for a, b, j in res.get("found", [])[:10]]
    if rep["giant_clusters"]:
        lines += ["", f"**Giant clusters** (> max_cluster_size): {len(rep['giant_clusters'])}"]
        lines += [f"- size {g['size']:,}: {g['sources']} e.g. {g['kept_candidates'][:3]}" for g in rep["giant_clusters"]]
    return lines


def _md_s_curve(rep: dict[str, Any]) -> list[str]:
    """The S-curve, theory vs measured."""
    lines: list[str] = []
    sc = rep.get("s_curve") or {}
    if sc.get("points"):
        lines += ["", "## S-curve: theory vs measured", "", f"{sc['method']}; {sc['pairs']:,} pairs.", "",
                  "| Jaccard bin | pairs | measured candidate rate | theory mean P | std err | within 2 se |",
                  "|---|---:|---:|---:|---:|:-:|"]
        lines += [f"| {x['j_bin']} | {x['pairs']} | {x['measured_candidate_rate']:.3f} | {x['theory_mean_P']:.3f} | "
                  f"{x['std_err']:.3f} | {'yes' if x['within_2se'] else 'no'} |" for x in sc["points"]]
    return lines


def _md_mix(rep: dict[str, Any]) -> list[str]:
    """The mix after dedup."""
    lines: list[str] = []
    mix = rep["post_dedup_mix"]
    lines += ["", "## Mix after dedup (token shares)", "",
              "| source | target | before | after | drift (pp) | vs target (pp) | docs before | docs after |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in mix["sources"]:
        lines.append(f"| {r['source']} | {100 * r['target_share']:.1f}% | {100 * r['share_tokens_before']:.2f}% | "
                     f"{100 * r['share_tokens_after']:.2f}% | {r['drift_pp']:+.3f} | {r['deviation_pp']:+.3f} | "
                     f"{r['docs_before']:,} | {r['docs_after']:,} |")
    return lines


def _md_pairs(rep: dict[str, Any]) -> list[str]:
    """Sampled removed pairs, for manual review."""
    p = rep["params"]
    lines: list[str] = []
    lines += ["", "## Sampled removed pairs (for manual review)", "",
              ("Jaccard is between the removed document and the kept document it duplicates (greedy policy: "
               "always >= the threshold)." if p["cluster"] == "greedy" else
               "Jaccard is between the removed document and its cluster's kept document; it can be below the "
               "threshold when they are linked through other members (every verified edge is >= threshold)."), "",
              "| removed | kept | reason | Jaccard | removed text | kept text |", "|---|---|---|---:|---|---|"]
    for x in rep["sampled_pairs"]:
        def clip(t: str) -> str:
            return " ".join(t.split())[:90].replace("|", "\\|")
        lines.append(f"| `{x['removed']}` | `{x['kept']}` | {x['reason']} | {x['jaccard_exact']:.3f} | "
                     f"{clip(x['removed_text'])} | {clip(x['kept_text'])} |")
    return lines


def contamination_markdown(c: dict[str, Any]) -> str:
    if c.get("enabled") is False:
        return "# Contamination report\n\nDecontamination disabled (`decontam.enabled: false`).\n"
    lines = ["# Contamination report", "", f"Word {c['ngram']}-gram overlap; action: `{c['action']}`.", "",
             "| benchmark | items | n-grams indexed | docs hit (best match) |", "|---|---:|---:|---:|"]
    for b, info in c["benchmarks"].items():
        lines.append(f"| {b} | {info['items']:,} | {info['ngrams']:,} | {c['per_benchmark'].get(b, 0):,} |")
    lines += ["", f"Documents hit: {c['docs_hit']:,} ({c['hits']:,} document x item hits).", ""]
    if c["listing"]:
        lines += ["Per document, the best-matching item (most shared n-grams) is named; `share` is the part of that "
                  "item's n-grams found in the document; `items hit` counts every item with a hit.", "",
                  "| doc | source | benchmark | best item | matched n-grams | share of item | items hit | first match |",
                  "|---|---|---|---|---:|---:|---:|---|"]
        lines += [f"| `{h['doc_id']}` | {h['source']} | {h['benchmark']} | {h['item_id']} | {h['matches']} | "
                  f"{100 * h.get('share', 0.0):.1f}% | {h.get('items_hit', 1)} | {h['ngram']} |" for h in c["listing"]]
    return "\n".join(lines) + "\n"


def stage_counters(docs_in: int, docs_out: int, removed: dict[str, int], contamination_hits: int) -> dict[str, Any]:
    """The manifest counters of ``mixed_dedup``: written by the stage and again by a withdrawal's edit."""
    return {"docs_in": docs_in, "docs_out": docs_out, "exact_removed": removed.get("exact", 0),
            "near_removed": removed.get("near", 0), "exact_after_cleaning_removed": removed.get("exact_after_cleaning", 0),
            "contamination_hits": contamination_hits, "removed": removed}
