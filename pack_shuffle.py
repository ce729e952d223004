"""Stage 4: tokenize mixed_dedup with our tokenizer, pack into SEQ_LEN blocks (one <|endoftext|>
after every document, tail carried across batches), shuffle, write bounded .arrow shards.

    python pack_shuffle.py --config configs/demo.yaml
    python pack_shuffle.py --config configs/demo.yaml --set pack.seq_len=2048 --set pack.tail=pad

Writes data/<run>/packed/ (a datasets directory: input_ids uint32[seq_len] + per-block document
spans doc_ids/starts/ends/doc_token_start) and reports/<run>/packing_report.{json,md}.
Open it with datasets.load_from_disk, or memory-map a shard: pa.ipc.open_stream(pa.memory_map(f)).
"""

from __future__ import annotations

import argparse

from minideepseek.cli import add_executor_args, open_executor, run_cli, setup_logging, stage_parser


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.packing.config import PackStageConfig
    from minideepseek.packing.stage import ARTIFACT, run_pack, upstream_hashes
    from minideepseek.runconfig import load_stage_config
    cfg = load_stage_config(PackStageConfig, args.config, args.overrides)
    with open_executor(args) as ex:
        man = run_pack(cfg, upstream_hashes(args.config, args.overrides), args.config, force=args.force,
                       executor=ex)
    c = man["counters"]
    tail = (f"dropped tail {c['dropped_tail_tokens']:,} tokens" if cfg.pack.tail == "drop"
            else f"{c['pad_tokens']:,} pad tokens")
    print(f"packed: {c['docs']:,} docs, {c['tokens_produced']:,} tokens -> {c['blocks']:,} blocks of {c['seq_len']:,} "
          f"(efficiency {100 * c['packing_efficiency']:.3f}%, {tail}) in {c['shards']} shard(s) at "
          f"{cfg.run.run_dir / ARTIFACT}; report: {cfg.run.report_dir / 'packing_report.md'}")


def build_parser() -> argparse.ArgumentParser:
    parser = stage_parser("pack_shuffle.py", __doc__ or "")
    add_executor_args(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    return run_cli(_run, args)


if __name__ == "__main__":
    raise SystemExit(main())
