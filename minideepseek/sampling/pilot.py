"""The seeded pilot that turns a ``quality`` filter's ``top_fraction`` into a score threshold.

DCLM keeps the top ~10% of documents by classifier score. Ranking a whole source first would make
stage 1 two passes (and a streamed source cannot be ranked at all), so before a source's quota is
counted we score a pilot: the first ``pilot_docs`` documents of its epoch-1 sampling order (a seeded
uniform sample: that order is a seeded permutation) that pass the filters placed before the quality
filter, and set ``pilot_threshold`` to the pilot scores' ``1 - top_fraction`` quantile. The pass that
follows is the usual one, with a fixed threshold, so the quota arithmetic is unchanged and exact; the
kept share matches ``top_fraction`` within the pilot's sampling error, and the filter report shows the
threshold, the pilot size and the share realized.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ..config import build
from ..filters.quality import QualityConfig, QualityFilter
from ..metrics import quantile
from ..records import Reject
from .process import ProcessSettings, process_batch

log = logging.getLogger(__name__)


def _quality_index(specs: tuple[dict[str, Any], ...]) -> int | None:
    for i, spec in enumerate(specs):
        if spec.get("type") == "quality" and spec.get("top_fraction") is not None:
            return i
    return None


def needs_pilot(settings: ProcessSettings) -> bool:
    """Whether the chain has a top_fraction quality filter (a pilot to run)."""
    return _quality_index(settings.filters) is not None


def resolve_top_fraction(settings: ProcessSettings, iter_raw: Any, batch_size: int,
                         pool: Any = None) -> tuple[ProcessSettings, dict[str, Any] | None]:
    """``settings`` with the first top_fraction quality filter's ``pilot_threshold`` set, and the pilot's
    record for the report (None when the chain has no such filter). One top_fraction filter per chain."""
    idx = _quality_index(settings.filters)
    if idx is None:
        return settings, None
    spec = dict(settings.filters[idx])
    cfg = build(QualityConfig, {k: v for k, v in spec.items() if k != "type"}, f"sources.{settings.source}.quality")
    qf = QualityFilter(cfg)
    before = dataclasses.replace(settings, filters=settings.filters[:idx])
    scores: list[float] = []
    read = 0
    it = iter_raw(1)
    while len(scores) < cfg.pilot_docs:
        raws = [r for _, r in zip(range(batch_size), it)]
        if not raws:
            break
        read += len(raws)
        if pool is not None:
            n = max(1, len(raws) // 4)
            futs = [pool.submit(process_batch, (raws[i:i + n], before)) for i in range(0, len(raws), n)]
            items = [x for f in futs for x in f.result()]
        else:
            items = process_batch((raws, before))
        for item in items:
            if not isinstance(item, Reject) and len(scores) < cfg.pilot_docs:
                scores.append(round(qf.score(item["text"]), 6))  # rounded as the filter decides
    close = getattr(it, "close", None)
    if close is not None:
        close()
    if not scores:
        threshold = 0.0  # nothing reaches the filter: any threshold keeps nothing; the source's emptiness is reported
    else:
        threshold = quantile(scores, 1.0 - cfg.top_fraction)
    spec["pilot_threshold"] = threshold
    filters = (*settings.filters[:idx], spec, *settings.filters[idx + 1:])
    info = {"filter_index": idx, "top_fraction": cfg.top_fraction, "pilot_docs": len(scores), "records_read": read,
            "threshold": round(threshold, 6),
            "pilot_kept_share": round(sum(s >= threshold for s in scores) / len(scores), 4) if scores else None}
    log.info("source %s: quality top_fraction %.3f -> threshold %.4f from a pilot of %s documents",
             settings.source, cfg.top_fraction, threshold, f"{len(scores):,}")
    return dataclasses.replace(settings, filters=filters), info
