"""``type: hf`` — a Hugging Face dataset streamed with ``datasets.load_dataset(streaming=True)``.

* Sampling order: ``IterableDataset.shuffle(seed, buffer_size)``; the first N rows of a hub stream
  are its first shard, so taking them is biased. The seed depends on (run seed, source, epoch).
* Transient errors (connection resets, timeouts, HTTP 5xx surfacing as OSError) are retried with
  exponential backoff; the stream is reopened and the rows already yielded are skipped, which is
  exact because the shuffled order is deterministic for a given seed.
* No remote code: datasets >= 4 no longer executes dataset scripts, and we never pass
  ``trust_remote_code``.
* Pinned by revision: a hub repo is read at one commit. ``revision:`` should be a commit SHA (the
  recipe pins one per dataset: ``python -m minideepseek.sources.hub_pin CONFIG`` writes them); a
  branch or tag (or none: the default branch) is resolved to its commit SHA once, when the stage
  starts, and the stream reads exactly that commit. The source's fingerprint is that SHA (with repo,
  config, split, data_dir, data_files), so a dataset that moved on makes stage 1 stale, never quietly
  different; an unpinned source says so in the log. A builder with URLs (``path: json`` +
  ``data_files``) has no commit: its identity is its URLs (pin versioned URLs).
* Offline tests drive this same class with ``path: json`` and local ``data_files``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..artifact import InputRef
from ..config import ConfigError, config_hash
from ..fsio import printable
from ..records import RawDoc
from ..rng import rng_for
from .config import SourceConfig
from .local import row_to_raw

log = logging.getLogger(__name__)

TRANSIENT = (ConnectionError, TimeoutError, OSError)


_SHA = re.compile(r"[0-9a-f]{40}")
# datasets' packaged builders: a path that names one reads data_files, not a hub repo
BUILDERS = ("json", "csv", "parquet", "arrow", "text", "xml", "webdataset", "imagefolder", "audiofolder", "pandas")


def is_hub_repo(path: str) -> bool:
    return path not in BUILDERS and "/" in path and not Path(path).expanduser().exists()


def hub_commit(repo: str, revision: str | None) -> str:
    """The commit SHA ``revision`` (a branch, tag or None: the default branch) of dataset ``repo`` is at now."""
    from huggingface_hub import HfApi

    return str(HfApi().dataset_info(repo, revision=revision).sha)


def _open_stream(cfg: SourceConfig) -> Any:
    import datasets

    kwargs: dict[str, Any] = {"split": cfg.split, "streaming": True}
    if cfg.config_name:
        kwargs["name"] = cfg.config_name
    if cfg.data_dir:
        kwargs["data_dir"] = cfg.data_dir
    if cfg.data_files:
        kwargs["data_files"] = list(cfg.data_files)
    if cfg.revision:
        kwargs["revision"] = cfg.revision
    return datasets.load_dataset(cfg.path, **kwargs)


class HFSource:
    def __init__(self, cfg: SourceConfig, seed: int, opener: Callable[[SourceConfig], Any] = _open_stream,
                 sleep: Callable[[float], None] = time.sleep,
                 resolver: Callable[[str, str | None], str] = hub_commit) -> None:
        self.name = cfg.name
        self.seed = seed
        self._opener = opener
        self._sleep = sleep
        self.retries_used = 0
        self.requested_revision = cfg.revision
        self.cfg = self._pin(cfg, resolver)

    def _pin(self, cfg: SourceConfig, resolver: Callable[[str, str | None], str]) -> SourceConfig:
        """``cfg`` with its revision as a commit SHA (hub repos): what is fingerprinted is what is streamed."""
        if not is_hub_repo(cfg.path) or (cfg.revision and _SHA.fullmatch(cfg.revision)):
            return cfg
        try:
            sha = resolver(cfg.path, cfg.revision)
        except Exception as exc:  # noqa: BLE001 - offline, no such repo or revision, hub errors
            raise ConfigError(f"source {cfg.name}: cannot resolve revision {cfg.revision or '(default branch)'} of "
                              f"dataset {cfg.path} to a commit ({type(exc).__name__}: {printable(str(exc))[:200]}); "
                              f"pin sources.{cfg.name}.revision to a commit SHA (python -m "
                              f"minideepseek.sources.hub_pin CONFIG writes them)") from None
        if not _SHA.fullmatch(sha):
            raise ConfigError(f"source {cfg.name}: the hub answered {printable(sha)!r} for the commit of {cfg.path}")
        log.warning("source %s: %s is not pinned (revision %s); reading commit %s. Pin it for a reproducible run: "
                    "python -m minideepseek.sources.hub_pin CONFIG", cfg.name, cfg.path, cfg.revision or "default",
                    sha)
        return dataclasses.replace(cfg, revision=sha)

    def input_ref(self) -> InputRef:
        # A hub dataset cannot be checksummed without reading it; its identity is repo + config + the commit
        # SHA it is read at (resolved in _pin), so a dataset that moved on is a new input.
        ident = {"path": self.cfg.path, "config": self.cfg.config_name, "split": self.cfg.split,
                 "data_dir": self.cfg.data_dir,
                 "revision": self.cfg.revision, "data_files": list(self.cfg.data_files)}
        detail = {**ident, "requested_revision": self.requested_revision}
        return InputRef(name=f"source:{self.name}", path=self.cfg.path, fingerprint=config_hash(ident), detail=detail)

    def _stream(self, epoch: int, skip: int) -> Iterator[dict[str, Any]]:
        ds = self._opener(self.cfg)
        shuffle_seed = int(rng_for(self.seed, "hf", self.name, epoch).integers(0, 2**32 - 1))
        ds = ds.shuffle(seed=shuffle_seed, buffer_size=self.cfg.shuffle_buffer)
        if skip:
            ds = ds.skip(skip)
        return iter(ds)

    def iter_raw(self, epoch: int) -> Iterator[RawDoc]:
        yielded = 0
        attempt = 0
        checked_fields = False
        while True:
            try:
                for row in self._stream(epoch, yielded):
                    if not checked_fields:
                        self._check_fields(row)
                        checked_fields = True
                    raw = row_to_raw(row, f"{self.cfg.path}:{self.cfg.split}#e{epoch}:{yielded}", self.cfg)
                    yielded += 1
                    attempt = 0  # progress resets the retry budget
                    yield raw
                return
            except ConfigError:
                raise
            except TRANSIENT as exc:
                if attempt >= self.cfg.max_retries:
                    raise RuntimeError(
                        f"source {self.name}: stream failed {attempt + 1} times in a row after {yielded:,} rows "
                        f"({type(exc).__name__}: {exc}); check the network or raise sources.{self.name}.max_retries"
                    ) from exc
                delay = self.cfg.retry_backoff_s * (2**attempt)
                attempt += 1
                self.retries_used += 1
                log.warning("source %s: %s after %s rows; retry %d/%d in %.1f s", self.name,
                            type(exc).__name__, f"{yielded:,}", attempt, self.cfg.max_retries, delay)
                self._sleep(delay)

    def _check_fields(self, row: dict[str, Any]) -> None:
        """Fail early on a wrong text_field: the seed's most common mistake (``content`` vs ``text``)."""
        if self.cfg.text_field not in row:
            raise ConfigError(
                f"source {self.name}: rows of {self.cfg.path} have no field {self.cfg.text_field!r}; "
                f"fields are {sorted(row)}; set sources.{self.name}.text_field to one of them")
