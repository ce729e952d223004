"""Stage 2's finer-granularity steps, each timed alone on a stage-1 artifact's texts, as ratios to
MinHash signatures (char 5-grams, 128 permutations, mix64, one process) of the same documents,
measured in the same process: url, line counting + strip, paragraph dedup (Bloom filter), and
exact-substring dedup with both suffix-array engines.

    .venv/bin/python bench/bench_granular.py --data data/wt19/mixed_raw

(the shared venv may lack pydivsufsort: then only the numpy engine is timed; PYTHONPATH can point
at a ``pip install --target`` of the pinned wheel).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek.arrow_io import read_columns  # noqa: E402
from minideepseek.crossdedup.granular_config import UrlDedupConfig  # noqa: E402
from minideepseek.crossdedup.lines import LineCounter  # noqa: E402
from minideepseek.crossdedup.spans import ParagraphDedup  # noqa: E402
from minideepseek.crossdedup.substrings import find_repeats, have_pydivsufsort  # noqa: E402
from minideepseek.crossdedup.urls import url_duplicates  # noqa: E402
from minideepseek.dedup import signatures_for_texts  # noqa: E402


def timed(fn):  # noqa: ANN001, ANN201
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a mixed_raw directory")
    ap.add_argument("--substring-sources", default="the_stack_v2,open_web_math")
    args = ap.parse_args()
    m = read_columns(Path(args.data), ["id", "source", "url", "text"])
    ids, srcs, urls, texts = m["id"], m["source"], m["url"], m["text"]
    mb = sum(len(t) for t in texts) / 1e6
    out: dict = {"docs": len(texts), "mb": round(mb, 2)}

    def minhash(ts: list[str]) -> None:
        for s0 in range(0, len(ts), 256):
            signatures_for_texts(ts[s0:s0 + 256], "char", 5, 128, 1, "mix64")

    base, _ = timed(lambda: minhash(texts))
    out["minhash_s"] = round(base, 3)
    out["minhash_mb_per_s"] = round(mb / base, 2)
    s, _ = timed(lambda: url_duplicates(urls, [True] * len(urls), lambda i: i, UrlDedupConfig()))
    out["url"] = {"s": round(s, 3), "ratio": round(s / base, 4)}

    def lines() -> None:
        c = LineCounter(len(texts), 500, 6, 1, 1234, True)
        for d, t in zip(ids, texts):
            c.add(d, t)
        c.finish()
        for d, t in zip(ids, texts):
            c.strip(d, t)

    s, _ = timed(lines)
    out["lines"] = {"s": round(s, 3), "ratio": round(s / base, 3)}

    def paragraphs() -> None:
        p0 = ParagraphDedup(0, 40, 1e-9, False)
        n = sum(p0.eligible(t) for t in texts)
        p = ParagraphDedup(n, 40, 1e-9, False)
        for t in texts:
            p.strip(t)

    s, _ = timed(paragraphs)
    out["paragraphs"] = {"s": round(s, 3), "ratio": round(s / base, 3)}
    want = set(args.substring_sources.split(","))
    sub = [(i, t) for i, (t, src) in enumerate(zip(texts, srcs)) if src in want]
    sub_mb = sum(len(t) for _, t in sub) / 1e6
    b_sub, _ = timed(lambda: minhash([t for _, t in sub]))
    out["substrings_docs"], out["substrings_mb"], out["minhash_same_docs_s"] = len(sub), round(sub_mb, 2), round(b_sub, 3)
    for eng in ["numpy", *(["pydivsufsort"] if have_pydivsufsort() else [])]:
        s, res = timed(lambda eng=eng: find_repeats(sub, 50, eng, cross_doc_only=True))
        out[f"substrings_{eng}"] = {"s": round(s, 3), "ratio_to_minhash_same_docs": round(s / b_sub, 3),
                                    "tokens": res.tokens_in, "spans": res.spans, "tokens_removed": res.tokens_removed}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
