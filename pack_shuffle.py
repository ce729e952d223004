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

from minideepseek.cli import build_stage_parser, open_executor, stage_main, stage_plan


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
    from minideepseek.packing.stage import ARTIFACT, run_pack
    plan, cfg = stage_plan(args, "pack_shuffle")
    with open_executor(args) as ex:
        man = run_pack(cfg, plan.upstream_hashes("pack_shuffle"), args.config, force=args.force, executor=ex)
    c = man["counters"]
    tail = (f"dropped tail {c['dropped_tail_tokens']:,} tokens" if cfg.pack.tail == "drop"
            else f"{c['pad_tokens']:,} pad tokens")
    print(f"packed: {c['docs']:,} docs, {c['tokens_produced']:,} tokens -> {c['blocks']:,} blocks of {c['seq_len']:,} "
          f"(efficiency {100 * c['packing_efficiency']:.3f}%, {tail}) in {c['shards']} shard(s) at "
          f"{cfg.run.run_dir / ARTIFACT}; report: {cfg.run.report_dir / 'packing_report.md'}")


def build_parser() -> argparse.ArgumentParser:
    return build_stage_parser("pack_shuffle.py", __doc__ or "")


def main(argv: list[str] | None = None) -> int:
    return stage_main(build_parser(), _run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
