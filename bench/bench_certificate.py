"""What the recall certificate costs: stage 1 once, then stage 2 with and without canaries, alternated, in
one process, on the same machine; prints the walls and the ratio to stages 1-2 (the issue's bound: 10%).

    .venv/bin/python bench/bench_certificate.py --config configs/demo.yaml --repeats 2 --workdir /tmp/bench34

Stage 2 is rebuilt with --force each time (canaries are not part of its config hash, so it would
otherwise be up to date); the certificate's own probe time is read from certificate.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cross_source_dedup  # noqa: E402
import mix_sampler  # noqa: E402
from minideepseek.artifact import read_manifest  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/bench_certificate")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    work = Path(args.workdir)
    base = ["--config", args.config, "--log-level", "WARNING", "--set", "run.name=bench_certificate",
            "--set", f"run.data_dir={work / 'data'}", "--set", f"run.reports_dir={work / 'reports'}"]
    for o in args.overrides:
        base += ["--set", o]
    run_dir = work / "data" / "bench_certificate"
    t0 = time.perf_counter()
    assert mix_sampler.main(base) == 0
    s1 = read_manifest(run_dir / "mixed_raw").wall_s
    print(f"stage 1: {s1:.1f} s (manifest; {time.perf_counter() - t0:.1f} s with skip checks)")
    walls: dict[bool, list[float]] = {False: [], True: []}
    probe: list[float] = []
    for _ in range(args.repeats):
        for on in (False, True):
            assert cross_source_dedup.main([*base, "--force", "--set", f"canaries.enabled={str(on).lower()}",
                                            "--set", "canaries.fail=warn"]) == 0
            walls[on].append(read_manifest(run_dir / "mixed_dedup").wall_s)
            if on:
                cert = json.loads((work / "reports" / "bench_certificate" / "certificate.json").read_text())
                probe.append(cert["wall_s"])
                print(f"  certificate: {cert['line']} ({cert['canaries']} canaries, probes {cert['wall_s']} s)")
            print(f"  stage 2 canaries={'on' if on else 'off'}: {walls[on][-1]:.1f} s")
    off, on_ = statistics.median(walls[False]), statistics.median(walls[True])
    base_wall = s1 + off
    print(f"stages 1-2 without canaries: {base_wall:.1f} s; stage 2 with canaries: +{on_ - off:.1f} s "
          f"(median of {args.repeats}); probes alone {statistics.median(probe):.2f} s")
    print(f"cost ratio (stage-2 wall difference / stages 1-2): {(on_ - off) / base_wall:.3f}; "
          f"probes / stages 1-2: {statistics.median(probe) / base_wall:.3f}")


if __name__ == "__main__":
    main()
