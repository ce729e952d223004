"""Sources of raw documents: ``hf`` (hub streaming), ``local`` (files), ``warc`` (Common Crawl WARC/WET files)
and ``demo`` (offline corpus)."""

from __future__ import annotations

from pathlib import Path

from .base import Source
from .config import SourceConfig, check_recipe
from .demo import DemoSource
from .hf import HFSource
from .local import LocalSource
from .warc import WarcSource

__all__ = ["Source", "SourceConfig", "check_recipe", "make_source"]


def make_source(cfg: SourceConfig, seed: int, cache_dir: Path, demo_tiers: tuple[str, ...],
                max_chars: int = 2_000_000) -> Source:
    if cfg.type == "hf":
        return HFSource(cfg, seed)
    if cfg.type == "local":
        return LocalSource(cfg, seed, max_chars)
    if cfg.type == "warc":
        return WarcSource(cfg, seed, max_chars)
    return DemoSource(cfg, seed, cache_dir, demo_tiers)
