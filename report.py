"""Data dashboard: one run's figures, or two runs side by side with drift flags (seed table P11-11).

    python report.py show demo                       # reports/dashboard.{html,md,json} for reports/demo
    python report.py compare demo demo_b             # side by side + drift flags
    python report.py compare demo demo_b --threshold token_share_pp=2 --threshold dedup_rate_pp=5
    python report.py compare reports/demo /elsewhere/reports/run7 --out /tmp/dash

A RUN is a run name (reports/<name>, with data/<name> for stage wall times when present) or a path to
a run's report directory. Only reports and manifests are read, never the raw data. The HTML page is
self-contained (inline SVG charts, no scripts). Exit code 0; with --fail-on-drift, 5 when a flag fires.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from minideepseek.cli import run_cli, setup_logging
from minideepseek.dashboard.collect import collect
from minideepseek.dashboard.drift import Thresholds, drift_flags
from minideepseek.dashboard.render import markdown, page
from minideepseek.stage import write_json_atomic, write_text_atomic

log = logging.getLogger("report")


def _run_dirs(run: str, reports_dir: Path, data_dir: Path) -> tuple[Path, Path | None]:
    p = Path(run)
    if p.is_dir() and (p / "source_mix.json").is_file():
        return p, None
    return reports_dir / run, data_dir / run if (data_dir / run).is_dir() else None


def _main(args: argparse.Namespace) -> int:
    names = [args.run] if args.cmd == "show" else [args.run_a, args.run_b]
    runs = [collect(*_run_dirs(n, Path(args.reports_dir), Path(args.data_dir))) for n in names]
    th = Thresholds.parse(args.threshold)
    flags = drift_flags(runs[0], runs[1], th) if len(runs) == 2 else None
    out = Path(args.out or args.reports_dir)
    thd = dataclasses.asdict(th)
    write_text_atomic(out / "dashboard.html", page(runs, flags, thd))
    write_text_atomic(out / "dashboard.md", markdown(runs, flags, thd))
    write_json_atomic(out / "dashboard.json", {"runs": runs, "thresholds": thd, "flags": flags})
    print(f"dashboard: {out / 'dashboard.html'} and {out / 'dashboard.md'}"
          + ("" if flags is None else f"; {len(flags)} drift flag(s)"))
    for f in flags or []:
        print(f"  DRIFT {f['rule']:<20} {f['where']:<16} {f['detail']}")
    return 5 if (flags and args.fail_on_drift) else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="report.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reports-dir", default="reports")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--out", help="where dashboard.{html,md,json} go (default: --reports-dir)")
    p.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                   help=f"drift threshold, repeatable; names: {', '.join(f.name for f in dataclasses.fields(Thresholds))}")
    p.add_argument("--fail-on-drift", action="store_true", help="exit 5 when a drift flag fires")
    p.add_argument("--log-level", default="INFO")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="one run")
    s.add_argument("run")
    c = sub.add_parser("compare", help="two runs side by side, with drift flags")
    c.add_argument("run_a")
    c.add_argument("run_b")
    args = p.parse_args(argv)
    setup_logging(args.log_level)
    rc = {"rc": 0}

    def body(a: argparse.Namespace) -> None:
        rc["rc"] = _main(a)

    return run_cli(body, args) or rc["rc"]


if __name__ == "__main__":
    raise SystemExit(main())
