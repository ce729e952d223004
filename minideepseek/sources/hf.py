"""``type: hf`` — a Hugging Face dataset streamed with ``datasets.load_dataset(streaming=True)``.

* Sampling order: ``IterableDataset.shuffle(seed, buffer_size)``; the first N rows of a hub stream
  are its first shard, so taking them is biased. The seed depends on (run seed, source, epoch).
* Transient errors (connection resets, timeouts, HTTP 5xx surfacing as OSError) are retried with
  exponential backoff; the stream is reopened and the rows already yielded are skipped, which is
  exact because the shuffled order is deterministic for a given seed.
* No remote code: datasets >= 4 no longer executes dataset scripts, and we never pass
  ``trust_remote_code``.
* Offline tests drive this same class with ``path: json`` and local ``data_files``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..config import ConfigError, config_hash
from ..records import RawDoc
from ..rng import rng_for
from ..stage import InputRef
from .config import SourceConfig
from .local import row_to_raw

log = logging.getLogger(__name__)

TRANSIENT = (ConnectionError, TimeoutError, OSError)


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
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.seed = seed
        self._opener = opener
        self._sleep = sleep
        self.retries_used = 0

    def input_ref(self) -> InputRef:
        # A hub dataset cannot be checksummed without reading it; its identity is repo + config +
        # revision (pin `revision:` for a reproducible run).
        ident = {"path": self.cfg.path, "config": self.cfg.config_name, "split": self.cfg.split,
                 "data_dir": self.cfg.data_dir,
                 "revision": self.cfg.revision, "data_files": list(self.cfg.data_files)}
        return InputRef(name=f"source:{self.name}", path=self.cfg.path, fingerprint=config_hash(ident), detail=ident)

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
