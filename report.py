"""Data dashboard: one run's figures, or two runs side by side with drift flags (seed table P11-11).

    .venv/bin/python report.py show demo                       # reports/dashboard.{html,md,json} for reports/demo
    .venv/bin/python report.py compare demo demo_b             # side by side + drift flags
    .venv/bin/python report.py compare demo demo_b --threshold token_share_pp=2 --threshold dedup_rate_pp=5
    .venv/bin/python report.py compare reports/demo /elsewhere/reports/run7 --out /tmp/dash
    .venv/bin/python report.py bill demo                       # reports/demo/cost.{md,json}: 1B / 70B / 15T projection
    .venv/bin/python report.py bill demo --filter-keep 0.1 --cores 2 --cores 512 --exponent mixed_dedup=1.1
    .venv/bin/python report.py blame demo --step 40            # reports/demo/blame/: step 40's documents, verified
    .venv/bin/python report.py blame demo --doc ID             # every step that trained document ID, and why not
    .venv/bin/python report.py whatif --config configs/demo.yaml --set sources.fineweb_edu.filters.7.threshold=0.8 --apply
                                                               # stage 1 under new thresholds, from its signal store

A RUN is a run name (reports/<name>, with data/<name> for stage wall times when present) or a path to
a run's report directory. Only reports and manifests are read, never the raw data. The HTML page is
self-contained (inline SVG charts, no scripts). Exit code 0; with --fail-on-drift, 5 when a flag fires.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from minideepseek.bill_cli import add_bill_parser, bill_main
from minideepseek.cli import run_cli, setup_logging
from minideepseek.dashboard.collect import collect
from minideepseek.dashboard.drift import Thresholds, drift_flags
from minideepseek.dashboard.render import markdown, page
from minideepseek.fsio import write_json_atomic, write_text_atomic
from minideepseek.sampling.whatif_cli import add_whatif_args
from minideepseek.train.blame_cli import add_blame_parser, blame_main

log = logging.getLogger("report")


def _run_dirs(run: str, reports_dir: Path, data_dir: Path) -> tuple[Path, Path | None]:
    p = Path(run)
    if p.is_dir() and (p / "source_mix.json").is_file():
        return p, None
    return reports_dir / run, data_dir / run if (data_dir / run).is_dir() else None


def _main(args: argparse.Namespace) -> int:
    if args.cmd == "bill":
        return bill_main(args, *_run_dirs(args.run, Path(args.reports_dir), Path(args.data_dir)))
    if args.cmd == "blame":
        return blame_main(args, *_run_dirs(args.run, Path(args.reports_dir), Path(args.data_dir)))
    if args.cmd == "whatif":
        from minideepseek.sampling.whatif import run_whatif

        run_whatif(args)
        return 0
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


def _add_common(p: argparse.ArgumentParser, sub: bool) -> None:
    """Options accepted before the subcommand and after it (``compare A B --out DIR``). After it they are
    parsed into ``sub_*`` names with no default and merged in ``build_parser().parse_args``' caller."""
    pre = "sub_" if sub else ""
    d = (lambda v: argparse.SUPPRESS) if sub else (lambda v: v)
    p.add_argument("--reports-dir", dest=pre + "reports_dir", default=d("reports"), metavar="DIR",
                   help="where runs' reports are (default: reports)")
    p.add_argument("--data-dir", dest=pre + "data_dir", default=d("data"), metavar="DIR",
                   help="where runs' artifacts are, for stage wall times (default: data)")
    p.add_argument("--out", dest=pre + "out", default=d(None), metavar="DIR",
                   help="where the output goes (default: --reports-dir for dashboard.{html,md,json}, the run's "
                   "report directory for bill's cost.* and blame's blame/)")
    p.add_argument("--threshold", dest=pre + "threshold", action="append", default=d([]), metavar="NAME=VALUE",
                   help=f"drift threshold, repeatable; names: {', '.join(f.name for f in dataclasses.fields(Thresholds))}")
    p.add_argument("--fail-on-drift", dest=pre + "fail_on_drift", action="store_true", default=d(False),
                   help="exit 5 when a drift flag fires")
    p.add_argument("--log-level", dest=pre + "log_level", default=d("INFO"), metavar="LEVEL")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="report.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_common(p, sub=False)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="one run")
    s.add_argument("run")
    _add_common(s, sub=True)
    c = sub.add_parser("compare", help="two runs side by side, with drift flags")
    c.add_argument("run_a")
    c.add_argument("run_b")
    _add_common(c, sub=True)
    add_bill_parser(sub, _add_common)
    add_blame_parser(sub, _add_common)
    w = sub.add_parser("whatif", help="predict stage 1 under new thresholds from a run's signal store "
                       "(sampler.signals: full), without re-running it")
    add_whatif_args(w)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse, merging options given after the subcommand into the same names (those win; thresholds add up)."""
    args = build_parser().parse_args(argv)
    for k in [k for k in vars(args) if k.startswith("sub_")]:
        v, name = getattr(args, k), k[4:]
        setattr(args, name, getattr(args, name) + v if name == "threshold" else v)
        delattr(args, k)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level)
    rc = {"rc": 0}

    def body(a: argparse.Namespace) -> None:
        rc["rc"] = _main(a)

    return run_cli(body, args) or rc["rc"]


if __name__ == "__main__":
    raise SystemExit(main())
