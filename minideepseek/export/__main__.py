"""Export a run's packed data to a trainer's format.

    .venv/bin/python -m minideepseek.export megatron --config configs/demo.yaml [--set run.name=...] [--out DIR]

Writes DIR (default data/<run>/export/megatron) with <source>.bin/.idx per source, blend.json and
data_path.txt: pass `--data-path $(cat DIR/data_path.txt)` to Megatron-LM's pretrain_gpt.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cli import run_cli, setup_logging, stage_parser
from ..packing.config import PackStageConfig
from ..runconfig import load_stage_config
from .megatron import export_megatron


def _run(args: argparse.Namespace) -> None:
    cfg = load_stage_config(PackStageConfig, args.config, args.overrides)
    out = Path(args.out) if args.out else cfg.run.run_dir / "export" / "megatron"
    blend = export_megatron(cfg.run.run_dir, out)
    print(f"megatron export: {len(blend['sources'])} source(s) in {out}; --data-path {blend['data_path']}")


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(".venv/bin/python -m minideepseek.export", __doc__ or "")
    parser.add_argument("format", choices=["megatron"], help="target format")
    parser.add_argument("--out", default=None, help="output folder (default data/<run>/export/megatron)")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    return run_cli(_run, args)


if __name__ == "__main__":
    raise SystemExit(main())
