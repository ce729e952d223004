"""Stage 1: sample documents from several sources by recipe weights.

    python mix_sampler.py --config configs/demo.yaml
    python mix_sampler.py --config configs/demo.yaml --set sampler.target_docs=2000 --set run.name=docs2000
    python mix_sampler.py --config configs/deepseek_v3_1b.yaml      # Hugging Face hub recipe

Writes data/<run>/mixed_raw (a `datasets` directory + manifest.json + rejects.jsonl) and
reports/<run>/source_mix.{json,md}.
"""

from __future__ import annotations

import argparse

from minideepseek.cli import build_stage_parser, open_executor, stage_main, stage_plan


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.sampling.stage import run_mix_sampler
    plan, cfg = stage_plan(args, "mix_sampler")
    with open_executor(args) as ex:
        man = run_mix_sampler(cfg, force=args.force, executor=ex)
    c = man["counters"]
    print(f"mixed_raw: {c['docs']:,} docs in {cfg.run.run_dir / 'mixed_raw'}; "
          f"report: {cfg.run.report_dir / 'source_mix.md'}")


def build_parser() -> argparse.ArgumentParser:
    return build_stage_parser("mix_sampler.py", __doc__ or "")


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
