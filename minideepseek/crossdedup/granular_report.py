"""The dedup report's sections for the finer granularities (granular.py): the funnel, every step's
counts with examples, and every step's throughput and peak RSS as ratios to the MinHash step."""

from __future__ import annotations

from typing import Any

NEAR_PHASE = "near (signatures, candidates, verification)"


def _clip(t: str, k: int = 100) -> str:
    return " ".join(str(t).split())[:k].replace("|", "\\|")


def granular_markdown(rep: dict[str, Any]) -> str:
    g = rep.get("granular")
    if not g:
        return ""
    out = [*_md_funnel(g), *_md_url(g), *_md_lines(g), *_md_paragraphs(g), *_md_substrings(g), *_md_against(g),
           *_md_perf(rep, g)]
    return "\n".join(out) + "\n"


def _md_funnel(g: dict[str, Any]) -> list[str]:
    """Documents and characters in/out per step and source."""
    out = ["", "## Dedup funnel (documents and characters in/out per step and source)", "",
           "Steps in order: " + " -> ".join(f"`{s}`" for s in g["order"]) + ". `url`, `exact`, `near` and "
           "`against` remove whole documents; `lines`, `paragraphs` and `substrings` then clean the survivors' "
           "texts (a document left too short is dropped there); `exact_after_cleaning` removes documents the "
           "cleaning made identical.", "",
           "| step | source | docs in | docs out | chars in | chars out | chars removed |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in g["funnel"]:
        if r["docs_in"] == r["docs_out"] and r["chars_in"] == r["chars_out"] and r["source"] != "all":
            continue  # unchanged source rows are left out; the `all` row is always shown
        d = r["chars_in"] - r["chars_out"]
        out.append(f"| {r['step']} | {r['source']} | {r['docs_in']:,} | {r['docs_out']:,} | {r['chars_in']:,} | "
                   f"{r['chars_out']:,} | {d:,} ({100 * d / max(1, r['chars_in']):.1f}%) |")
    return out


def _md_url(g: dict[str, Any]) -> list[str]:
    """URL / origin dedup."""
    out: list[str] = []
    u = g.get("url")
    if u:
        out += ["", "## URL / origin dedup", "",
                f"Sources {u['sources']}: {u['removed']:,} documents removed ({u['by_origin_rule']:,} through an origin "
                f"rule, e.g. a Sphinx `_sources/*.rst.txt` twin of an `.html` page); per source {u['per_source']}.", ""]
        out += [f"- `{x['url']}` -> kept `{x['kept_url']}`" for x in u["examples"]]
    return out


def _md_lines(g: dict[str, Any]) -> list[str]:
    """Line-level boilerplate."""
    out: list[str] = []
    ln = g.get("lines")
    if ln:
        out += ["", "## Line-level boilerplate", "",
                f"Sources {ln['sources']}; {ln['buckets']} seeded buckets of ~{ln['bucket_docs']} documents; a line in more "
                f"than {ln['max_repeats']} documents of its bucket is removed "
                f"({ln['boilerplate_lines']:,} such (bucket, line) "
                "pairs).", "", "| source | docs touched | lines removed | chars removed | docs dropped (too short) |",
                "|---|---:|---:|---:|---:|"]
        out += [f"| {s} | {c.get('docs_touched', 0):,} | {c.get('lines_removed', 0):,} | {c.get('chars_removed', 0):,} | "
                f"{c.get('docs_dropped_too_short', 0):,} |" for s, c in ln["per_source"].items()]
        out += ["", "Top removed lines (normalized: casefolded, digits as 0):", "",
                "| line | removed from docs |", "|---|---:|"]
        out += [f"| `{_clip(x['line'], 90)}` | {x['removed_from_docs']:,} |" for x in ln["top_lines"]]
    return out


def _md_paragraphs(g: dict[str, Any]) -> list[str]:
    """Paragraph dedup."""
    out: list[str] = []
    p = g.get("paragraphs")
    if p:
        bloom = (f"Bloom filter of {p['bloom_bits']:,} bits ({p['bloom_bytes']:,} bytes), "
                 f"{p['bloom_hashes']} hashes, sized "
                 f"for a false-positive rate {p['target_fp_rate']:g}; at its fill {p['fp_rate_at_fill']:.2e}, so at most "
                 f"~{p['expected_false_removals_upper']:g} paragraphs removed by a false positive" if "bloom_bits" in p
                 else "exact hash set")
        out += ["", "## Paragraph dedup", "",
                f"Sources {p['sources']}; newline-separated paragraphs of >= {p['min_chars']} normalized characters, "
                f"{p['paragraphs_queried']:,} checked, repeats after the first occurrence removed; {bloom}.", "",
                "| source | docs touched | paragraphs removed | chars removed | docs dropped (too short) |",
                "|---|---:|---:|---:|---:|"]
        out += [f"| {s} | {c.get('docs_touched', 0):,} | {c.get('paragraphs_removed', 0):,} | "
                f"{c.get('chars_removed', 0):,} | "
                f"{c.get('docs_dropped_too_short', 0):,} |" for s, c in p["per_source"].items()]
        out += ["", *[f"- `{x['doc']}`: {_clip(x['paragraph'])}" for x in p["examples"][:5]]]
    return out


def _md_substrings(g: dict[str, Any]) -> list[str]:
    """Exact-substring dedup."""
    out: list[str] = []
    s = g.get("substrings")
    if s:
        out += ["", "## Exact-substring dedup (suffix array)", "",
                f"Sources {s['sources']}; spans of >= {s['min_tokens']} tokens occurring >= 2 times, kept at their first "
                f"occurrence; suffix array by `{s['engine']}` over {s['tokens_in']:,} tokens in {s['chunks']} chunk(s): "
                f"{s['spans_removed']:,} spans, {s['tokens_removed']:,} tokens removed.", "",
                "| source | docs touched | spans removed | chars removed | docs dropped (too short) |",
                "|---|---:|---:|---:|---:|"]
        out += [f"| {k} | {c.get('docs_touched', 0):,} | {c.get('spans_removed', 0):,} | {c.get('chars_removed', 0):,} | "
                f"{c.get('docs_dropped_too_short', 0):,} |" for k, c in s["per_source"].items()]
        out += ["", "| removed from | first occurrence in | tokens | span |", "|---|---|---:|---|"]
        out += [f"| `{x['doc']}` | `{x['first_in']}` | {x['tokens']} | {_clip(x['text'])} |" for x in s["examples"]]
    return out


def _md_against(g: dict[str, Any]) -> list[str]:
    """Against earlier runs, and the index this run saved."""
    out: list[str] = []
    a = g.get("against")
    if a:
        out += ["", "## Against earlier runs", "",
                f"Indexes {[(x['path'], x['docs'], x['verify']) for x in a['indexes']]}: "
                f"{a['removed']:,} documents removed "
                f"({a['exact_matches']:,} exact, {a['near_matches']:,} near; {a['candidates']:,} candidate pairs, "
                f"{a['rejected_by_estimate']:,} rejected on the estimate); per source {a['per_source']}.", ""]
        out += [f"- `{x['removed']}` ~ earlier `{x['kept']}`: J = {x['jaccard']}" for x in a["examples"]]
    if g.get("index"):
        out += ["", f"Index saved: `{g['index']['path']}` ({g['index']['docs']:,} documents, "
                f"{g['index']['bytes']:,} bytes); "
                "a later run dedups against it with `dedup.against: [<this run dir>]`."]
    return out


def _md_perf(rep: dict[str, Any], g: dict[str, Any]) -> list[str]:
    """Throughput and peak RSS per step."""
    out: list[str] = []
    near_s = (rep.get("phases_s") or {}).get(NEAR_PHASE)
    near_rss = g.get("near_step_peak_rss_mb")
    out += ["", "## Throughput and peak RSS per step (ratios to the MinHash step, same process)", "",
            f"MinHash step (signatures + LSH + verification): {near_s} s, peak RSS {near_rss} MB.", "",
            "| step | docs | MB | wall s | MB/s | wall / MinHash | peak RSS MB | RSS / MinHash |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k, v in g["perf"].items():
        ratio = f"{v['wall_s'] / near_s:.3f}" if near_s else "-"
        rr = f"{v['peak_rss_mb'] / near_rss:.2f}" if near_rss else "-"
        out.append(f"| {k} | {v['docs']:,} | {v['chars'] / 1e6:.2f} | {v['wall_s']} | {v.get('mb_per_s') or '-'} | "
                   f"{ratio} | "
                   f"{v['peak_rss_mb']} | {rr} |")
    return out
