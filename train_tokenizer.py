r"""Stage 3: train a ~150K lossless byte-level BPE (no normalizer, DeepSeek-V3 pre-split, ByteLevel)
on a stratified sample of mixed_dedup.

    python train_tokenizer.py --config configs/demo.yaml
    python train_tokenizer.py --config configs/demo.yaml --set tokenizer.vocab_size=128000 \
        --set tokenizer.normalizer=nfkc --set tokenizer.pre_tokenizer=bytelevel

Writes data/<run>/tokenizer/ (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
sample.json) and reports/<run>/tokenizer_eval.{json,md} (ours vs DeepSeek-V3 vs Qwen2.5 on
held-out documents: whole components never trained on, and random documents).
"""

from __future__ import annotations

import argparse

from minideepseek.cli import build_stage_parser, open_executor, stage_main, stage_plan


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.pipeline import MIXED_DEDUP
    from minideepseek.tokenizer.stage import run_tokenizer
    plan, cfg = stage_plan(args, "train_tokenizer")
    with open_executor(args) as ex:
        man = run_tokenizer(cfg, plan.upstream_hashes("train_tokenizer")[MIXED_DEDUP], args.config, force=args.force,
                            executor=ex)
    c = man["counters"]
    print(f"tokenizer: vocab {c['vocab_size']:,} (target {c['vocab_target']:,}) from {c['train_docs']:,} docs in "
          f"{cfg.run.run_dir / 'tokenizer'}; report: {cfg.run.report_dir / 'tokenizer_eval.md'}")


def build_parser() -> argparse.ArgumentParser:
    return build_stage_parser("train_tokenizer.py", __doc__ or "")


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
