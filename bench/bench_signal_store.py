"""What the signal store costs stage 1: wall time and bytes, ``sampler.signals`` none vs first_drop vs full.

    .venv/bin/python bench/bench_signal_store.py [--config configs/demo.yaml] [--repeats 1] [--set KEY=VALUE ...]
        [--headroom H ...]   # also full with sampler.signals_headroom=H (a mode "full@H" each)

On the scale corpus (docs/scale.md): ``MINIDEEPSEEK_CACHE=bench/out/scale/100000000/cache
MINIDEEPSEEK_ALLOW_DERIVED_CORPUS=1`` and ``--set sampler.target_tokens=100000000`` plus the quality
``--set`` that ``bench_scale.py --corpus-only`` prints.

Runs stage 1 (``mix_sampler.py --force``) once untimed (warm-up: the first run of a series pays for a
cold page cache and was the slowest in every series), then once per mode and repeat, interleaved and
in reversed order every other repeat (none, first_drop, full, full, first_drop, none, ...) so machine
load drifts hit every mode alike, each in its own run directory under bench/out/signal_store/. Reads
each run's manifest (``wall_s``), the CPU seconds of the run's whole process tree (polled with psutil:
less sensitive than wall to other jobs on a shared machine) and the store's bytes, and prints
per mode: the median wall and CPU, their ratios to ``none``, the documents evaluated (store rows), the
store's bytes and bytes per 1M evaluated documents; and checks that the kept documents (the .arrow
shards) are identical.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("none", "first_drop", "full")


def _tree_cpu(proc: subprocess.Popen) -> float:
    """CPU seconds (user + system) of ``proc`` and every process under it, polled every 0.2 s: the pool's
    workers live under a forkserver that is never waited for, so getrusage(RUSAGE_CHILDREN) misses them.
    A process's last < 0.2 s are missed; the same for every mode."""
    import psutil

    seen: dict[int, float] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    t = p.cpu_times()
                    seen[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        time.sleep(0.2)
    if proc.returncode:
        raise SystemExit(f"stage 1 failed (exit {proc.returncode})")
    return sum(seen.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "signal_store"))
    p.add_argument("--headroom", type=float, action="append", default=[],
                   help="also run signals: full with sampler.signals_headroom=H (repeatable)")
    args = p.parse_args()
    out = Path(args.out)
    modes = (*MODES, *(f"full@{h:g}" for h in args.headroom))
    walls: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    info: dict[str, dict] = {}

    def run(mode: str, name: str) -> float:
        signals, _, headroom = mode.partition("@")
        cmd = [sys.executable, str(ROOT / "mix_sampler.py"), "--config", args.config, "--force",
               "--log-level", "WARNING", "--set", f"run.name={name}", "--set", f"run.data_dir={out / 'data'}",
               "--set", f"run.reports_dir={out / 'reports'}", "--set", f"sampler.signals={signals}",
               *(["--set", f"sampler.signals_headroom={headroom}"] if headroom else []),
               *[x for o in args.overrides for x in ("--set", o)]]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
        return _tree_cpu(proc)

    run("none", "bench_signals_warmup")
    for rep in range(args.repeats):
        for mode in modes if rep % 2 == 0 else modes[::-1]:
            name = f"bench_signals_{mode.replace('@', '_h')}"
            cpus[mode].append(run(mode, name))
            art = out / "data" / name / "mixed_raw"
            man = json.loads((art / "manifest.json").read_text())
            walls[mode].append(man["wall_s"])
            store = art / "signals"
            meta = json.loads((store / "meta.json").read_text()) if store.is_dir() else {"rows": {}}
            info[mode] = {"rows": sum(meta["rows"].values()),
                          "store_bytes": sum(f.stat().st_size for f in store.glob("*")) if store.is_dir() else 0,
                          "shards": sorted(f["sha256"] for f in man["outputs"]["files"] if f["path"].endswith(".arrow")),
                          "docs": man["counters"]["docs"]}
            print(f"repeat {rep + 1} {mode:<10} {man['wall_s']:7.1f} s wall {cpus[mode][-1]:7.1f} s CPU", flush=True)
    base, base_cpu = statistics.median(walls["none"]), statistics.median(cpus["none"])
    print("\n| signals | stage-1 wall (median) | vs none | CPU (median) | vs none | docs evaluated | store bytes | "
          "bytes per 1M docs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode in modes:
        w, c = statistics.median(walls[mode]), statistics.median(cpus[mode])
        i = info[mode]
        per_m = i["store_bytes"] / i["rows"] * 1e6 if i["rows"] else 0
        print(f"| {mode} | {w:.1f} s | {w / base:.2f}x | {c:.1f} s | {c / base_cpu:.2f}x | {i['rows']:,} | "
              f"{i['store_bytes']:,} | {per_m / 1e6:,.0f} MB |")
    same = len({tuple(i["shards"]) for i in info.values()}) == 1
    print(f"\nkept documents identical across modes: {same} ({info['none']['docs']:,} docs)")


if __name__ == "__main__":
    main()
