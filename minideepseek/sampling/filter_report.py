"""``filter_report.json`` / ``.md``: per source, per filter and per reason, what the filter chain
dropped (with a few examples a reviewer can judge) and what the modifiers changed in the kept docs.

Rates are over the documents the chain evaluated: the sampler evaluates documents in sampling order
until the quota is met, so on a large source only a prefix of it is evaluated — that prefix is a
uniform sample, so its drop rates estimate the source's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..mdsafe import md_code, md_text, redact, snippet_md
from .config import MixSamplerConfig
from .quota import Taker


def build_filter_report(cfg: MixSamplerConfig, takers: dict[str, Taker], realized: dict[str, Counter],
                        mods: dict[str, Counter], examples: dict[str, dict[tuple[str, str], list[dict]]],
                        pilots: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    sources = []
    for s in cfg.sources:
        st = takers[s.name].stats
        chain = [f.get("type") for f in s.filters]
        by_filter: dict[str, dict[str, Any]] = {name: {"dropped": 0, "reasons": {}, "examples": {}} for name in chain}
        for (fname, reason), n in sorted(st.filtered.items()):
            entry = by_filter.setdefault(fname, {"dropped": 0, "reasons": {}, "examples": {}})
            entry["dropped"] += n
            entry["reasons"][reason] = n
            entry["examples"][reason] = examples[s.name].get((fname, reason), [])
        dropped = sum(st.filtered.values())
        for entry in by_filter.values():
            entry["drop_rate"] = round(entry["dropped"] / st.evaluated, 6) if st.evaluated else 0.0
        entry_pilot = _pilot_entry((pilots or {}).get(s.name), chain, st.evaluated, st.filtered)
        sources.append({
            **({"quality_pilot": entry_pilot} if entry_pilot else {}),
            "source": s.name,
            "chain": chain,
            "evaluated": st.evaluated,
            "dropped": dropped,
            "kept": st.evaluated - dropped,
            "drop_rate": round(dropped / st.evaluated, 6) if st.evaluated else 0.0,
            "filters": by_filter,
            "written_docs": realized[s.name]["docs"],
            "modifications_in_written_docs": dict(sorted(mods[s.name].items())),
        })
    return {"run": cfg.run.name, "seed": cfg.run.seed, "sources": sources,
            "totals": {"evaluated": sum(x["evaluated"] for x in sources), "dropped": sum(x["dropped"] for x in sources)}}


def _pilot_entry(pilot: dict[str, Any] | None, chain: list[str], evaluated: int,
                 filtered: Counter) -> dict[str, Any] | None:
    """The top_fraction pilot and the share the quality filter really kept of the documents reaching it."""
    if pilot is None:
        return None
    idx = pilot["filter_index"]
    earlier = set(chain[:idx])
    reached = evaluated - sum(n for (f, _), n in filtered.items() if f in earlier)
    dropped = sum(n for (f, _), n in filtered.items() if f == chain[idx])
    return {**pilot, "reached_filter": reached, "kept_by_filter": reached - dropped,
            "kept_share": round((reached - dropped) / reached, 4) if reached else None}


def filter_report_markdown(rep: dict[str, Any]) -> str:
    lines = [f"# Filter report — run `{rep['run']}`", "",
             "Each dropped document is attributed to the first filter of its source's chain that dropped it.", "",
             "| source | chain | evaluated | dropped | drop rate |", "|---|---|---:|---:|---:|"]
    for s in rep["sources"]:
        lines.append(f"| {s['source']} | {' → '.join(s['chain']) or '(none)'} | {s['evaluated']:,} | {s['dropped']:,} | "
                     f"{100 * s['drop_rate']:.2f}% |")
    pilots = [s for s in rep["sources"] if s.get("quality_pilot")]
    if pilots:
        lines += ["", "## Quality top fraction: thresholds from the pilot", "",
                  "| source | top fraction | pilot docs | threshold | reached filter | kept | kept share |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for s in pilots:
            p = s["quality_pilot"]
            share = "" if p["kept_share"] is None else f"{p['kept_share']:.4f}"
            lines.append(f"| {s['source']} | {p['top_fraction']} | {p['pilot_docs']:,} | {p['threshold']:.4f} | "
                         f"{p['reached_filter']:,} | {p['kept_by_filter']:,} | {share} |")
    lines += ["", "## Drops per rule", "", "| source | filter | reason | docs | share of evaluated |",
              "|---|---|---|---:|---:|"]
    for s in rep["sources"]:
        for fname, f in s["filters"].items():
            for reason, n in f["reasons"].items():
                lines.append(f"| {s['source']} | {fname} | {reason} | {n:,} | "
                             f"{100 * n / max(1, s['evaluated']):.2f}% |")
            if not f["reasons"]:
                lines.append(f"| {s['source']} | {fname} | (none dropped) | 0 | 0.00% |")
    lines += ["", "## Modifications in the written documents", "", "| source | change | count |", "|---|---|---:|"]
    for s in rep["sources"]:
        for k, n in s["modifications_in_written_docs"].items():
            lines.append(f"| {s['source']} | {k} | {n:,} |")
    lines += ["", "## Dropped examples (first 200 chars)", ""]
    for s in rep["sources"]:
        for fname, f in s["filters"].items():
            for reason, exs in f["examples"].items():
                lines.append(f"### {s['source']} · {md_text(fname)} · {md_text(reason)}")
                lines.append("")
                for ex in exs:  # redacted when collected; escaped here (hostile text must stay inert Markdown)
                    lines.append(f"- {md_code(ex['id'])} {md_text(redact(ex['url']))}  \n  > {snippet_md(ex['text'])}")
                lines.append("")
    return "\n".join(lines) + "\n"
