"""Filter-chain throughput on the real demo corpus, per filter and per source chain, one core.

    .venv/bin/python bench/bench_filters.py [--config configs/demo.yaml] [--docs 300]

For each source of the config, extracts up to --docs documents of its demo domain once (not timed),
then times every filter of the source's chain on the same texts in this process, and the whole
chain. Prints docs/s and MB/s per core, and names the slowest rule. Language ID is broken out
because it is the one model-based step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.extract import extract_text  # noqa: E402
from minideepseek.filters import DocContext, FilterChain  # noqa: E402
from minideepseek.runconfig import load_stage_config  # noqa: E402
from minideepseek.sampling.config import MixSamplerConfig  # noqa: E402
from minideepseek.sources import make_source  # noqa: E402


def _texts(src, n: int, cfg) -> list[tuple[str, str]]:
    out = []
    for raw in src.iter_raw(1):
        if raw.text is None:
            continue
        t = extract_text(raw.text, raw.fmt, cfg.extract)
        if t.strip():
            out.append((t, raw.url))
        if len(out) >= n:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--docs", type=int, default=300)
    args = ap.parse_args()
    cfg = load_stage_config(MixSamplerConfig, args.config)
    rows = []
    for s in cfg.sources:
        if not s.filters:
            continue
        src = make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers)
        docs = _texts(src, args.docs, cfg)
        mb = sum(len(t.encode()) for t, _ in docs) / 1e6
        chain = FilterChain(s.filters, f"sources.{s.name}")
        for f in chain.filters:  # warm-up (model load) outside the timing
            f(docs[0][0], DocContext(url=docs[0][1], source=s.name, expected_lang=s.lang))
        for f in [*chain.filters, chain]:
            name = getattr(f, "name", "CHAIN (all, in order)")
            t0 = time.perf_counter()
            for text, url in docs:
                f(text, DocContext(url=url, source=s.name, expected_lang=s.lang))
            dt = time.perf_counter() - t0
            rows.append((s.name, name, len(docs), mb, dt))
    print(f"{'source':<14} {'filter':<22} {'docs':>5} {'MB':>6} {'docs/s':>9} {'MB/s':>7} {'share':>6}")
    by_source: dict[str, float] = {}
    for src, name, _n, _mb, dt in rows:
        if name.startswith("CHAIN"):
            by_source[src] = dt
    for src, name, n, mb, dt in rows:
        share = dt / by_source[src] if not name.startswith("CHAIN") else 1.0
        print(f"{src:<14} {name:<22} {n:>5} {mb:>6.2f} {n / dt:>9.1f} {mb / dt:>7.2f} {share:>6.1%}")
    singles = [r for r in rows if not r[1].startswith("CHAIN")]
    slow = max(singles, key=lambda r: r[4] / r[3])
    tot_mb = sum(r[3] for r in rows if r[1].startswith("CHAIN"))
    tot_dt = sum(r[4] for r in rows if r[1].startswith("CHAIN"))
    tot_n = sum(r[2] for r in rows if r[1].startswith("CHAIN"))
    lid = [r for r in singles if r[1] == "langid"]
    print(f"\nwhole chain, all sources: {tot_n / tot_dt:,.1f} docs/s, {tot_mb / tot_dt:.2f} MB/s per core")
    if lid:
        print(f"langid alone: {sum(r[2] for r in lid) / sum(r[4] for r in lid):,.1f} docs/s, "
              f"{sum(r[3] for r in lid) / sum(r[4] for r in lid):.2f} MB/s per core")
    print(f"slowest rule per MB: {slow[1]} on {slow[0]} ({slow[3] / slow[4]:.2f} MB/s)")


if __name__ == "__main__":
    main()
