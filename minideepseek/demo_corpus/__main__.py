"""CLI: ``.venv/bin/python -m minideepseek.demo_corpus [build|pin|warc] [--cache-dir D] [--tiers T] [--force]``.

``build`` (default) builds (or finds cached) the demo corpus and prints a per-domain summary;
``--strict`` makes drift or an unpinned package an error. ``pin`` rewrites
``minideepseek/demo_corpus/expected_hashes.json`` from the cache's build records (see pins.py). ``warc``
writes the corpus's Common Crawl-format copy (``demo_corpus/warc.py``) into ``--out`` (default
``data/demo_warc``), the input of ``configs/demo_warc.yaml``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ..invocation import venv_python
from .build import (
    MANIFEST,
    TIERS,
    DemoCorpus,
    build_demo_corpus,
    corpus_root,
    default_cache_dir,
    format_summary,
    normalize_tiers,
    verify_records,
)
from .components import default_components
from .pins import EXPECTED_FILE, Expected, IntegrityError, pin_from_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m minideepseek.demo_corpus",
        description="Build the offline demo corpus (raw real text per domain) into the cache.",
    )
    parser.add_argument("command", nargs="?", choices=("build", "pin", "warc"), default="build",
                        help="build (default); pin: record the cached build's files as the expected hashes; warc: "
                             "write some of the corpus's HTML pages as Common Crawl WARC/WET files into --out")
    parser.add_argument("--out", type=Path, default=Path("data/demo_warc"), help="warc: the output directory")
    parser.add_argument("--strict", action="store_true",
                        help="build: a Debian version drift or an unpinned package is an error")
    parser.add_argument("--expected", type=Path, default=EXPECTED_FILE, help="the expected-hashes file")
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
        if args.command == "pin":
            return pin(args.cache_dir or default_cache_dir(), normalize_tiers(tiers), args.expected)
        corpus = build_demo_corpus(cache_dir=args.cache_dir, tiers=tiers, force=args.force,
                                   expected=Expected.load(args.expected))
        if args.command == "warc":
            from .warc import build_demo_warc

            counts = build_demo_warc(corpus, args.out)
            print(f"demo WARC copy in {args.out}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
            return 0
        print(format_summary(corpus))
        if args.strict:
            corpus.require_pinned()
    except IntegrityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        parser.error(str(exc))
    return 0


def pin(cache_dir: Path, tiers: tuple[str, ...], out: Path) -> int:
    """Write the expected list from the cached build of ``tiers`` (build it first)."""
    root = corpus_root(cache_dir, tiers)
    if not (root / MANIFEST).is_file():
        print(f"error: no complete demo corpus build at {root}; run `{venv_python()} -m minideepseek.demo_corpus "
              f"--tiers {','.join(tiers)}` first", file=sys.stderr)
        return 2
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    verify_records(DemoCorpus(root, manifest))  # the build's records as its manifest says: a tampered cache is never pinned
    sources = [(c.source.kind, c.source.name, c.source.version) for c in default_components() if c.tier in tiers]
    data, notes = pin_from_manifest(manifest, cache_dir / "downloads", Expected.load(out), sources)
    out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    for note in notes:
        print(note, file=sys.stderr)
    print(f"pinned {len(data['pypi'])} PyPI and {len(data['debian'])} Debian packages into {out}")
    return 1 if any(n.startswith("NOT PINNED") for n in notes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
