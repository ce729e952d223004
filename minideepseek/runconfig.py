"""The ``run:`` section shared by every stage, and loading one stage's config from a YAML file.

A YAML file holds the sections of all stages. Each stage builds its own frozen dataclass from the
sections it needs; a top-level key that no stage knows is an error (a typo such as ``sampeler:``
must not be silently ignored).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .config import ConfigError, apply_overrides, build, is_path_name, load_yaml, require, to_plain

log = logging.getLogger(__name__)
T = TypeVar("T")

# Sections a config file may hold. Stages that do not exist yet are not listed: their keys are
# errors until the stage lands, so a config never carries settings that nothing reads.
KNOWN_SECTIONS = ("run", "sources", "extract", "sampler", "dedup", "decontam", "canaries",
                  "tokenizer",  # not-an-artifact: the config section of that name
                  "pack", "train", "withdraw", "demo_corpus")

# Pairs of keys of which a config sets exactly one. Setting one with --set drops the other from the
# YAML, so `--set sampler.target_docs=2000` works on a config written with target_tokens.
EXCLUSIVE = (("sampler", "target_docs", "target_tokens"),)


RESERVED_RUN_NAME = "examples"


@dataclass(frozen=True)
class RunConfig:
    """Where a run's artifacts and reports go, and its seed."""

    name: str = "demo"
    seed: int = 1234
    data_dir: str = "data"
    reports_dir: str = "reports"
    cache_dir: str | None = None  # demo corpus and downloads; default $MINIDEEPSEEK_CACHE or ~/.cache/minideepseek
    # The deletion-request ticket log (withdraw.py); default data/<run>/deletion_requests.jsonl. Keep it
    # with the run's records: stage 1 excludes every withdrawn document it lists on a rebuild. Its
    # content is a stage-1 input (fingerprinted), so where it lives is not part of the config hash.
    deletion_log: str | None = None
    # How a stage checks the artifacts it reads (and its own, before skipping as up to date): "sha256"
    # hashes every data file against its manifest (default; ~1 GB/s, well under a second at demo scale);
    # "size" only compares sizes, for multi-GB runs where hashing on every stage costs too much (logged).
    verify: str = "sha256"

    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("deletion_log", "verify")

    def __post_init__(self) -> None:
        require(is_path_name(self.name), f"run.name={self.name!r}: use letters, digits, '_', '-', '.' only, not dots "
                                         f"alone (it names directories under run.data_dir and run.reports_dir)")
        # reports/examples/ holds the committed example reports (scripts/regen_examples.sh): a run there
        # would overwrite tracked files
        require(self.name != RESERVED_RUN_NAME, f"run.name={self.name!r} is reserved for the committed example reports "
                f"(reports/{RESERVED_RUN_NAME}/); choose another name, e.g. --set run.name=my_run")
        require(self.seed >= 0, f"run.seed={self.seed} must be >= 0")
        require(self.verify in ("sha256", "size"), f"run.verify={self.verify!r}: choose 'sha256' (default) or 'size'")

    @property
    def run_dir(self) -> Path:
        return Path(self.data_dir) / self.name

    @property
    def report_dir(self) -> Path:
        return Path(self.reports_dir) / self.name

    @property
    def deletion_log_path(self) -> Path:
        return Path(self.deletion_log) if self.deletion_log else self.run_dir / "deletion_requests.jsonl"

    @property
    def cache_path(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir).expanduser()
        env = os.environ.get("MINIDEEPSEEK_CACHE")
        return Path(env).expanduser() if env else Path.home() / ".cache" / "minideepseek"


# One parse per process: every stage config of a run (and the stale check's expected hashes) is built
# from the same parsed tree. Keyed by the file's identity and content stamp, so an edited file is re-read.
_TREES: dict[tuple[str, int, int, tuple[str, ...]], dict[str, Any]] = {}


def load_tree(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """The YAML at ``path`` with ``--set`` overrides applied and its sections checked (a deep copy of the
    process-wide cached parse)."""
    p = Path(path)
    try:
        st = p.stat()
        key = (str(p.resolve()), st.st_mtime_ns, st.st_size, tuple(overrides or ()))
    except OSError:
        key = None  # load_yaml names the missing file
    if key is None or key not in _TREES:
        data = load_yaml(path)
        set_keys = {o.split("=", 1)[0].strip() for o in overrides or []}
        for section, a, b in EXCLUSIVE:
            for mine, other in ((a, b), (b, a)):
                sec = data.get(section)
                if f"{section}.{mine}" in set_keys and f"{section}.{other}" not in set_keys and isinstance(sec, dict):
                    if sec.pop(other, None) is not None:
                        log.info("--set %s.%s replaces %s.%s from %s", section, mine, section, other, path)
        data = apply_overrides(data, overrides or [])
        unknown = sorted(set(data) - set(KNOWN_SECTIONS))
        if unknown:
            raise ConfigError(f"unknown section(s) {unknown} in {path}; valid sections: {list(KNOWN_SECTIONS)}")
        if key is None:
            return data
        _TREES[key] = data
    return copy.deepcopy(_TREES[key])


def load_stage_config(cls: type[T], path: str | Path, overrides: list[str] | None = None, quiet: bool = False) -> T:
    """Load ``path``, apply ``--set`` overrides, check sections, build ``cls`` from its sections."""
    data = load_tree(path, overrides)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    subset = {k: v for k, v in data.items() if k in names}
    cfg = build(cls, subset, where=Path(path).stem)
    if not quiet:
        log_config(cfg, path)
    return cfg


# The figures that size a run, by section: the INFO digest names those the stage's config has.
_TARGETS = (("sampler", ("target_docs", "target_tokens")), ("dedup", ("threshold",)),
            ("tokenizer", ("vocab_size",)),  # not-an-artifact: the config section
            ("pack", ("seq_len",)), ("train", ("max_steps", "n_layer", "d_model")))


def config_digest(cfg: object) -> str:
    """One line: run name, seed, config hash, and the targets this stage's config sets."""
    from .config import config_hash

    run = getattr(cfg, "run", None)
    parts = []
    for section, keys in _TARGETS:
        sec = getattr(cfg, section, None)
        for k in keys:
            v = getattr(sec, k, None) if sec is not None else None
            if v is not None:
                parts.append(f"{section}.{k}={v:,}" if isinstance(v, int) and not isinstance(v, bool)
                             else f"{section}.{k}={v}")
    sources = getattr(cfg, "sources", None)
    if sources:
        parts.append("sources " + "/".join(f"{s.name}:{s.weight:g}" for s in sources))
    name = getattr(run, "name", "?")
    seed = getattr(run, "seed", "?")
    return f"run {name} (seed {seed}), config {config_hash(cfg)[:12]}: " + (", ".join(parts) or "no targets")


def log_config(cfg: object, path: str | Path) -> None:
    """The resolved config: a one-line digest at INFO, the whole tree as indented YAML at DEBUG."""
    import yaml

    log.info("config %s: %s", path, config_digest(cfg))
    if log.isEnabledFor(logging.DEBUG):
        text = yaml.safe_dump(to_plain(cfg), sort_keys=False, allow_unicode=True, default_flow_style=False, indent=2)
        log.debug("resolved config (%s):\n%s", path, text.rstrip())


def _main(argv: list[str] | None = None) -> int:
    """``.venv/bin/python -m minideepseek.runconfig CONFIG [--set k=v ...]``: print where a run's outputs go."""
    import argparse

    p = argparse.ArgumentParser(description=_main.__doc__)
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args(argv)
    data = apply_overrides(load_yaml(args.config), args.overrides)
    run = build(RunConfig, data.get("run") or {}, "run")
    print(f"artifacts: {run.run_dir}/   reports: {run.report_dir}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
