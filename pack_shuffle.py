"""Stage 4: tokenize mixed_dedup with our tokenizer, pack into SEQ_LEN blocks (one <|endoftext|>
after every document, tail carried across batches), shuffle, write bounded .arrow shards.

    .venv/bin/python pack_shuffle.py --config configs/demo.yaml
    .venv/bin/python pack_shuffle.py --config configs/demo.yaml --set pack.seq_len=2048 --set pack.tail=pad

Writes data/<run>/packed/ (a datasets directory: input_ids uint32[seq_len] + per-block document
spans doc_ids/starts/ends/doc_token_start) and reports/<run>/packing_report.{json,md}.
Open it with datasets.load_from_disk, or memory-map a shard: pa.ipc.open_stream(pa.memory_map(f)).
"""

from __future__ import annotations

from minideepseek.cli import stage_script

build_parser, main = stage_script("pack_shuffle", __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
