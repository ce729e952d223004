"""Cost of the integrity check (``run.verify: sha256``) on a run's artifacts.

    .venv/bin/python bench/bench_verify.py                 # data/demo
    .venv/bin/python bench/bench_verify.py --run data/classroom

For every artifact with a manifest: files, MB, seconds and MB/s of the full sha256 verification a
downstream stage does before using it, against a plain read of the same bytes in the same process
(the ratio is what the check costs over I/O; the page cache is warm for both after the first pass).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.artifact import read_manifest, verify_artifact  # noqa: E402


def _read_all(adir: Path, man: dict) -> int:
    n = 0
    for f in man["outputs"]["files"]:
        with (adir / f["path"]).open("rb") as fh:
            while block := fh.read(1 << 20):
                n += len(block)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="data/demo")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    root = Path(args.run)
    total_b, total_v, total_r = 0, 0.0, 0.0
    print(f"{'artifact':<14} {'files':>5} {'MB':>8} {'sha256 s':>9} {'MB/s':>7} {'read s':>7} {'ratio':>6}")
    for adir in sorted(p for p in root.iterdir() if (p / "manifest.json").is_file()):
        man = read_manifest(adir)
        assert man is not None
        best_v = best_r = float("inf")
        for _ in range(args.repeats):  # interleaved; best of N (the machine is shared)
            t0 = time.perf_counter()
            nbytes = _read_all(adir, man)
            best_r = min(best_r, time.perf_counter() - t0)
            t0 = time.perf_counter()
            verify_artifact(adir, man, "sha256")
            best_v = min(best_v, time.perf_counter() - t0)
        mb = nbytes / 1e6
        print(f"{adir.name:<14} {len(man['outputs']['files']):>5} {mb:>8.1f} {best_v:>9.3f} {mb / best_v:>7.0f} "
              f"{best_r:>7.3f} {best_v / best_r:>6.1f}")
        total_b, total_v, total_r = total_b + nbytes, total_v + best_v, total_r + best_r
    mb = total_b / 1e6
    print(f"{'all':<14} {'':>5} {mb:>8.1f} {total_v:>9.3f} {mb / total_v:>7.0f} {total_r:>7.3f} {total_v / total_r:>6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
