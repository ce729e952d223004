"""Validate every stage's section of a config file at once, before any stage runs.

``run_pipeline.sh`` calls ``python -m minideepseek.validate --config C --set ...`` before stage 1, and
every stage script validates the whole file too, so a typo in a later section (an invalid
``tokenizer.vocab_size``) is reported in a second, not after minutes of stages 1-2. Also the config
hashes every artifact must have under the current command, for the stale-upstream check.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from .config import ConfigError, config_hash

# (stage script, artifact, config class). The stage registry of issue 17 will own this table.
STAGES: tuple[tuple[str, str, str], ...] = (
    ("mix_sampler", "mixed_raw", "minideepseek.sampling.config:MixSamplerConfig"),
    ("cross_source_dedup", "mixed_dedup", "minideepseek.crossdedup.config:DedupStageConfig"),
    ("train_tokenizer", "tokenizer", "minideepseek.tokenizer.config:TokenizerStageConfig"),
    ("pack_shuffle", "packed", "minideepseek.packing.config:PackStageConfig"),
    ("smoke_train", "smoke_train", "minideepseek.train.config:TrainStageConfig"),
    ("withdraw", "", "minideepseek.withdraw.config:WithdrawStageConfig"),
)


def _cls(ref: str) -> type:
    mod, name = ref.split(":")
    return getattr(importlib.import_module(mod), name)


def validate_all(config: str | Path, overrides: list[str] | tuple[str, ...] = (),
                 stages: list[str] | None = None) -> dict[str, Any]:
    """Build every (or the named) stage's config; one ConfigError listing every problem found."""
    from .runconfig import load_stage_config

    out, errors = {}, []
    for stage, _, ref in STAGES:
        if stages is not None and stage not in stages:
            continue
        try:
            out[stage] = load_stage_config(_cls(ref), config, list(overrides), quiet=True)
        except ConfigError as exc:
            msg = str(exc)
            if msg not in errors:
                errors.append(msg)
    if errors:
        raise ConfigError(errors[0] if len(errors) == 1 else
                          f"{len(errors)} problems in {config}: " + " | ".join(errors))
    return out


def expected_hashes(config: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """Artifact name -> the config hash its manifest must carry under this command."""
    cfgs = validate_all(config, overrides, [s for s, a, _ in STAGES if a])
    return {a: config_hash(cfgs[s]) for s, a, _ in STAGES if a and s in cfgs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m minideepseek.validate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--stages", default=None, help="comma-separated stage names (default: all)")
    args = p.parse_args(argv)
    try:
        validate_all(args.config, args.overrides, args.stages.split(",") if args.stages else None)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
