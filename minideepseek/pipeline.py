"""The pipeline's shape, written once: every stage's name, script, package, artifact, upstream artifacts,
config class, report files and deletion hook.

``run_pipeline.sh`` (``.venv/bin/python -m minideepseek.pipeline list``), the summary, the dashboard, withdrawal,
validation and the README's layout table read this table; nothing else spells out the stage list.
This module imports no stage package (config classes and hooks are named by ``module:attr`` strings,
imported on use), so every layer may import it.

    .venv/bin/python -m minideepseek.pipeline list     # stage names in run order (run_pipeline.sh; --executor, --torchrun)
    .venv/bin/python -m minideepseek.pipeline table       # the newcomer's table (README "Layout")
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Artifact directory names under data/<run>/: the only place they are spelled out.
MIXED_RAW = "mixed_raw"
MIXED_DEDUP = "mixed_dedup"
TOKENIZER = "tokenizer"
PACKED = "packed"
SMOKE_TRAIN = "smoke_train"


@dataclass(frozen=True)
class StageSpec:
    """One stage of the chain. ``upstream`` are the artifacts it reads (their manifests' config hashes
    must match the current config's, or the stage refuses them as stale)."""

    name: str  # script stem, the ``stage`` field of its manifest, run_pipeline.sh's --from/--only value
    package: str  # minideepseek.<package>: where its code lives
    artifact: str  # data/<run>/<artifact>/ with manifest.json
    config: str  # "module:Class" of its frozen, validated config dataclass
    sections: tuple[str, ...]  # the YAML sections that class reads (besides ``run``)
    upstream: tuple[str, ...]  # artifacts it reads
    reports: tuple[str, ...]  # files it publishes under reports/<run>/ (the .md is the one to read first)
    # How a withdrawal drops documents from this artifact and refreshes its reports ("module:function",
    # called by withdraw/run.py through StageRun); None: the artifact is rebuilt instead (the model).
    remove_ids: str | None = None
    runner: str = ""  # "module:function": run(cfg, upstream_hashes, config_path, force=, executor=) -> Manifest
    executor: bool = True  # takes --executor local|ray (the CPU stages)
    # run_pipeline.sh launches NPROC ranks of it (``--nproc``, no TCP rendezvous) when NPROC > 1; the name
    # (and ``list --torchrun``) is kept for the scripts that read it
    torchrun: bool = False

    @property
    def script(self) -> str:
        return f"{self.name}.py"

    def config_class(self) -> type:
        return _ref(self.config)

    def md_reports(self) -> tuple[str, ...]:
        return tuple(r for r in self.reports if r.endswith(".md"))


def _ref(ref: str) -> Any:
    mod, attr = ref.split(":")
    return getattr(importlib.import_module(mod), attr)


STAGES: tuple[StageSpec, ...] = (
    StageSpec("mix_sampler", "sampling", MIXED_RAW, "minideepseek.sampling.config:MixSamplerConfig",
              ("sources", "extract", "sampler", "demo_corpus"), (),
              # quality_report.*: written when a source's chain has a `quality` filter
              ("source_mix.json", "source_mix.md", "filter_report.json", "filter_report.md",
               "quality_report.json", "quality_report.md"),
              "minideepseek.sampling.remove:remove_from_mixed_raw", "minideepseek.sampling.stage:run_mix_sampler"),
    StageSpec("cross_source_dedup", "crossdedup", MIXED_DEDUP, "minideepseek.crossdedup.config:DedupStageConfig",
              ("dedup", "decontam", "canaries"), (MIXED_RAW,),
              ("dedup_report.json", "dedup_report.md", "contamination_report.json", "contamination_report.md",
               "data_profile.json", "data_profile.md", "certificate.json", "certificate.md"),
              "minideepseek.crossdedup.remove:remove_from_mixed_dedup", "minideepseek.crossdedup.stage:run_dedup"),
    StageSpec("train_tokenizer", "tokenizer", TOKENIZER, "minideepseek.tokenizer.config:TokenizerStageConfig",
              ("tokenizer",), (MIXED_DEDUP,), ("tokenizer_eval.json", "tokenizer_eval.md"),
              "minideepseek.tokenizer.remove:remove_from_tokenizer", "minideepseek.tokenizer.stage:run_tokenizer"),
    StageSpec("pack_shuffle", "packing", PACKED, "minideepseek.packing.config:PackStageConfig",
              ("pack",), (MIXED_DEDUP, TOKENIZER), ("packing_report.json", "packing_report.md"),
              "minideepseek.packing.remove:remove_from_packed", "minideepseek.packing.stage:run_pack"),
    StageSpec("smoke_train", "train", SMOKE_TRAIN, "minideepseek.train.config:TrainStageConfig",
              ("train",), (PACKED, TOKENIZER),
              # mixture.*: the realized mix per phase and per-source validation loss (a by-source packed dataset)
              ("smoke_train.json", "smoke_train.md", "smoke_train_loss.png", "mixture.json", "mixture.md", "mixture.png"),
              runner="minideepseek.train.stage:run_smoke_train", executor=False, torchrun=True),
)
# Not a stage of the chain: withdraw.py edits the artifacts above in place. Its config is validated
# with theirs so a typo in ``withdraw:`` fails before stage 1.
WITHDRAW_CONFIG = "minideepseek.withdraw.config:WithdrawStageConfig"

# Import layers, lowest first: a package may import packages of its own layer or below, never above
# (tests/test_layers.py walks the imports). Shared floors sit under the stages; the chain's packages
# follow in run order; the clients of every stage (withdrawal, summary, dashboard) sit on top.
SHARED_PACKAGES = ("extract", "filters", "sources", "dedup", "demo_corpus", "classifier")
CLIENT_PACKAGES = ("export", "withdraw", "dashboard", "quality")


def report(name: str) -> str:
    """The file name of a stage's report, for a client that reads it (summary, dashboard, bill, withdrawal,
    README figures): checked against the registry, so a report a stage renames or stops publishing fails
    at the client's import (and in the tests), not as a silently empty panel. The registry's lists are
    checked against what each stage writes (tests/test_layers.py)."""
    if not any(name in s.reports for s in STAGES):
        raise KeyError(f"no stage publishes a report named {name!r}; the registry lists: "
                       f"{', '.join(r for s in STAGES for r in s.reports)}")
    return name


def report_owner(name: str) -> StageSpec:
    """The stage that writes report ``name`` (it lives in that stage's artifact directory too)."""
    return next(s for s in STAGES if report(name) in s.reports)


def entry(spec: StageSpec) -> Any:
    """The stage's ``run(cfg, upstream_hashes, config_path, force=, executor=)`` (``StageSpec.runner``)."""
    return _ref(spec.runner)


def summary_line(spec: StageSpec) -> Any:
    """``summary_line(cfg, manifest)`` of the stage's package: what its script prints when done."""
    return _ref(f"minideepseek.{spec.package}.stage:summary_line")


def strict_gate(spec: StageSpec) -> Any:
    """``strict_failure(cfg, manifest) -> str | None`` of the stage's package, if it has one: a missed target
    that the config made binding (stage 1's ``sampler.strict``)."""
    try:
        return _ref(f"minideepseek.{spec.package}.stage:strict_failure")
    except AttributeError:
        return None


def hook(spec: StageSpec) -> Any:
    """The stage's withdrawal hook (``remove_ids``), imported on use."""
    assert spec.remove_ids, spec.name
    return _ref(spec.remove_ids)


def names() -> tuple[str, ...]:
    return tuple(s.name for s in STAGES)


def artifacts() -> tuple[str, ...]:
    return tuple(s.artifact for s in STAGES)


def stage(name: str) -> StageSpec:
    """The stage called ``name`` (its script stem, e.g. ``pack_shuffle``) or producing artifact ``name``."""
    for s in STAGES:
        if name in (s.name, s.artifact, s.script):
            return s
    raise KeyError(f"no stage {name!r}; stages: {', '.join(names())}")


def producer(artifact: str) -> StageSpec:
    return stage(artifact)


def layer_of(package: str) -> int:
    """Import layer of ``minideepseek.<package>`` (0 = shared floors; 1..5 the stages; 6 the clients)."""
    if package in SHARED_PACKAGES:
        return 0
    for i, s in enumerate(STAGES, start=1):
        if s.package == package:
            return i
    if package in CLIENT_PACKAGES:
        return len(STAGES) + 1
    raise KeyError(package)


class Plan:
    """One config file + ``--set`` overrides, parsed once: every stage's validated config, and the config
    hash each artifact must carry under this command (what a downstream stage compares with its upstream
    manifest to refuse a stale input)."""

    def __init__(self, config: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> None:
        self.config_path = str(config)
        self.overrides = list(overrides)
        self._configs: dict[str, Any] = {}

    def config(self, name: str, quiet: bool = True) -> Any:
        """The validated config of stage ``name`` (built from the once-parsed file; cached)."""
        from .runconfig import load_stage_config

        key = stage(name).name if name != "withdraw" else "withdraw"
        if key not in self._configs:
            cls = _ref(WITHDRAW_CONFIG) if key == "withdraw" else stage(key).config_class()
            self._configs[key] = load_stage_config(cls, self.config_path, self.overrides, quiet=True)
        if not quiet:
            from .runconfig import log_config

            log_config(self._configs[key], self.config_path)
        return self._configs[key]

    def config_hash(self, artifact: str) -> str:
        from .config import config_hash

        return config_hash(self.config(producer(artifact).name))

    def upstream_hashes(self, name: str) -> dict[str, str]:
        """Artifact -> expected config hash, for the artifacts stage ``name`` reads."""
        return {a: self.config_hash(a) for a in stage(name).upstream}

    def expected_hashes(self) -> dict[str, str]:
        """Every artifact -> the config hash its manifest must carry under this command."""
        return {a: self.config_hash(a) for a in artifacts()}

    def validate_all(self, only: list[str] | None = None) -> dict[str, Any]:
        """Build every (or the named) stage's config; one ConfigError listing every problem found."""
        from .config import ConfigError

        out, errors = {}, []
        for name in (*names(), "withdraw"):
            if only is not None and name not in only:
                continue
            try:
                out[name] = self.config(name)
            except ConfigError as exc:
                if str(exc) not in errors:
                    errors.append(str(exc))
        if errors:
            raise ConfigError(errors[0] if len(errors) == 1 else
                              f"{len(errors)} problems in {self.config_path}: " + " | ".join(errors))
        return out


def layout_table() -> str:
    """Markdown: for each stage its script, package, config sections, artifact and reports."""
    rows = ["| # | stage script | package | config sections | reads | writes (`data/<run>/`) "
            "| reports (`reports/<run>/`) |",
            "|---|---|---|---|---|---|---|"]
    for i, s in enumerate(STAGES, start=1):
        reps = ", ".join(f"`{r}`" for r in s.reports if not r.endswith(".json"))
        reads = " + ".join(f"`{a}/`" for a in s.upstream) or "the recipe's sources"
        launch = " (torchrun)" if s.torchrun else ""
        rows.append(f"| {i} | `{s.script}`{launch} | `minideepseek/{s.package}/` | "
                    f"{', '.join(f'`{x}:`' for x in ('run', *s.sections))} | {reads} | `{s.artifact}/` | {reps} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=".venv/bin/python -m minideepseek.pipeline", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["list", "artifacts", "table"])
    p.add_argument("--executor", action="store_true", help="list: only the stages that take --executor")
    p.add_argument("--torchrun", action="store_true", help="list: only the stages launched under torchrun")
    args = p.parse_args(argv)
    if args.what == "list":
        print(" ".join(s.name for s in STAGES if (s.executor or not args.executor) and (s.torchrun or not args.torchrun)))
    elif args.what == "artifacts":
        print(" ".join(artifacts()))
    else:
        print(layout_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
