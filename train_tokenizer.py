r"""Stage 3: train a ~150K byte-level BPE (NFKC, ByteLevel) on a stratified sample of mixed_dedup.

    python train_tokenizer.py --config configs/demo.yaml
    python train_tokenizer.py --config configs/demo.yaml --set tokenizer.vocab_size=128000 \
        --set tokenizer.pre_tokenizer=deepseek

Writes data/<run>/tokenizer/ (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
sample.json) and reports/<run>/tokenizer_eval.{json,md} (ours vs DeepSeek-V3 vs Qwen2.5 on
held-out documents).
"""

from __future__ import annotations

import argparse

from minideepseek.cli import add_executor_args, open_executor, run_cli, setup_logging, stage_parser


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.runconfig import load_stage_config
    from minideepseek.tokenizer.config import TokenizerStageConfig
    from minideepseek.tokenizer.stage import run_tokenizer, upstream_hash
    cfg = load_stage_config(TokenizerStageConfig, args.config, args.overrides)
    with open_executor(args) as ex:
        man = run_tokenizer(cfg, upstream_hash(args.config, args.overrides), args.config, force=args.force,
                            executor=ex)
    c = man["counters"]
    print(f"tokenizer: vocab {c['vocab_size']:,} (target {c['vocab_target']:,}) from {c['train_docs']:,} docs in "
          f"{cfg.run.run_dir / 'tokenizer'}; report: {cfg.run.report_dir / 'tokenizer_eval.md'}")


def build_parser() -> argparse.ArgumentParser:
    parser = stage_parser("train_tokenizer.py", __doc__ or "")
    add_executor_args(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    return run_cli(_run, args)


if __name__ == "__main__":
    raise SystemExit(main())
