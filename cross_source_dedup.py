"""Stage 2: exact + MinHash-LSH near-duplicate removal across sources, and decontamination.

    python cross_source_dedup.py --config configs/demo.yaml
    python cross_source_dedup.py --config configs/demo.yaml --set dedup.shingle=word --set dedup.bands=14 --set dedup.rows=8

Reads data/<run>/mixed_raw (refusing it if stage 1's config changed since it was built), writes
data/<run>/mixed_dedup (+ removed.jsonl, contamination_hits.jsonl) and reports/<run>/
dedup_report.{json,md}, contamination_report.{json,md}.
"""

from __future__ import annotations

import argparse

from minideepseek.cli import build_stage_parser, open_executor, stage_main, stage_plan


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.crossdedup.stage import UPSTREAM, run_dedup
    plan, cfg = stage_plan(args, "cross_source_dedup")
    with open_executor(args) as ex:
        man = run_dedup(cfg, plan.upstream_hashes("cross_source_dedup")[UPSTREAM], args.config, force=args.force,
                        executor=ex)
    c = man["counters"]
    print(f"mixed_dedup: {c['docs_out']:,} of {c['docs_in']:,} docs kept (exact -{c['exact_removed']:,}, "
          f"near -{c['near_removed']:,}, contamination hits {c['contamination_hits']:,}) in "
          f"{cfg.run.run_dir / 'mixed_dedup'}; report: {cfg.run.report_dir / 'dedup_report.md'}")


def build_parser() -> argparse.ArgumentParser:
    return build_stage_parser("cross_source_dedup.py", __doc__ or "")


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
