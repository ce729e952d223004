"""Stage 2 (cross_source_dedup) local vs Ray on the same N documents, in one script: wall time ratio,
peak RSS of the driver and of every worker process, bytes shuffled per band, and whether the two
artifacts are identical.

    .venv/bin/python bench/bench_ray_dedup.py --docs 1000000 --workdir /tmp/ray_dedup

The documents are bench_dedup_stage.py's (real demo paragraphs, 10% planted near-duplicates with 3%
edits), written once as a stage-1 artifact; both runs read it. Settings as in that bench: mix64 base
hash, estimated verification, decontamination off. The local run uses a 2-process pool; the Ray run
a local Ray instance with 2 CPUs (both on this 2-core machine, so the ratio shows Ray's overhead, not
a speed-up: the point of Ray is more machines). Worker RSS is sampled every 0.2 s with psutil.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_dedup_stage import make_upstream  # noqa: E402

from minideepseek.config import build  # noqa: E402
from minideepseek.crossdedup.config import DedupStageConfig  # noqa: E402
from minideepseek.crossdedup.stage import run_dedup  # noqa: E402
from minideepseek.executor import ExecutorSpec, RayExecutor  # noqa: E402


class RssSampler:
    """Peak RSS (MiB) per process of the run: this driver's children, or Ray's worker processes."""

    def __init__(self, ray_workers: bool) -> None:
        self.ray_workers = ray_workers
        self.peak: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _procs(self) -> list[psutil.Process]:
        if not self.ray_workers:
            return psutil.Process().children(recursive=True)
        out = []
        for p in psutil.process_iter(["cmdline"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if cmd.startswith("ray::") or "default_worker.py" in cmd:
                out.append(p)
        return out

    def _loop(self) -> None:
        while not self._stop.is_set():
            for p in self._procs():
                try:
                    rss = p.memory_info().rss / 2**20
                    name = p.cmdline()[0][:40] if p.cmdline() else "?"
                except psutil.Error:
                    continue
                if rss > self.peak.get(p.pid, ("", 0.0))[1]:
                    self.peak[p.pid] = (name, rss)
            time.sleep(0.2)

    def __enter__(self) -> RssSampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def summary(self) -> dict[str, float]:
        top = sorted(self.peak.values(), key=lambda x: -x[1])
        return {"processes": len(top), "max_mb": round(top[0][1], 1) if top else 0.0,
                "sum_of_peaks_mb": round(sum(v for _, v in top), 1),
                "top3": [f"{n} {v:.0f} MB" for n, v in top[:3]]}


def _cfg(work: Path, name: str) -> DedupStageConfig:
    return build(DedupStageConfig, {
        "run": {"name": name, "data_dir": str(work / "data"), "reports_dir": str(work / "reports")},
        "dedup": {"base_hash": "mix64", "verify": "estimated", "scurve_docs": 100, "num_proc": 2},
        "decontam": {"enabled": False}}, "bench")


def _files(man: dict) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in man["outputs"]["files"] if not f.get("volatile")}


def _phase(work: Path, which: str, up_hash: str) -> dict:
    """One run in this (fresh) process, so its driver peak RSS is its own."""
    cfg = _cfg(work, which)
    ex = RayExecutor(ExecutorSpec("ray", num_cpus=2)) if which == "ray" else None
    t_start = time.time()
    if ex is not None:
        _ = ex.cpus  # start Ray outside the timed region (reported apart)
    start_s = time.time() - t_start
    t0 = time.time()
    with RssSampler(ray_workers=ex is not None) as sampler:
        man = run_dedup(cfg, {"mixed_raw": up_hash}, "bench", force=True, executor=ex)
    wall = time.time() - t0
    if ex is not None:
        ex.shutdown()
    rep = json.loads((cfg.run.run_dir / "mixed_dedup" / "dedup_report.json").read_text())
    out = {"wall_s": round(wall, 1), "driver_peak_rss_mb": man["peak_rss_mb"], "workers": sampler.summary(),
           "files": _files(man), "removed": rep["removed"], "candidate_pairs": rep["near"]["candidate_pairs"]}
    if ex is not None:
        shuffled = rep["near"]["ray"]["bytes_shuffled_per_band"]
        out.update({"ray_start_s": round(start_s, 1), "signature_tasks": rep["near"]["ray"]["signature_tasks"],
                    "bands": len(shuffled), "bytes_shuffled_per_band": shuffled[0] if shuffled else 0,
                    "bytes_shuffled_total": sum(shuffled)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--workdir", default="/tmp/ray_dedup")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--phase", choices=["local", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--up-hash", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.workdir)
    if args.phase:
        print(json.dumps(_phase(work, args.phase, args.up_hash)))
        return
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.time()
    up_hash = make_upstream(_cfg(work, "local").run.run_dir, args.docs, args.seed)
    shutil.copytree(_cfg(work, "local").run.run_dir / "mixed_raw", _cfg(work, "ray").run.run_dir / "mixed_raw")
    gen_s = time.time() - t0
    res = {}
    for which in ("local", "ray"):
        out = subprocess.run([sys.executable, __file__, "--workdir", str(work), "--phase", which, "--up-hash", up_hash],
                             check=True, capture_output=True, text=True).stdout
        res[which] = json.loads(out.strip().splitlines()[-1])
    same = res["local"].pop("files") == res["ray"].pop("files")
    print(json.dumps({"docs": args.docs, "generate_s": round(gen_s, 1), **res,
                      "ray_over_local_wall": round(res["ray"]["wall_s"] / res["local"]["wall_s"], 3),
                      "identical_artifacts": same}, indent=2))


if __name__ == "__main__":
    main()
