"""Stage 1: sample documents from several sources by recipe weights.

    python mix_sampler.py --config configs/demo.yaml
    python mix_sampler.py --config configs/demo.yaml --set sampler.target_docs=2000 --set run.name=docs2000
    python mix_sampler.py --config configs/deepseek_v3_1b.yaml      # Hugging Face hub recipe

Writes data/<run>/mixed_raw (a `datasets` directory + manifest.json + rejects.jsonl) and
reports/<run>/source_mix.{json,md}.
"""

from __future__ import annotations

import argparse

from minideepseek.cli import add_executor_args, open_executor, run_cli, setup_logging, stage_parser


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.runconfig import load_stage_config
    from minideepseek.sampling.config import MixSamplerConfig
    from minideepseek.sampling.stage import run_mix_sampler
    cfg = load_stage_config(MixSamplerConfig, args.config, args.overrides)
    with open_executor(args) as ex:
        man = run_mix_sampler(cfg, force=args.force, executor=ex)
    c = man["counters"]
    print(f"mixed_raw: {c['docs']:,} docs in {cfg.run.run_dir / 'mixed_raw'}; "
          f"report: {cfg.run.report_dir / 'source_mix.md'}")


def build_parser() -> argparse.ArgumentParser:
    parser = stage_parser("mix_sampler.py", __doc__ or "")
    add_executor_args(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    return run_cli(_run, args)


if __name__ == "__main__":
    raise SystemExit(main())
