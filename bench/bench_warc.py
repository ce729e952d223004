"""WARC -> main text -> the FineWeb-style filter chain, per core: ours (FastWARC + resiliparse, stage 1's own
code) against datatrove (its ``WarcReader`` on warcio + its ``Trafilatura`` extractor + the same filters)
on the same WARC files, in one run.

Run (datatrove is not a project dependency: it lives in its own venv)::

    python3 -m venv /tmp/dtvenv && /tmp/dtvenv/bin/pip install "datatrove[processing]" warcio \\
        faust-cchardet python-magic lxml_html_clean spacy
    .venv/bin/python bench/bench_warc.py --dt-python /tmp/dtvenv/bin/python \\
        --json reports/examples/bench_warc.json

Input: the demo corpus's Common Crawl-format copy (``minideepseek/demo_corpus/warc.py``: real HTML pages of
Python, git, Debian, scipy and sympy docs as request/response/metadata triplets), English part, built into
``bench/out/warc`` with ``--pages`` pages per component and no brotli bodies (warcio cannot decode them
with brotli 1.2 installed, and without brotli it drops them: both readers must see the same pages), or
any folder of ``.warc.gz`` files (``--warc``).

Per side, one process, the same filters in the same order (gopher_repetition, gopher_quality, c4 without
the terminal-punctuation line rule, fineweb; no language ID or URL list: datatrove's fastText model is a
download): records/s and MB/s of WARC input per CPU-second (user+sys of the process and its children:
datatrove extracts in a sandbox child process), best of ``--repeat`` interleaved runs. Also: how close
the two extracted texts are on the pages both extracted (word-multiset F1), and how much LaTeX each keeps
on the pages whose HTML carries math (MathJax ``\\(..\\)``/``\\[..\\]``, ``<img class="math" alt=..>``).
Without ``--dt-python`` (or when it cannot import datatrove) only ours runs, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LATEX = re.compile(r"\\[A-Za-z]{2,}|\\[()\[\]]|\$\$")
MATH_HTML = re.compile(r"\\\(|\\\[|class=\"math|<math[ >]|MathJax", re.I)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# ---- datatrove side (runs in the datatrove venv: stdlib + datatrove only) ------------------------------


def datatrove_worker(warc_dir: str, repeat: int, capture: bool) -> dict:
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import WarcReader

    runs = []
    texts: dict[str, str] = {}
    for r in range(repeat + int(capture)):
        tap = capture and r == repeat  # the last pass records the extracted texts (not timed)
        steps = [WarcReader(warc_dir, glob_pattern="*.warc.gz"), Trafilatura(favour_precision=True, timeout=1)]
        filters = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(filter_no_terminal_punct=False),
                   FineWebQualityFilter()]
        t0, c0 = time.perf_counter(), _cpu()
        data = None
        for s in steps:
            data = s(data, rank=0, world_size=1)
        if tap:
            data = _tap(data, texts)
        for s in filters:
            data = s(data, rank=0, world_size=1)
        kept = sum(1 for _ in data)
        multiprocessing.active_children()  # reap the extractor's sandbox processes: their CPU counts only then
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        st = steps[0].stats.to_dict()["stats"]
        ex = steps[1].stats.to_dict()["stats"]
        if not tap:
            runs.append({"wall_s": wall, "cpu_s": cpu, "records": st["documents"]["total"], "kept": kept,
                         "extract_timeouts": ex.get("timeout", 0), "extracted": ex.get("extracted", 0)})
    from importlib.metadata import version

    return {"runs": runs, "texts": texts, "versions": {n: version(n) for n in ("datatrove", "trafilatura", "warcio")}}


def _tap(data, texts: dict[str, str]):
    for doc in data:
        texts[doc.metadata.get("url", "")] = doc.text
        yield doc


# ---- our side ----------------------------------------------------------------------------------------


FILTERS = ({"type": "gopher_repetition"}, {"type": "gopher_quality"}, {"type": "c4", "filter_no_terminal_punct": False},
           {"type": "fineweb"})


def ours(warc_dir: Path, repeat: int) -> tuple[list[dict], dict[str, str], dict[str, str]]:
    """Stage 1's own path in one process: WarcSource ingestion (FastWARC, decoding, the spool) then
    ``process_one`` (resiliparse extraction with math kept, then the filters) on every record."""
    from minideepseek.extract import ExtractConfig, extract_text
    from minideepseek.records import Reject
    from minideepseek.sampling.process import ProcessSettings, process_one
    from minideepseek.sources import SourceConfig
    from minideepseek.sources.warc import WarcSource

    cfg = SourceConfig(name="cc", type="warc", weight=1.0, path=str(warc_dir), format="warc", filters=FILTERS)
    settings = ProcessSettings(source="cc", min_chars=20, max_chars=2_000_000, extract=ExtractConfig(), filters=FILTERS)
    process_one(next(iter(WarcSource(cfg, 0).load())), settings)  # warm: filter chain and models loaded once
    runs = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), _cpu()
        src = WarcSource(cfg, 0)
        recs = src.load()
        t1 = time.perf_counter()
        html_bytes = 0
        kept = 0
        for raw in recs:
            html_bytes += len(raw.text.encode("utf-8"))
            kept += not isinstance(process_one(raw, settings), Reject)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        runs.append({"wall_s": wall, "cpu_s": cpu, "read_s": t1 - t0, "records": len(recs), "kept": kept,
                     "html_mb": html_bytes / 1e6})
        src.close()
    src = WarcSource(cfg, 0)
    raws = {r.url: r.text for r in src.load()}
    texts = {url: extract_text(html, "html", ExtractConfig()) for url, html in raws.items()}
    src.close()
    return runs, texts, raws


# ---- comparison --------------------------------------------------------------------------------------


def word_f1(a: str, b: str) -> float:
    ca, cb = Counter(a.split()), Counter(b.split())
    common = sum((ca & cb).values())
    if not ca or not cb:
        return float(ca == cb)
    p, r = common / sum(cb.values()), common / sum(ca.values())
    return 0.0 if common == 0 else 2 * p * r / (p + r)


def latex_kept(texts: dict[str, str | None], urls: list[str]) -> dict:
    hits = [len(LATEX.findall(texts.get(u) or "")) for u in urls]
    return {"pages": len(urls), "pages_with_latex": sum(h > 0 for h in hits), "latex_tokens": sum(hits)}


def build_input(out: Path, pages: int) -> Path:
    from minideepseek.demo_corpus import build_demo_corpus
    from minideepseek.demo_corpus.warc import build_demo_warc

    counts = build_demo_warc(build_demo_corpus(), out, per_component=pages, wet_per_component=0, br=False)
    print(f"input: demo WARC copy in {out} ({counts})", file=sys.stderr)
    return out / "en"


def _side(runs: list[dict], warc_mb: float) -> dict:
    best = min(runs, key=lambda r: r["cpu_s"])
    return {"records": best["records"], "kept": best["kept"], "wall_s": round(best["wall_s"], 3),
            "cpu_s": round(best["cpu_s"], 3), "records_per_cpu_s": round(best["records"] / best["cpu_s"], 2),
            "warc_mb_per_cpu_s": round(warc_mb / best["cpu_s"], 3),
            "cpu_s_all_runs": [round(r["cpu_s"], 3) for r in runs],
            **({k: best[k] for k in ("read_s", "html_mb") if k in best}),
            **({k: best[k] for k in ("extract_timeouts", "extracted") if k in best})}


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warc", type=Path, help="a folder of .warc.gz files (default: build the demo copy)")
    ap.add_argument("--pages", type=int, default=40, help="demo copy: pages per component (5 English components)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side, interleaved; the best counts")
    ap.add_argument("--dt-python", default="", help="python of a venv with datatrove installed")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:  # inside the datatrove venv
        print(json.dumps(datatrove_worker(args.worker, args.repeat, capture=True)))
        return 0

    sys.path.insert(0, str(ROOT))
    warc_dir = args.warc or build_input(ROOT / "bench" / "out" / "warc", args.pages)
    files = sorted(warc_dir.glob("*.warc.gz"))
    warc_mb = sum(f.stat().st_size for f in files) / 1e6
    our_runs: list[dict] = []
    dt: dict | None = None
    dt_why = "no --dt-python given"
    if args.dt_python:
        probe = subprocess.run([args.dt_python, "-c", "import datatrove, warcio, trafilatura"], capture_output=True,
                               text=True)
        dt_why = "" if probe.returncode == 0 else f"{args.dt_python} cannot import datatrove: {probe.stderr[-300:]}"
    # interleaved: ours, datatrove, ours, ... so machine load hits both alike
    runs, texts, raws = ours(warc_dir, 1)
    our_runs += runs
    if not dt_why:
        proc = subprocess.run([args.dt_python, __file__, "--worker", str(warc_dir), "--repeat", str(args.repeat)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            dt_why = f"datatrove run failed: {proc.stderr[-500:]}"
        else:
            dt = json.loads(proc.stdout.strip().splitlines()[-1])
    runs, _, _ = ours(warc_dir, max(0, args.repeat - 1))
    our_runs += runs

    result: dict = {
        "command": "bench/bench_warc.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "git_commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "input": {"dir": str(warc_dir.relative_to(ROOT)) if warc_dir.is_relative_to(ROOT) else str(warc_dir),
                  "files": len(files), "warc_mb": round(warc_mb, 3)},
        "filters": list(FILTERS),
        "ours": {"reader": "FastWARC (minideepseek.sources.warc)", "extractor": "resiliparse (math kept)",
                 "versions": {n: _version(n) for n in ("fastwarc", "resiliparse")},
                 **_side(our_runs, warc_mb)},
    }
    if dt is None:
        result["datatrove"] = {"available": False, "why": dt_why}
        print(f"datatrove comparison not run: {dt_why}. Install it in a separate venv (see the module docstring) "
              "and pass --dt-python.", file=sys.stderr)
    else:
        side = _side(dt["runs"], warc_mb)
        result["datatrove"] = {"available": True, "reader": "WarcReader (warcio)", "extractor": "Trafilatura "
                               "(favour_precision, 1 s timeout, sandbox process)", "versions": dt["versions"], **side}
        result["ratio_records_per_cpu_s"] = round(result["ours"]["records_per_cpu_s"] / side["records_per_cpu_s"], 2)
        both = sorted(u for u in texts if dt["texts"].get(u) and texts[u])
        f1 = [word_f1(texts[u], dt["texts"][u]) for u in both]
        result["agreement"] = {"pages_both_extracted": len(both), "word_f1_mean": round(statistics.mean(f1), 3),
                               "word_f1_median": round(statistics.median(f1), 3),
                               "chars_ours": sum(len(texts[u]) for u in both),
                               "chars_datatrove": sum(len(dt["texts"][u]) for u in both)}
        math_urls = sorted(u for u, h in raws.items() if MATH_HTML.search(h))
        result["latex"] = {"ours": latex_kept(texts, math_urls), "datatrove": latex_kept(dt["texts"], math_urls)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
