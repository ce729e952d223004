"""CLI: ``python -m minideepseek.demo_corpus [--cache-dir D] [--tiers portable,debian] [--force]``.

Builds (or finds cached) the demo corpus and prints a per-domain summary.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .build import TIERS, build_demo_corpus, format_summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minideepseek.demo_corpus",
        description="Build the offline demo corpus (raw real text per domain) into the cache.",
    )
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache root (default: $MINIDEEPSEEK_CACHE or ~/.cache/minideepseek)")
    parser.add_argument("--tiers", default=",".join(TIERS),
                        help="comma-separated subset of: portable,debian (default: both)")
    parser.add_argument("--force", action="store_true",
                        help="rebuild even if a complete build exists (downloads are reused)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and the summary")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        tiers = tuple(args.tiers.split(","))
        corpus = build_demo_corpus(cache_dir=args.cache_dir, tiers=tiers, force=args.force)
    except ValueError as exc:
        parser.error(str(exc))
    print(format_summary(corpus))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
