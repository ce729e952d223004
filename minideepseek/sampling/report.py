"""``source_mix.json`` / ``.md``: target vs realized share per source, in docs, tokens and chars.

Built only from counters of the rows actually written (``realized``) and the takers' statistics,
so the report cannot disagree with the artifact.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..mdsafe import md_code, md_text
from .config import MixSamplerConfig
from .quota import Taker

TOLERANCE_PP = 0.5  # acceptance: every source within 0.5 percentage points of its target share
FILL_TOLERANCE = 0.01  # acceptance: the realized total within 1% of the target (a token quota lands within half a doc)


def build_source_mix(cfg: MixSamplerConfig, takers: dict[str, Taker], outcome: dict[str, dict],
                     realized: dict[str, Counter], rejects: dict[str, Counter]) -> dict[str, Any]:
    sc = cfg.sampler
    totals = {k: sum(c[k] for c in realized.values()) for k in ("docs", "tokens", "chars")}
    rows = []
    for s in cfg.sources:
        c, t = realized[s.name], takers[s.name]
        share = {k: (c[k] / totals[k] if totals[k] else 0.0) for k in totals}
        unique = t.stats.unique_units
        dev_pp = 100 * (share[sc.unit] - s.weight)
        rows.append({
            "source": s.name,
            "type": s.type,
            "target_share": s.weight,
            "target_units": outcome[s.name]["target_units"],
            "final_quota": outcome[s.name]["final_quota"],
            "docs": c["docs"],
            "tokens": c["tokens"],
            "chars": c["chars"],
            "share_docs": round(share["docs"], 6),
            "share_tokens": round(share["tokens"], 6),
            "share_chars": round(share["chars"], 6),
            "deviation_pp": round(dev_pp, 4),
            "abs_deviation_pp": round(abs(dev_pp), 4),
            "within_tolerance": abs(dev_pp) <= TOLERANCE_PP,
            "epochs": round(c[sc.unit] / unique, 4) if unique else (None if not t.exhausted else 0.0),
            "passes_started": t.stats.epochs_started,
            "docs_per_epoch": {k: v for k, v in sorted(c.items()) if k.startswith("epoch_")},
            "max_epochs": s.max_epochs,
            "records_seen": t.stats.seen,
            "shortfall": outcome[s.name]["shortfall"],
            "dropped_by_shrink": c["dropped_by_shrink"],
            "rejects": dict(sorted(rejects[s.name].items())),
            "rejects_total": sum(rejects[s.name].values()),
            "filtered": sum(t.stats.filtered.values()),
            **({"withdrawn": t.stats.withdrawn} if t.stats.withdrawn else {}),
        })
    fill = None if sc.take_all else round(totals[sc.unit] / sc.target, 6)  # type: ignore[operator]
    return {
        "run": cfg.run.name,
        "seed": cfg.run.seed,
        "unit": sc.unit,
        "target": "all" if sc.take_all else sc.target,
        "recipe": recipe_verdict(rows, sc.unit, sc.target, totals[sc.unit], sc.shortfall),
        "shortfall_policy": sc.shortfall,
        "token_counter": sc.token_counter,
        "tolerance_pp": TOLERANCE_PP,
        "sources": rows,
        "totals": {**totals, "rejects": sum(r["rejects_total"] for r in rows),
                   "filtered": sum(r["filtered"] for r in rows),
                   "max_abs_deviation_pp": max((r["abs_deviation_pp"] for r in rows), default=0.0),
                   "all_within_tolerance": all(r["within_tolerance"] for r in rows),
                   "target_fill": fill},
    }


def recipe_verdict(rows: list[dict[str, Any]], unit: str, target: int | None, realized: int,
                   policy: str) -> dict[str, Any]:
    """Was the recipe met? Every miss named: a source outside the share tolerance (with its share, target,
    deviation and whether it ran short), and a total short of the target. A source that ran short but
    stayed within tolerance is listed apart (its deficit went elsewhere, by ``policy``)."""
    misses = []
    for r in rows:
        if not r["within_tolerance"]:
            short = " (ran short)" if r["shortfall"] else ""
            share = 100 * r[f"share_{unit}"]
            misses.append({"source": r["source"], "kind": "share", "deviation_pp": r["deviation_pp"],
                           "detail": f"{r['source']}{short}: {share:.2f}% of {unit} vs its "
                                     f"{100 * r['target_share']:.1f}% target ({r['deviation_pp']:+.2f} pp; tolerance "
                                     f"±{TOLERANCE_PP} pp, {abs(r['deviation_pp']) / TOLERANCE_PP:.1f}x)"})
    if target is not None and realized < target * (1 - FILL_TOLERANCE):
        misses.append({"source": None, "kind": "total", "detail": f"total: {realized:,} of the {target:,} {unit} "
                       f"targeted ({100 * realized / target:.1f}%; policy `{policy}`)"})
    short = [r["source"] for r in rows if r["shortfall"] and r["within_tolerance"]]
    return {"met": not misses, "misses": misses, "short_within_tolerance": short,
            "tolerance_pp": TOLERANCE_PP, "fill_tolerance": FILL_TOLERANCE}


def verdict_line(mix: dict[str, Any]) -> str:
    """One line for the stage's summary and the run summary: met, or every miss against its tolerance."""
    rec = mix.get("recipe") or {}
    if rec.get("met", True):
        extra = (f"; ran short but within tolerance: {', '.join(rec['short_within_tolerance'])}"
                 if rec.get("short_within_tolerance") else "")
        target = "all the sources hold" if mix.get("target") == "all" else f"{mix['target']:,} {mix['unit']}"
        return (f"recipe met: every source within ±{mix['tolerance_pp']} pp of its {mix['unit']} share, target "
                f"{target}{extra}")
    return "recipe MISSED: " + "; ".join(m["detail"] for m in rec["misses"])


def source_mix_markdown(mix: dict[str, Any]) -> str:
    unit = mix["unit"]
    lines = [
        f"# Source mix — run `{mix['run']}`",
        "",
        f"Target: {_target(mix)} (token counter: {mix['token_counter']}); shortfall policy: "
        f"`{mix['shortfall_policy']}`; tolerance ±{mix['tolerance_pp']} pp on the {unit} share.",
        "",
        f"**{verdict_line(mix)}**",
        "",
        "| source | target | docs | tokens | chars | share docs | share tokens | share chars | dev (pp) | epochs "
        "| rejects | filtered | ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|",
    ]
    for r in mix["sources"]:
        ep = "—" if r["epochs"] is None else f"{r['epochs']:.2f}"
        flag = "yes" if r["within_tolerance"] else ("SHORT" if r["shortfall"] else "no")
        lines.append(
            f"| {r['source']} | {100 * r['target_share']:.1f}% | {r['docs']:,} | {r['tokens']:,} | {r['chars']:,} | "
            f"{100 * r['share_docs']:.2f}% | {100 * r['share_tokens']:.2f}% | {100 * r['share_chars']:.2f}% | "
            f"{r['deviation_pp']:+.3f} | {ep} | {r['rejects_total']:,} | {r['filtered']:,} | {flag} |")
    t = mix["totals"]
    lines += [
        f"| **total** | 100% | {t['docs']:,} | {t['tokens']:,} | {t['chars']:,} | | | | "
        f"max {t['max_abs_deviation_pp']:.3f} | | {t['rejects']:,} | {t['filtered']:,} | "
        f"{'yes' if t['all_within_tolerance'] else 'no'} |",
        "",
        "`epochs` = realized units / units available in one pass (— = the source was not exhausted, so < 1). "
        "`rejects` = invalid records (see below); `filtered` = dropped by quality/safety filters "
        "(see `filter_report.md`). Both happen before the quota is counted.",
        "",
        "## Rejects by reason",
        "",
        "| source | reason | count |",
        "|---|---|---:|",
    ]
    for r in mix["sources"]:
        for reason, n in r["rejects"].items():
            lines.append(f"| {r['source']} | {reason} | {n:,} |")
    lines += _ingestion_markdown(mix.get("ingestion") or {})
    shorts = [r for r in mix["sources"] if r["shortfall"]]
    if shorts:
        lines += ["", "## Shortfalls", ""]
        for r in shorts:
            lines.append(f"- `{r['source']}` ran out after {r['passes_started']} pass(es) (max_epochs={r['max_epochs']}): "
                         f"{r[unit]:,} of {r['target_units']:,.0f} {unit}; policy `{mix['shortfall_policy']}`.")
    return "\n".join(lines) + "\n"


def _target(mix: dict[str, Any]) -> str:
    if mix["target"] == "all":
        return (f"all ({mix['unit']}: every source read to the end, up to its max_epochs, and the mix scaled to "
                "the scarcest source)")
    return f"{mix['target']:,} {mix['unit']}"


def _ingestion_markdown(ing: dict[str, Any]) -> list[str]:
    """Per file-based source: lines read, records kept, rejects; then every file with a problem."""
    if not ing.get("sources"):
        return []
    lines = ["", "## Ingestion (file-based sources)", "",
             "Every line of every file is counted: records kept + rejected + blank lines = lines. Rejected "
             "records are in `rejects.jsonl` with file, 1-based line and byte offset.", "",
             "| source | files | lines | records kept | rejected | blank lines | file problems |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, v in ing["sources"].items():
        files = f"{len(v['files']):,}" + (f" of {v['files_listed']:,}" if v.get("files_listed", 0) > len(v["files"]) else "")
        lines.append(f"| {name} | {files} | {v['lines']:,} | {v['records']:,} | {v['rejects']:,} | "
                     f"{v['blank_lines']:,} | {v['file_problems']:,} |")
    warc = {n: v["skipped"] for n, v in ing["sources"].items() if v.get("skipped")}
    if warc:
        lines += ["", "WARC records that are not documents by design (skipped, not rejects; records kept + rejected + "
                  "skipped = lines):", "", "| source | skipped | by reason |", "|---|---:|---|"]
        for n, sk in warc.items():
            lines.append(f"| {n} | {sum(sk.values()):,} | " + ", ".join(f"{r} {c:,}" for r, c in sk.items()) + " |")
    flagged = [(n, f) for n, v in ing["sources"].items() for f in v["files"] if f["status"] != "ok" or f.get("notes")]
    if flagged:
        lines += ["", "| source | file | status | problem | lines | kept | rejected |", "|---|---|---|---|---:|---:|---:|"]
        for n, f in flagged:
            problem = md_text("; ".join([f["problem"], *f.get("notes", [])]).strip("; "))  # names from the disk
            lines.append(f"| {n} | {md_code(f['file'])} | {f['status']} | {problem} | {f['lines']:,} | {f['records']:,} | "
                         f"{sum(f['rejects'].values()):,} |")
    if ing.get("empty_sources"):
        lines += ["", "Sources skipped as empty (`sampler.empty_source=skip`): "
                  + ", ".join(f"`{n}`" for n in ing["empty_sources"])]
    return lines
