"""The what-if's command-line options, without its imports: ``report.py --help`` stays light."""

from __future__ import annotations

import argparse


def add_whatif_args(p: argparse.ArgumentParser) -> None:
    """Options of ``report.py whatif``."""
    p.add_argument("--config", default="configs/demo.yaml", help="the run's pipeline config")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="the change to predict, e.g. --set sources.web.filters.0.threshold=0.7 (repeatable)")
    p.add_argument("--drop-filter", action="append", default=[], metavar="SOURCE:INDEX",
                   help="predict without filter INDEX (0-based) of SOURCE's chain (repeatable)")
    p.add_argument("--json", default=None, help="also write the prediction (with kept ids) here")
    p.add_argument("--apply", action="store_true",
                   help="write the predicted stage-1 artifact (mixed_raw) from the store, as a --force rerun would "
                        "(the run's config must then carry the same change; see docs/stages.md)")
