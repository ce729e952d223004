r"""Stage 3: train a ~150K lossless byte-level BPE (no normalizer, DeepSeek-V3 pre-split, ByteLevel)
on a stratified sample of mixed_dedup.

    .venv/bin/python train_tokenizer.py --config configs/demo.yaml
    .venv/bin/python train_tokenizer.py --config configs/demo.yaml --set tokenizer.vocab_size=128000 \
        --set tokenizer.normalizer=nfkc --set tokenizer.pre_tokenizer=bytelevel

Writes data/<run>/tokenizer/ (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
sample.json) and reports/<run>/tokenizer_eval.{json,md} (ours vs DeepSeek-V3 vs Qwen2.5 on
held-out documents: whole components never trained on, and random documents).
"""

from __future__ import annotations

from minideepseek.cli import stage_script

build_parser, main = stage_script("train_tokenizer", __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
