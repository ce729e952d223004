"""``dashboard.html`` (self-contained: inline SVG charts, no scripts, no network) and ``dashboard.md``
for one run or two runs side by side."""

from __future__ import annotations

import html
from typing import Any

from .. import pipeline

COLORS = ("#3b6fb6", "#e07b39", "#4c9a5b", "#a05195")


def bar_chart(title: str, cats: list[str], series: dict[str, list[float | None]], fmt: str = "{:.1f}",
              unit: str = "") -> str:
    """A grouped horizontal bar chart as an inline ``<svg>`` (one group per category, one bar per run)."""
    runs = list(series)
    bar_h, gap, label_w, width = 14, 10, 170, 680
    plot_w = width - label_w - 90
    vals = [v for vs in series.values() for v in vs if v is not None]
    vmax = max(vals, default=0.0) or 1.0
    height = 12 + len(cats) * (len(runs) * bar_h + gap) + 24
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{html.escape(title)}">']
    y = 8
    for i, cat in enumerate(cats):
        out.append(f'<text x="{label_w - 6}" y="{y + len(runs) * bar_h / 2 + 4:.0f}" font-size="12" '
                   f'text-anchor="end">{html.escape(cat)}</text>')
        for k, run in enumerate(runs):
            v = series[run][i]
            w = 0 if v is None else max(1.0, plot_w * v / vmax)
            out.append(f'<rect class="bar" x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{COLORS[k % len(COLORS)]}"><title>{html.escape(run)}: {v}</title></rect>')
            label = "n/a" if v is None else fmt.format(v) + unit
            out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 4}" font-size="11">{label}</text>')
            y += bar_h
        y += gap
    lx = label_w
    for k, run in enumerate(runs):
        out.append(f'<rect x="{lx}" y="{height - 14}" width="10" height="10" fill="{COLORS[k % len(COLORS)]}"/>'
                   f'<text x="{lx + 14}" y="{height - 5}" font-size="11">{html.escape(run)}</text>')
        lx += 20 + 7 * len(run)
    out.append("</svg>")
    return "".join(out)


def _get(run: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = run
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


def labels(runs: list[dict[str, Any]]) -> list[str]:
    """Run names, made unique (A/B prefixes) so a run compared with itself still shows two series."""
    names = [r["name"] for r in runs]
    return names if len(set(names)) == len(names) else [f"{chr(65 + i)}: {n}" for i, n in enumerate(names)]


def charts(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(section title, svg) for every dashboard metric."""
    names = labels(runs)
    sources = list(dict.fromkeys(s for r in runs for s in r["sources"]))
    out = []

    def per_source(title: str, path: tuple[str, ...], scale: float = 1.0, fmt: str = "{:.1f}", unit: str = "") -> None:
        """``path`` addresses the value with ``{s}`` standing for the source name."""
        series = {}
        for n, r in zip(names, runs):
            vals = []
            for s in sources:
                v = _get(r, tuple(s if p == "{s}" else p for p in path))
                vals.append(None if v is None else v * scale)
            series[n] = vals
        out.append((title, bar_chart(title, sources, series, fmt, unit)))

    per_source("Documents per source (stage 1)", ("sources", "{s}", "docs"), fmt="{:,.0f}")
    per_source("Token share per source, stage 1 (DeepSeek tokens)", ("sources", "{s}", "share_tokens"), 100, "{:.2f}",
               "%")
    per_source("Token share per source, packed (our tokenizer)", ("packing", "share_ours", "{s}"), 100, "{:.2f}", "%")
    per_source("Dedup rate per source", ("dedup", "per_source", "{s}"), 100, "{:.2f}", "%")
    per_source("Median document length (chars, after dedup)", ("profile", "{s}", "p50"), fmt="{:,.0f}")
    per_source("Code documents per source", ("profile", "{s}", "code"), 100, "{:.1f}", "%")
    per_source("Math documents per source", ("profile", "{s}", "math"), 100, "{:.1f}", "%")
    tok = {n: [_get(r, (pipeline.TOKENIZER, "per_source", s, "ours")) for s in sources] for n, r in zip(names, runs)}
    out.append(("Tokenizer compression on held-out text (our tokens/char; lower is better)",
                bar_chart("Our tokens per character, held-out, per domain", sources, tok, "{:.3f}")))
    langs = list(dict.fromkeys(k for r in runs for k in list(_get(r, ("profile_overall", "lang")) or {})[:6]))
    out.append(("Language shares (documents, after dedup)", bar_chart(
        "Language share of documents", langs,
        {n: [100 * (_get(r, ("profile_overall", "lang")) or {}).get(x, 0.0) for x in langs] for n, r in zip(names, runs)},
        "{:.1f}", "%")))
    bins = list(dict.fromkeys(b for r in runs for b in (_get(r, ("profile_overall", "histogram")) or {})))
    out.append(("Text-length distribution (documents per character bin, after dedup)", bar_chart(
        "Documents per length bin (chars)", bins,
        {n: [(_get(r, ("profile_overall", "histogram")) or {}).get(b) for b in bins] for n, r in zip(names, runs)},
        "{:,.0f}")))
    nsh = max((len(_get(r, ("packing", "shard_bytes")) or []) for r in runs), default=0)
    out.append(("Packed shard sizes (MiB)", bar_chart(
        "Packed shard sizes (MiB)", [f"shard {i}" for i in range(nsh)],
        {n: [(sz[i] / 2**20 if i < len(sz) else None) for i in range(nsh)]
         for n, r in zip(names, runs) for sz in [_get(r, ("packing", "shard_bytes")) or []]}, "{:.2f}")))
    stages = list(dict.fromkeys(k for r in runs for k in r.get("wall_s", {})))
    out.append(("Stage wall time (s)", bar_chart(
        "Stage wall time (s)", stages, {n: [r.get("wall_s", {}).get(s) for s in stages] for n, r in zip(names, runs)},
        "{:.1f}", " s")))
    out.append(("Contamination hits", bar_chart(
        "Benchmark contamination hits", ["hits"], {n: [r.get("contamination_hits")] for n, r in zip(names, runs)},
        "{:,.0f}")))
    return out


_ROWS = (("documents (stage 1)", ("totals", "docs"), "{:,}"), ("DeepSeek tokens (stage 1)", ("totals", "tokens"), "{:,}"),
         ("mix max deviation (pp)", ("totals", "max_abs_deviation_pp"), "{:.3f}"),
         ("dedup rate", ("dedup", "rate"), "{:.4f}"), ("documents after dedup", ("dedup", "docs_out"), "{:,}"),
         ("tokenizer vocab", (pipeline.TOKENIZER, "vocab"), "{:,}"), ("packed blocks", ("packing", "blocks"), "{:,}"),
         ("packing efficiency", ("packing", "efficiency"), "{:.5f}"), ("pad tokens", ("packing", "pad_tokens"), "{:,}"),
         ("contamination hits", ("contamination_hits",), "{:,}"),
         ("certificate: near-dup recall", ("certificate", "near_recall"), "{:.3f}"),
         ("certificate: decontamination recall", ("certificate", "decontamination_recall"), "{:.3f}"),
         ("certificate: false removals", ("certificate", "false_removals"), "{:,}"),
         ("smoke-train last loss", (pipeline.SMOKE_TRAIN, "loss_last"), "{:.3f}"),
         ("smoke-train last val loss", (pipeline.SMOKE_TRAIN, "val_last"), "{:.3f}"))


def _fmt(fmt: str, v: Any) -> str:
    return "—" if v is None else fmt.format(v)


def overview_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    return [[label] + [_fmt(fmt, _get(r, path)) for r in runs] for label, path, fmt in _ROWS]


def source_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for s in dict.fromkeys(s for r in runs for s in r["sources"]):
        cells = [s]
        for r in runs:
            x = r["sources"].get(s)
            ours = _get(r, ("packing", "share_ours", s))
            cells.append("—" if x is None else f"{x['docs']:,} docs / {x['tokens']:,} tok / {100 * x['share_tokens']:.2f}%"
                         + ("" if ours is None else f" (ours {100 * ours:.2f}%)"))
        rows.append(cells)
    return rows


def markdown(runs: list[dict[str, Any]], flags: list[dict[str, Any]] | None, thresholds: dict[str, float]) -> str:
    names = labels(runs)
    head = "| metric | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names)
    lines = [f"# Data dashboard: {' vs '.join(names)}", "",
             "Read from each run's reports and manifests (not the raw data). Reproduce: `.venv/bin/python report.py "
             + ("compare " if len(runs) > 1 else "show ") + " ".join(r["name"] for r in runs) + "`.", "", head]
    lines += ["| " + " | ".join(row) + " |" for row in overview_rows(runs)]
    lines += ["", "| source | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in source_rows(runs)]
    if flags is not None:
        lines += ["", f"## Drift flags ({len(flags)})", "", "Thresholds: " + ", ".join(f"`{k}={v}`" for k, v in
                                                                                   thresholds.items()), ""]
        if flags:
            lines += ["| rule | where | detail |", "|---|---|---|"]
            lines += [f"| {f['rule']} | {f['where']} | {f['detail']} |" for f in flags]
        else:
            lines.append("No drift beyond the thresholds.")
    lines += ["", "Charts: `dashboard.html`."]
    return "\n".join(lines) + "\n"


def page(runs: list[dict[str, Any]], flags: list[dict[str, Any]] | None, thresholds: dict[str, float]) -> str:
    names = labels(runs)
    esc = html.escape

    def table(header: list[str], rows: list[list[str]], cls: str = "") -> str:
        return (f'<table class="{cls}"><tr>' + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows) + "</table>")

    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Data dashboard: {esc(' vs '.join(names))}"
             "</title><style>body{font-family:sans-serif;margin:24px;max-width:1500px}table{border-collapse:collapse;"
             "margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}.flags td{text-align:left}.flag{background:#fde2e1}"
             ".grid{display:flex;flex-wrap:wrap;gap:18px}.card{border:1px solid #ddd;padding:8px;border-radius:6px}"
             "</style></head><body>",
             f"<h1>Data dashboard: {esc(' vs '.join(names))}</h1>",
             "<p>Read from each run's reports and manifests (not the raw data). Metrics of the seed's table P11-11.</p>",
             table(["metric"] + names, overview_rows(runs)), table(["source"] + names, source_rows(runs))]
    if flags is not None:
        parts.append(f'<h2 id="drift">Drift flags ({len(flags)})</h2><p>Thresholds: '
                     + esc(", ".join(f"{k}={v}" for k, v in thresholds.items())) + "</p>")
        parts.append(table(["rule", "where", "detail"], [[f["rule"], f["where"], f["detail"]] for f in flags], "flags")
                     .replace("<tr><td>", '<tr class="flag"><td>') if flags else "<p>No drift beyond the thresholds.</p>")
    parts.append('<h2>Charts</h2><div class="grid">')
    for title, svg in charts(runs):
        parts.append(f'<div class="card"><h3>{esc(title)}</h3>{svg}</div>')
    parts.append("</div></body></html>\n")
    return "".join(parts)
