"""``.venv/bin/python report.py bill RUN``: the options of the data bill (``bill.py``) and its writer."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .bill import STAGES, TARGETS, BillAssumptions, markdown, project, run_facts
from .config import ConfigError
from .fsio import write_json_atomic, write_text_atomic

DEFAULT_FIT = Path("reports") / "examples" / "scale" / "fit.json"  # the committed scale bench (docs/scale.md)


def add_bill_parser(sub: Any, add_common: Any) -> None:
    b = sub.add_parser("bill", help="project the run's cost to 1B / 70B / 15T tokens (reports/<run>/cost.md)",
                       description=__doc__)
    b.add_argument("run")
    b.add_argument("--tokens", type=float, action="append", help=f"target packed tokens, repeatable (default "
                   f"{', '.join(f'{t:g}' for t in TARGETS)})")
    b.add_argument("--cores", type=int, action="append", help="show wall on N cores, repeatable (default 2 and 64)")
    b.add_argument("--cpu-util", type=float, default=1.0, help="busy share of the run's cores when CPU-s were "
                   "not measured (default 1.0: an upper bound)")
    b.add_argument("--parallel-efficiency", type=float, default=0.8)
    b.add_argument("--base-rss-mb", type=float, default=250.0, help="RSS that does not grow with the data")
    b.add_argument("--filter-keep", type=float, help="documents kept by the filters (default: the run's)")
    b.add_argument("--dedup-keep", type=float, help="documents kept by dedup (default: the run's)")
    b.add_argument("--tokenizer-sample-ratio", type=float, help="share of the text in the tokenizer sample")
    b.add_argument("--tokenizer-sample-cap-tokens", type=float, help="cap the tokenizer sample (tokens)")
    b.add_argument("--exponent", action="append", default=[], metavar="STAGE=X",
                   help=f"time growth exponent of a stage ({', '.join(STAGES)}); default 1 or the fit's")
    b.add_argument("--scale-fit", metavar="FILE", default=str(DEFAULT_FIT),
                   help=f"fit.json of bench/bench_scale.py (measured fixed + marginal CPU-s and MB per stage); default "
                        f"the committed {DEFAULT_FIT}, 'none' for the run's own figures scaled linearly")
    add_common(b, sub=True)


def bill_main(args: argparse.Namespace, report_dir: Path, data_dir: Path | None) -> int:
    exps = {}
    for kv in args.exponent:
        k, _, v = kv.partition("=")
        exps[k] = float(v)
    a = BillAssumptions(targets=tuple(args.tokens or TARGETS), cores=tuple(args.cores or (2, 64)),
                        cpu_util=args.cpu_util, parallel_efficiency=args.parallel_efficiency,
                        base_rss_mb=args.base_rss_mb, filter_keep=args.filter_keep, dedup_keep=args.dedup_keep,
                        tokenizer_sample_ratio=args.tokenizer_sample_ratio,
                        tokenizer_sample_cap_tokens=args.tokenizer_sample_cap_tokens, exponents=exps)
    fit, measured, fit_path = load_fit(args.scale_fit, args.run)
    out = write_bill(args.run, report_dir, data_dir, a, Path(args.out) if args.out else report_dir, fit, measured,
                     fit_path)
    print(f"bill: {out}" + (f" (scale fit: {fit_path})" if fit_path
                            else " (no scale fit: the run's figures scaled linearly)"))
    return 0


def load_fit(path: str | None, run: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """(fit, this run's measured stages if it is a scale-bench run, the file used) from ``--scale-fit``;
    a missing or unreadable file is a ConfigError naming it (one line, exit 2)."""
    if not path or path.lower() == "none":
        return None, None, None
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--scale-fit {path}: no such file; the committed fit is {DEFAULT_FIT} (bench/bench_scale.py "
                          f"--publish writes it), or pass --scale-fit none")
    try:
        fit = json.loads(p.read_text(encoding="utf-8"))["fit"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--scale-fit {path}: not a bench_scale fit.json ({type(exc).__name__}: {exc})") from None
    measured = None
    res = p.with_name("results.json")  # the bench's own runs: measured CPU-s
    for r in json.loads(res.read_text(encoding="utf-8")) if res.is_file() else []:
        if f"scale_{int(r['target_tokens'])}" == run:
            measured = r["stages"]
    return fit, measured, path


def write_bill(run: str, report_dir: Path, data_dir: Path | None, a: BillAssumptions, out: Path,
               fit: dict[str, Any] | None = None, measured: dict[str, Any] | None = None,
               fit_path: str | None = None) -> Path:
    """``cost.md`` and ``cost.json`` in ``out`` for the run's reports (and manifests under ``data_dir``)."""
    bill = project(run_facts(report_dir, data_dir), a, fit, measured)
    bill["fit_file"] = fit_path
    write_text_atomic(out / "cost.md", markdown(bill, run))
    write_json_atomic(out / "cost.json", bill)
    return out / "cost.md"
