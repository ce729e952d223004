"""Prediction cost of the ``quality`` filter: fastText scoring of a run's documents, one process.

    .venv/bin/python bench/bench_quality_filter.py --model data/models/demo_quality/model.bin \\
        --run data/demo [--source fineweb_edu] [--repeats 3]

Scores every document of ``--source`` in the run's stage-1 artifact (the text the filter would see, up to
``max_chars``) through the filter's own code path, and prints documents/s, MB/s and microseconds per
document (best of ``--repeats``), plus the share of that stage 1's wall (its manifest) the scoring of
those documents would take on one core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.arrow_io import iter_dataset_rows  # noqa: E402
from minideepseek.filters.quality import QualityConfig, QualityFilter  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--run", required=True, help="a run directory (data/<run>) with mixed_raw/")
    p.add_argument("--source", default="fineweb_edu")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    art = Path(args.run) / "mixed_raw"
    texts = [r["text"] for r in iter_dataset_rows(art, ["source", "text"]) if r["source"] == args.source]
    f = QualityFilter(QualityConfig(model=args.model, threshold=0.5))
    mb = sum(len(t[: f.cfg.max_chars].encode()) for t in texts) / 1e6
    best = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for t in texts:
            f.score(t)
        best = min(best, time.perf_counter() - t0)
    wall = json.loads((art / "manifest.json").read_text())["wall_s"]
    print(f"{len(texts):,} {args.source} documents, {mb:.1f} MB scored: {len(texts) / best:,.0f} docs/s, "
          f"{mb / best:.1f} MB/s, {best / len(texts) * 1e6:,.0f} us/doc (best of {args.repeats}); "
          f"{best:.2f} s = {best / wall:.1%} of that stage 1's {wall:.0f} s wall")


if __name__ == "__main__":
    main()
