"""Benchmark the two HTML extractors of ``minideepseek.extract`` on real pages.

Run (HTML from Debian doc packages, see shared/DEMO_CORPUS.md)::

    mkdir -p /tmp/x && cd /tmp/x && apt-get download python3.11-doc python-scipy-doc \
        python-sympy-doc libreoffice-help-zh-cn && for f in *.deb; do dpkg-deb -x $f ${f%%_*}; done
    python bench/bench_html_extract.py /tmp/x/python3.11-doc /tmp/x/python-scipy-doc \
        /tmp/x/python-sympy-doc /tmp/x/libreoffice-help-zh-cn --limit 400 [--raw] [--json out.json]

Both extractors run on the same pages in one process, end to end through
``extract_text(raw, "html", ExtractConfig(html_extractor=...))`` (math pre-processing and
cleanup included: that is what stage 1 pays). ``--raw`` also runs the bare extractors
without the math pre-processing, to show what it buys. Per directory and overall it prints
pages/s, MB/s (input HTML), the resiliparse/trafilatura speed ratio, output chars, empty
outputs, math survival (LaTeX delimiters in the output vs math expressions in the input),
``<pre>`` line survival, and the share of pages whose output still holds nav boilerplate.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from resiliparse.parse.html import HTMLTree  # noqa: E402

from minideepseek.extract import HTML_EXTRACTORS, ExtractConfig, extract_text  # noqa: E402

# A line equal to one of these is site chrome, not content (Sphinx themes, LibreOffice help).
# Not "Contents": sympy has real sections of that name.
BOILER_LINES = {
    "Navigation", "Previous topic", "Next topic", "This Page", "Show Source", "Quick search",
    "Table of Contents", "index", "modules", "next", "previous", "Report a Bug", "Theme",
    "Back to top", "On this page", "Edit this page", "Toggle navigation", "Hide Search Matches",
    "Previous", "Next", "目录", "索引", "模块", "Go", "Search",
}
# Substrings that only chrome contains.
BOILER_SUBSTR = (
    "modules |", "index |", "next |", "previous |", "© Copyright", "Created using Sphinx",
    "Last updated on", "Python Software Foundation is a non-profit", "Found a bug?",
    "Help content debug info", "This page is:", "Made with Sphinx", "LibreOffice 7.4 帮助",
    "Please donate", "Copyright ©",
)
_DELIM_RE = re.compile(r"\\\(|\\\[")


@dataclass
class Page:
    group: str
    path: Path
    raw: str
    math_in: int  # math expressions in the input
    math_class: int  # elements with class "math" in the input
    pre_lines: list[str]  # sample of non-trivial <pre> lines in the input


@dataclass
class Stats:
    seconds: float = 0.0
    pages: int = 0
    bytes_in: int = 0
    chars_out: int = 0
    empty: int = 0
    math_in: int = 0
    math_out: int = 0  # per page min(out, in): duplicates do not make up for losses
    math_class: int = 0
    pre_in: int = 0
    pre_out: int = 0
    boiler_pages: int = 0
    boiler_hits: Counter[str] = field(default_factory=Counter)


def load_pages(dirs: list[Path], limit: int, seed: int, grep: str | None) -> list[Page]:
    pages: list[Page] = []
    for d in dirs:
        files = sorted(d.rglob("*.html"))
        raws = [(f, f.read_text("utf-8", errors="replace")) for f in files]
        if grep:
            raws = [(f, r) for f, r in raws if grep in r]
        if limit and len(raws) > limit:
            raws = sorted(random.Random(f"{seed}:{d.name}").sample(raws, limit), key=lambda x: x[0])
        for f, raw in raws:
            pages.append(Page(d.name, f, raw, *input_signals(raw)))
    return pages


def input_signals(raw: str) -> tuple[int, int, list[str]]:
    """Math expressions, class="math" elements and <pre> lines of one page."""
    tree = HTMLTree.parse(raw)
    doc = tree.document
    math_class = len(doc.query_selector_all(".math"))
    scripts = doc.query_selector_all('script[type^="math/tex"]')
    n_scripts = len(scripts)
    imgs = len(doc.query_selector_all("img.math, .math img"))
    for node in list(doc.query_selector_all("script, style")):
        node.decompose()
    body_text = tree.body.text if tree.body is not None else ""
    math_in = len(_DELIM_RE.findall(body_text)) + imgs + n_scripts
    pre: list[str] = []
    for node in doc.query_selector_all("pre"):
        pre += [s.strip() for s in node.text.split("\n") if len(s.strip()) >= 8]
    return math_in, math_class, pre[:40]


def boilerplate(text: str) -> list[str]:
    hits = [s for s in BOILER_SUBSTR if s in text]
    hits += sorted({ln.strip() for ln in text.split("\n")} & BOILER_LINES)
    return hits


def run(fns: dict[str, Callable[[str], str]], pages: list[Page]) -> dict[str, dict[str, Stats]]:
    """Time every extractor on every page, interleaved per page (rotating the order), so
    cache warmth and CPU frequency drift favour none of them."""
    names = list(fns)
    for fn in fns.values():
        fn(pages[0].raw)  # warm-up: imports, lazy init
    gc.collect()
    runs: dict[str, dict[str, Stats]] = {n: {} for n in names}
    for i, p in enumerate(pages):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            t = time.perf_counter()
            out = fns[name](p.raw)
            sec = time.perf_counter() - t
            record(runs[name], p, out, sec)
    for name in names:
        s = runs[name]["ALL"]
        print(f"  {name}: {s.pages:,} pages in {s.seconds:.2f} s", file=sys.stderr)
    return runs


def record(stats: dict[str, Stats], p: Page, out: str, sec: float) -> None:
    for key in (p.group, "ALL"):
        s = stats.setdefault(key, Stats())
        s.seconds += sec
        s.pages += 1
        s.bytes_in += len(p.raw.encode())
        s.chars_out += len(out)
        s.empty += not out.strip()
        s.math_in += p.math_in
        s.math_out += min(p.math_in, len(_DELIM_RE.findall(out)))
        s.math_class += p.math_class
        lines = {ln.strip() for ln in out.split("\n")}
        s.pre_in += len(p.pre_lines)
        s.pre_out += sum(ln in lines for ln in p.pre_lines)
        hits = boilerplate(out)
        s.boiler_pages += bool(hits)
        s.boiler_hits.update(hits)


def bare(name: str) -> Callable[[str], str]:
    """The extractor with its own defaults and no math pre-processing (``--raw``)."""
    if name == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text

        return lambda raw: extract_plain_text(raw, main_content=True, preserve_formatting=True)
    import trafilatura

    return lambda raw: trafilatura.extract(raw, include_comments=False) or ""


def row(label: str, s: Stats, speed_ratio: str) -> str:
    pct = lambda a, b: f"{100 * a / b:5.1f}%" if b else "    -"  # noqa: E731
    top = ", ".join(f"{k!r}:{v}" for k, v in s.boiler_hits.most_common(3))
    return (
        f"| {label} | {s.pages:,} | {s.pages / s.seconds:,.1f} | {s.bytes_in / 1e6 / s.seconds:,.2f} | {speed_ratio} "
        f"| {s.chars_out:,} | {s.empty} | {s.math_class:,} | {s.math_out:,}/{s.math_in:,} {pct(s.math_out, s.math_in)} "
        f"| {pct(s.pre_out, s.pre_in)} | {pct(s.boiler_pages, s.pages)} | {top} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="directories searched recursively for *.html")
    ap.add_argument("--limit", type=int, default=400, help="pages sampled per directory (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grep", default=None, help="keep only pages whose HTML contains this string")
    ap.add_argument("--raw", action="store_true", help="also run the bare extractors (no math pre-processing)")
    ap.add_argument("--json", type=Path, default=None, help="write the numbers here too")
    args = ap.parse_args(argv)
    for d in args.dirs:
        if not d.is_dir():
            ap.error(f"{d} is not a directory; unpack the .deb first (see --help)")
    pages = load_pages(args.dirs, args.limit, args.seed, args.grep)
    if not pages:
        ap.error("no .html pages found")
    mb = sum(len(p.raw.encode()) for p in pages) / 1e6
    print(f"{len(pages):,} pages, {mb:.1f} MB of HTML", file=sys.stderr)
    fns: dict[str, Callable[[str], str]] = {}
    for name in HTML_EXTRACTORS:
        cfg = ExtractConfig(html_extractor=name)
        fns[name] = lambda raw, cfg=cfg: extract_text(raw, "html", cfg)
        if args.raw:
            fns[f"{name} (bare)"] = bare(name)
    runs = run(fns, pages)
    groups = ["ALL"] + sorted({p.group for p in pages})
    print("| extractor | pages | pages/s | MB/s | res/tra speed | out chars | empty | class=math "
          "| math kept | pre lines kept | boilerplate pages | top boilerplate |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for g in groups:
        for name, stats in runs.items():
            s = stats[g]
            base = "trafilatura (bare)" if "bare" in name else "trafilatura"
            other = runs[base][g]
            ratio = f"{(s.pages / s.seconds) / (other.pages / other.seconds):.1f}x"
            print(row(f"{g} / {name}", s, ratio))
    if args.json:
        out = {n: {g: {k: (dict(v) if isinstance(v, Counter) else v) for k, v in vars(s).items()}
                   for g, s in st.items()} for n, st in runs.items()}
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
