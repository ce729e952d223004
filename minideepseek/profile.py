"""``data_profile.{json,md}``: what the deduplicated documents look like, per source — the length
distribution, language shares, and the share of code and of math (the seed's dashboard table P11-11:
文本长度分布, 语言比例, 代码比例, 数学样本比例). Stage 2 writes it for its output; a withdrawal
recomputes it; ``report.py`` compares it across runs.

Code and math are detected per document, independent of the source label, so a run can see code
leaking into a prose source or math vanishing from the math source:
- code: at least 3 non-empty lines and >= 25% of the first 400 look like code (keywords that open a
  definition or import, a block opener ending in ``:``, an assignment, braces or a semicolon ending the
  line, a comment marker opening it);
- math: >= 3 LaTeX markers (``$...$``, ``\\frac``, ``\\begin{equation}``, ``\\sum``, ...).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .arrow_io import iter_dataset_rows

LENGTH_BINS = (0, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000)
_CODE_LINE = re.compile(
    r"^\s*(def |class |import |from \S+ import |#include|#define|public |private |static |func |fn |let |const "
    r"|var |return\b|package |using |//|/\*|\* |# |@\w+)|[{};]\s*$"
    r"|^\s*(?:if|elif|else|for|while|try|except|finally|with)\b.*:\s*$|^\s*[\w.\[\]]+\s*[-+*/]?=\s*\S")
_MATH = re.compile(r"\$\$|\\\(|\\\[|\\begin\{(?:equation|align|eqnarray|gather|math)|\\(?:frac|sum|int|prod|sqrt|"
                   r"alpha|beta|gamma|lambda|sigma|mathbb|mathcal|partial|infty|leq|geq|cdot)\b|\$[^$\n]{1,80}\$")


def looks_like_code(text: str) -> bool:
    lines = [ln for ln in text.splitlines()[:400] if ln.strip()]
    if len(lines) < 3:
        return False
    return sum(1 for ln in lines if _CODE_LINE.search(ln)) / len(lines) >= 0.25


def has_math(text: str) -> bool:
    n = 0
    for _ in _MATH.finditer(text):
        n += 1
        if n >= 3:
            return True
    return False


def _length_stats(lengths: list[int]) -> dict[str, Any]:
    if not lengths:
        return {"docs": 0}
    a = np.array(lengths, dtype=np.int64)
    edges = list(LENGTH_BINS) + [None]
    hist = {}
    for lo, hi in zip(edges[:-1], edges[1:]):
        label = f"{lo:,}-{hi:,}" if hi is not None else f">={lo:,}"
        hist[label] = int(((a >= lo) & (a < hi)).sum() if hi is not None else (a >= lo).sum())
    q = np.percentile(a, [10, 50, 90]).tolist()
    return {"docs": len(a), "mean": round(float(a.mean()), 1), "p10": round(q[0], 1), "p50": round(q[1], 1),
            "p90": round(q[2], 1), "max": int(a.max()), "histogram_chars": hist}


def profile_dataset(ds_dir: Path) -> dict[str, Any]:
    """Per source and overall: docs, chars, DeepSeek tokens, length distribution (chars), language
    shares (by docs and chars), code and math shares (by docs and chars)."""
    groups: dict[str, dict[str, Any]] = {}

    def group(name: str) -> dict[str, Any]:
        return groups.setdefault(name, {"lengths": [], "tokens": 0, "lang_docs": Counter(), "lang_chars": Counter(),
                                        "code": Counter(), "math": Counter()})

    for row in iter_dataset_rows(ds_dir, columns=["source", "text", "lang", "n_chars", "n_tokens"]):
        code, math = looks_like_code(row["text"]), has_math(row["text"])
        for g in (group(row["source"]), group("__all__")):
            g["lengths"].append(row["n_chars"])
            g["tokens"] += row["n_tokens"]
            g["lang_docs"][row["lang"] or "und"] += 1
            g["lang_chars"][row["lang"] or "und"] += row["n_chars"]
            if code:
                g["code"].update({"docs": 1, "chars": row["n_chars"]})
            if math:
                g["math"].update({"docs": 1, "chars": row["n_chars"]})
    out: dict[str, Any] = {"method": __doc__.split("\n\n")[1].strip() if __doc__ else "", "sources": {}}
    for name, g in groups.items():
        docs, chars = len(g["lengths"]), sum(g["lengths"])
        entry = {
            "docs": docs, "chars": chars, "tokens": g["tokens"],
            "length": _length_stats(g["lengths"]),
            "lang_share_docs": {k: round(v / docs, 4) for k, v in g["lang_docs"].most_common()},
            "lang_share_chars": {k: round(v / chars, 4) for k, v in g["lang_chars"].most_common()} if chars else {},
            "code_share_docs": round(g["code"]["docs"] / docs, 4), "code_share_chars": round(g["code"]["chars"] / chars, 4)
            if chars else 0.0,
            "math_share_docs": round(g["math"]["docs"] / docs, 4), "math_share_chars": round(g["math"]["chars"] / chars, 4)
            if chars else 0.0,
        }
        if name == "__all__":
            out["overall"] = entry
        else:
            out["sources"][name] = entry
    out.setdefault("overall", {"docs": 0})
    return out


def profile_markdown(p: dict[str, Any]) -> str:
    lines = ["# Data profile (after dedup)", "", p.get("method", ""), "",
             "| source | docs | chars | tokens | chars p10 / p50 / p90 | max | top languages (docs) | code docs | "
             "math docs |", "|---|---:|---:|---:|---|---:|---|---:|---:|"]
    rows = list(p["sources"].items()) + ([("**all**", p["overall"])] if p["overall"].get("docs") else [])
    for name, s in rows:
        ln = s["length"]
        langs = ", ".join(f"{k} {100 * v:.1f}%" for k, v in list(s["lang_share_docs"].items())[:3])
        lines.append(f"| {name} | {s['docs']:,} | {s['chars']:,} | {s['tokens']:,} | {ln['p10']:,.0f} / "
                     f"{ln['p50']:,.0f} / {ln['p90']:,.0f} | {ln['max']:,} | {langs} | "
                     f"{100 * s['code_share_docs']:.1f}% | {100 * s['math_share_docs']:.1f}% |")
    bins = list(p["overall"]["length"]["histogram_chars"]) if p["overall"].get("docs") else []
    if bins:
        lines += ["", "## Length distribution (documents per character-count bin)", "",
                  "| source | " + " | ".join(bins) + " |", "|---|" + "---:|" * len(bins)]
        for name, s in rows:
            h = s["length"]["histogram_chars"]
            lines.append(f"| {name} | " + " | ".join(f"{h[b]:,}" for b in bins) + " |")
    return "\n".join(lines) + "\n"
