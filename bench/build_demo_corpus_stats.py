"""Stats of the built demo corpus: per component docs, MB, doc sizes; read throughput.

Run:  python bench/build_demo_corpus_stats.py [--cache-dir D] [--tiers portable,debian] [--force]

Builds the corpus first if the cache has none (``--force`` times a rebuild from cached
downloads), then reads every domain once to measure how fast downstream stages can stream it.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.demo_corpus import DOMAINS, TIERS, build_demo_corpus  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--tiers", default=",".join(TIERS))
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    t0 = time.perf_counter()
    corpus = build_demo_corpus(args.cache_dir, tuple(args.tiers.split(",")), force=args.force)
    build_s = time.perf_counter() - t0

    sizes: dict[str, list[int]] = defaultdict(list)
    invalid: dict[str, int] = defaultdict(int)
    t1 = time.perf_counter()
    total_bytes = 0
    for domain in DOMAINS:
        for rec in corpus.iter_domain(domain):
            key = f"{domain}/{rec['component']}"
            if rec["raw"] is None:
                invalid[key] += 1
                continue
            n = len(rec["raw"].encode("utf-8"))
            sizes[key].append(n)
            total_bytes += n
    read_s = time.perf_counter() - t1

    print(f"{'domain/component':<32} {'docs':>7} {'MB':>7} {'median KB':>10} {'max KB':>8} {'bad utf8':>8}")
    for key, ns in sizes.items():
        print(f"{key:<32} {len(ns):>7,} {sum(ns) / 1e6:>7.2f} {statistics.median(ns) / 1e3:>10.1f} "
              f"{max(ns) / 1e3:>8.1f} {invalid[key]:>8}")
    disk = sum(p.stat().st_size for p in corpus.root.iterdir())
    print(f"build/load {build_s:.2f}s (manifest build_seconds {corpus.manifest['build_seconds']}s); "
          f"read all {total_bytes / 1e6:.1f} MB in {read_s:.2f}s ({total_bytes / 1e6 / read_s:.0f} MB/s); "
          f"corpus on disk {disk / 1e6:.1f} MB; shortfalls {len(corpus.shortfalls)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
