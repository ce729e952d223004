"""Stage 1: sample documents from several sources by recipe weights.

    .venv/bin/python mix_sampler.py --config configs/demo.yaml
    .venv/bin/python mix_sampler.py --config configs/demo.yaml --set sampler.target_docs=2000 --set run.name=docs2000
    .venv/bin/python mix_sampler.py --config configs/deepseek_v3_1b.yaml      # Hugging Face hub recipe

Writes data/<run>/mixed_raw (a `datasets` directory + manifest.json + rejects.jsonl) and
reports/<run>/source_mix.{json,md}.
"""

from __future__ import annotations

from minideepseek.cli import stage_script

build_parser, main = stage_script("mix_sampler", __doc__)

if __name__ == "__main__":
    raise SystemExit(main())
