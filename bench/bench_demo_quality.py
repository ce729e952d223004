"""What the demo's quality classifier adds to a run: the model build (stage 1's first step) and stage 1
with the filter against stage 1 without it, in one process, on the same machine.

    .venv/bin/python bench/bench_demo_quality.py [--config configs/demo.yaml] [--repeats 1] [--signals none]

1. builds the model the demo's web filter names from the pinned corpus (``ensure_models(force=True)``:
   extraction of the web source's first pass + fastText training), timed;
2. runs stage 1 twice per repeat into a temporary data dir, with and without the web source's
   ``quality`` filter (``max_epochs`` as configured), alternating the order per repeat, at
   ``sampler.signals`` = ``--signals`` (``none`` isolates the filter's cost from the store's);
3. prints wall and CPU (this process and its pool workers) per run and the ratio.

The rest of the demo (stages 2-5) does not see the filter except through the documents it keeps.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.cli import setup_logging  # noqa: E402
from minideepseek.runconfig import load_stage_config  # noqa: E402
from minideepseek.sampling.config import MixSamplerConfig  # noqa: E402
from minideepseek.sampling.quality_build import ensure_models  # noqa: E402
from minideepseek.sampling.stage import run_mix_sampler  # noqa: E402


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _timed(fn):  # type: ignore[no-untyped-def]
    w0, c0 = time.perf_counter(), _cpu()
    out = fn()
    return out, time.perf_counter() - w0, _cpu() - c0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--signals", default="none", choices=["none", "first_drop", "full"])
    args = p.parse_args()
    setup_logging("WARNING")
    tmp = Path(tempfile.mkdtemp(prefix="bench_demo_quality_"))
    base = [f"run.data_dir={tmp / 'data'}", f"run.reports_dir={tmp / 'reports'}", f"sampler.signals={args.signals}"]
    cfg = load_stage_config(MixSamplerConfig, args.config, base, quiet=True)
    _, w, c = _timed(lambda: ensure_models(cfg, force=True))
    print(f"model build (extract the web source's first pass + train): {w:.1f} s wall, {c:.1f} s CPU of this process")
    web = cfg.sources[0]
    without = dataclasses.replace(cfg, sources=(dataclasses.replace(
        web, filters=tuple(f for f in web.filters if f.get("type") != "quality")), *cfg.sources[1:]))
    results: dict[str, list[tuple[float, float, int]]] = {"with": [], "without": []}
    for r in range(args.repeats):
        order = [("with", cfg), ("without", without)]
        if r % 2:
            order.reverse()
        for name, c_ in order:
            c_ = dataclasses.replace(c_, run=dataclasses.replace(c_.run, name=f"{name}{r}"))
            man, w, c = _timed(lambda c_=c_: run_mix_sampler(c_, force=True))
            results[name].append((w, c, man["counters"]["docs"]))
            print(f"stage 1 {name:>7} the quality filter: {w:.1f} s wall, {c:.1f} s CPU, {man['counters']['docs']:,} docs")
    bw = min(x[0] for x in results["with"])
    bo = min(x[0] for x in results["without"])
    cw = min(x[1] for x in results["with"])
    co = min(x[1] for x in results["without"])
    print(f"overhead (best of {args.repeats}): wall {bw / bo:.3f}x, CPU {cw / co:.3f}x; data in {tmp}")


if __name__ == "__main__":
    main()
