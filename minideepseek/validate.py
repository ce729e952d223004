"""Validate every stage's section of a config file at once, before any stage runs.

``run_pipeline.sh`` calls ``.venv/bin/python -m minideepseek.validate --config C --set ...`` before stage 1, and
every stage script validates the whole file too, so a typo in a later section (an invalid
``tokenizer.vocab_size``) is reported in a second, not after minutes of stages 1-2. Also the config
hashes every artifact must have under the current command come from the same ``pipeline.Plan``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .config import ConfigError
from .pipeline import Plan


def validate_all(config: str | Path, overrides: list[str] | tuple[str, ...] = (),
                 stages: list[str] | None = None) -> dict[str, Any]:
    """Build every (or the named) stage's config; one ConfigError listing every problem found."""
    return Plan(config, overrides).validate_all(stages)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=".venv/bin/python -m minideepseek.validate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--stages", default=None, help="comma-separated stage names (default: all)")
    args = p.parse_args(argv)
    try:
        validate_all(args.config, args.overrides, args.stages.split(",") if args.stages else None)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
