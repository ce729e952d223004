r"""Stage 2: exact + MinHash-LSH near-duplicate removal across sources, and decontamination.

    .venv/bin/python cross_source_dedup.py --config configs/demo.yaml
    .venv/bin/python cross_source_dedup.py --config configs/demo.yaml \
        --set dedup.shingle=word --set dedup.bands=14 --set dedup.rows=8

Reads data/<run>/mixed_raw (refusing it if stage 1's config changed since it was built), writes
data/<run>/mixed_dedup (+ removed.jsonl, contamination_hits.jsonl) and reports/<run>/
dedup_report.{json,md}, contamination_report.{json,md}.
"""

from __future__ import annotations

from minideepseek.cli import stage_script

build_parser, main = stage_script("cross_source_dedup", __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
