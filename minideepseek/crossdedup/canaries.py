"""Canaries: seeded variants of the run's own documents and of the shipped benchmarks, each made so that
one stage-2 step must catch it (or, for the controls, must not). Nothing here is generated prose: a
canary is a real document edited (words dropped or swapped for words of the same document, whitespace
and case changed), a real line or paragraph or code span quoted inside another real document, a real
URL re-written, or a real benchmark item embedded with a perturbation.

The functions are pure (text + a seeded generator in, text out); :mod:`.certificate` picks the
documents, calls them, and probes each canary against the step's index. Canaries are never written to
any artifact.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dedup import exact_jaccard
from .decontam import _WORD

_TOKEN = re.compile(r"\S+")


@dataclass
class Canary:
    """One planted probe: which step must catch it (``expect``) or must leave it alone (a control)."""

    id: str
    step: str  # exact, url, near, lines, paragraphs, substrings, decontamination
    kind: str  # how it was made: copy, ws_case, jaccard bin, markdown, ...
    origin: str  # the run document (or benchmark item) it was derived from
    expect: bool  # True: the step must catch it; False: a control the step must not remove
    jaccard: float | None = None  # near: exact Jaccard to its origin, on the stage's shingles
    caught: bool | None = None

    def row(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def ws_case_variant(text: str, rng: np.random.Generator, newlines: bool = True) -> str:
    """The same words, other whitespace and casing: runs of spaces, tabs (and newlines) re-drawn, every word
    re-cased (upper, lower or title) -- what exact dedup's NFKC + casefold + whitespace collapse folds."""
    out = []
    gaps = ("  ", "\t", "\n", " \n ") if newlines else ("  ", "\t", " ", " \t")
    for m in _TOKEN.finditer(text):
        w = m.group(0)
        out.append((str.upper, str.lower, str.title)[int(rng.integers(3))](w))
        out.append(gaps[int(rng.integers(4))])
    return "".join(out).rstrip()


def near_variant(text: str, target: float, shingles: Callable[[str], np.ndarray], rng: np.random.Generator,
                 steps: int = 9) -> tuple[str, float]:
    """A variant of ``text`` whose exact Jaccard to it (on ``shingles``, the stage's own) is as close to
    ``target`` as the edits allow: the first k positions of a seeded order of words are dropped (even
    ranks) or replaced by another word of the same text (odd ranks); k by bisection (J falls with k)."""
    spans = [m.span() for m in _TOKEN.finditer(text)]
    base = shingles(text)
    order = rng.permutation(len(spans))
    donors = rng.integers(0, max(1, len(spans)), size=len(spans))

    def edit(k: int) -> str:
        chosen = {int(p): r for r, p in enumerate(order[:k])}
        out, last = [], 0
        for i, (a, b) in enumerate(spans):
            out.append(text[last:a])
            r = chosen.get(i)
            if r is None:
                out.append(text[a:b])
            elif r % 2:
                da, db = spans[int(donors[i])]
                out.append(text[da:db])
            last = b
        out.append(text[last:])
        return "".join(out)

    lo, hi = 0, len(spans)
    best = (text, 1.0)
    for _ in range(steps):
        if lo > hi:
            break
        k = (lo + hi) // 2
        var = edit(k)
        j = float(exact_jaccard(shingles(var), base))
        if abs(j - target) < abs(best[1] - target):
            best = (var, j)
        if j >= target:
            lo = k + 1
        else:
            hi = k - 1
    return best


def url_variants(url: str) -> list[tuple[str, str]]:
    """(kind, URL) spellings of the same page that URL normalization must fold into ``url``."""
    m = re.match(r"^(https?)://([^/?#]+)(.*)$", url)
    if not m:
        return []
    scheme, host, rest = m.groups()
    path, sep, frag = rest.partition("#")
    path, qsep, query = path.partition("?")
    tail = (f"#{frag}" if sep else "")
    q = f"?{query}&utm_source=canary" if qsep else "?utm_source=canary&utm_medium=probe"
    www = host if host.lower().startswith("www.") else f"www.{host}"
    slash = path + "/" if path and not path.endswith("/") and not query else None
    out = [("tracking_query", f"{scheme}://{host}{path}{q}{tail}"),
           ("host_case_www", f"{scheme.upper()}://{www.upper()}{path}{qsep}{query}{tail}")]
    if slash is not None:
        out.append(("trailing_slash", f"{scheme}://{host}{slash}{tail}"))
    return out


def line_variant(line: str, rng: np.random.Generator) -> str:
    """A boilerplate line as templates repeat it: casing, spacing and digits vary (the line step folds all three)."""
    words = [(str.upper, str.lower, str.title)[int(rng.integers(3))](w) for w in line.split()]
    out = (" " * int(rng.integers(1, 3))).join(words)
    return re.sub(r"\d", lambda _: str(int(rng.integers(10))), out)


def insert_at_line(host: str, piece: str, rng: np.random.Generator) -> tuple[str, int]:
    """``piece`` as whole lines of ``host``, at a seeded line boundary; returns (text, offset of the piece)."""
    lines = host.split("\n")
    k = int(rng.integers(0, len(lines) + 1))
    head = "\n".join(lines[:k])
    pos = len(head) + 1 if k else 0
    return "\n".join([*lines[:k], piece, *lines[k:]]), pos


# benchmark perturbations: the forms a benchmark item takes when a web page or a repository quotes it
PERTURBATIONS = ("verbatim", "rewrapped", "whitespace_case", "markdown", "latex", "excerpt", "sparse_edits")
EXCERPT_WORDS = 25  # a quote of 25 words (decontamination's words): within 13-gram reach, out of a 50-gram one's
EDIT_EVERY = 20  # sparse_edits: one word in 20 changed (a variable renamed, a typo fixed): 7 intact 13-grams between


def perturb_item(item: str, kind: str, rng: np.random.Generator) -> str:
    """A benchmark item as it might appear in crawled text."""
    if kind == "verbatim":
        return item
    if kind == "rewrapped":
        return textwrap.fill(" ".join(item.split()), width=int(rng.integers(40, 90)))
    if kind == "whitespace_case":
        return ws_case_variant(item, rng)
    if kind == "markdown":
        return f"Here is the solution:\n\n```python\n{item}\n```\n"
    if kind == "latex":
        return f"\\begin{{verbatim}}\n{item}\n\\end{{verbatim}}"
    spans = [m.span() for m in _WORD.finditer(item)]  # decontamination's words, located in the raw text
    if kind == "excerpt":
        k = int(rng.integers(0, max(1, len(spans) - EXCERPT_WORDS)))
        last = spans[min(len(spans), k + EXCERPT_WORDS) - 1]
        return item[spans[k][0]:last[1]] if spans else item
    if kind == "sparse_edits":
        off = int(rng.integers(EDIT_EVERY))
        out, prev = [], 0
        for i, (_, b) in enumerate(spans):
            if (i + off) % EDIT_EVERY == 0:
                out += [item[prev:b], "x"]  # one word changed, not one added: the n-grams around it break
                prev = b
        return "".join(out) + item[prev:]
    raise ValueError(f"unknown perturbation {kind!r}")
