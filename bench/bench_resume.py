"""What a kill inside a stage costs after resume inside a stage (issue 33), per stage.

    .venv/bin/python bench/bench_resume.py --config configs/demo.yaml --set run.name=resume_bench
    .venv/bin/python bench/bench_resume.py --stages mix_sampler cross_source_dedup --at 0.6 ...

For each stage (stages 1-4 by default; their upstreams are built first if missing), in one script so the
three runs see the same machine:

1. an uninterrupted ``--force`` build: its wall, its unit count N (the manifest's ``units``) and fingerprint;
2. the same build killed (SIGKILL, ``MINIDEEPSEEK_KILL_AFTER_UNIT=<stage>:<round(at*N)>``) right after
   the unit at ``--at`` of the way through: the seconds until the kill;
3. a rerun of the same command: it resumes from the finished units. Its wall, the work it reused
   (``resumed.seconds_saved``) and whether the artifact's fingerprint equals step 1's.

Redone seconds = killed + resumed - uninterrupted: the work the kill cost on top of one uninterrupted run
(startup, the upstream's verification and the unfinished unit). Without resume it would be the killed
run's whole wall. Writes ``--out`` (JSON) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek import pipeline  # noqa: E402
from minideepseek.artifact import read_manifest  # noqa: E402
from minideepseek.units import KILL_ENV  # noqa: E402

STAGES = tuple(s.name for s in pipeline.STAGES if s.executor)  # stages 1-4 (stage 5 resumes from checkpoints)


def _run(stage: str, common: list[str], force: bool, env: dict[str, str] | None = None) -> tuple[int, float]:
    cmd = [sys.executable, f"{stage}.py", *common, "--log-level", "WARNING"] + (["--force"] if force else [])
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL).returncode
    return rc, time.perf_counter() - t0


def bench_stage(stage: str, common: list[str], run_dir: Path, at: float) -> dict:
    adir = run_dir / pipeline.stage(stage).artifact
    rc, wall = _run(stage, common, force=True)
    man = read_manifest(adir)
    if rc != 0 or man is None:
        raise SystemExit(f"{stage}: the uninterrupted run failed (exit {rc})")
    units = (man.get("units") or {}).get("units_finished_here", 0)
    if units < 2:
        return {"stage": stage, "units": units, "skipped": "the stage records fewer than 2 units on this config"}
    kill_at = max(1, min(units - 1, round(at * units)))
    rc_k, wall_k = _run(stage, common, force=True, env={KILL_ENV: f"{stage}:{kill_at}"})
    if rc_k != -9:
        raise SystemExit(f"{stage}: the run to be killed after unit {kill_at} exited {rc_k}, not by SIGKILL")
    rc_r, wall_r = _run(stage, common, force=True)
    res = read_manifest(adir)
    if rc_r != 0 or res is None:
        raise SystemExit(f"{stage}: the resumed run failed (exit {rc_r})")
    resumed = res.get("resumed") or {}
    return {"stage": stage, "units": units, "killed_after_unit": kill_at, "uninterrupted_s": round(wall, 2),
            "killed_s": round(wall_k, 2), "resumed_s": round(wall_r, 2),
            "units_reused": resumed.get("units_reused", 0), "seconds_saved": resumed.get("seconds_saved", 0.0),
            "redone_s": round(wall_k + wall_r - wall, 2), "redone_without_resume_s": round(wall_k, 2),
            "identical": res["fingerprint"] == man["fingerprint"], "fingerprint": res["fingerprint"],
            "git_commit": res.get("git_commit")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    ap.add_argument("--at", type=float, default=0.6, help="kill after this fraction of the stage's units (0.6)")
    ap.add_argument("--out", default="bench/out/resume.json")
    args = ap.parse_args(argv)
    if not 0 < args.at < 1:
        ap.error("--at must lie strictly between 0 and 1")
    from minideepseek.pipeline import Plan

    common = ["--config", args.config, *[x for o in args.overrides for x in ("--set", o)]]
    run_dir = Plan(args.config, tuple(args.overrides)).config(args.stages[0], quiet=True).run.run_dir
    for stage in STAGES[:STAGES.index(args.stages[0])]:  # upstreams: built once, skipped when up to date
        rc, _ = _run(stage, common, force=False)
        if rc:
            raise SystemExit(f"{stage} (an upstream) failed: exit {rc}")
    rows = []
    for stage in args.stages:
        row = bench_stage(stage, common, run_dir, args.at)
        rows.append(row)
        if "skipped" in row:
            print(f"{stage:<19} {row['skipped']}")
            continue
        print(f"{stage:<19} units {row['units']:>4}  killed after {row['killed_after_unit']:>4}  uninterrupted "
              f"{row['uninterrupted_s']:>7.1f} s  killed at {row['killed_s']:>7.1f} s  resumed {row['resumed_s']:>7.1f} s"
              f"  redone {row['redone_s']:>6.1f} s (without resume {row['redone_without_resume_s']:.1f} s)  "
              f"identical: {row['identical']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from minideepseek.demo_corpus.build import DERIVED_ENV
    from minideepseek.provenance import git_commit

    out.write_text(json.dumps({"config": args.config, "overrides": args.overrides, "at": args.at,
                               "cpu_count": os.cpu_count(), "git_commit": git_commit(),
                               # the corpus the stages read (the scale bench's derived one, when set)
                               "cache": os.environ.get("MINIDEEPSEEK_CACHE"),
                               "derived_corpus": os.environ.get(DERIVED_ENV) == "1",
                               "stages": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0 if all(r.get("identical", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
