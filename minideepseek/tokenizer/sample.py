"""Stratified training sample and held-out split, per source.

Per source, documents are put in a seeded order; the first ``heldout`` of them (5%, at least 10,
at most 200) are held out for evaluation and never trained on. Of the rest, ``sample_ratio`` goes
into the training sample, topped up to ``min_chars_per_source`` characters when a small source
would otherwise be under-represented (the floor is what keeps Chinese or math from vanishing under
a dominant English source). The seed's every-10th-row sample is computed alongside for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..sources.base import rng_for
from .config import TokenizerConfig


@dataclass
class Split:
    train: list[int] = field(default_factory=list)
    heldout: list[int] = field(default_factory=list)


def stratified_split(cfg: TokenizerConfig, seed: int, sources: list[str],
                     n_chars: list[int]) -> tuple[dict[str, Split], dict[str, Any]]:
    by_source: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        by_source.setdefault(s, []).append(i)
    chars = np.asarray(n_chars, dtype=np.int64)
    naive_mask = np.zeros(len(sources), dtype=bool)
    naive_mask[::10] = True  # the seed's dataset.select(range(0, len(dataset), 10))
    out: dict[str, Split] = {}
    stats: dict[str, Any] = {}
    for name in sorted(by_source):
        idx = np.asarray(by_source[name])
        order = idx[rng_for(seed, "tokenizer-sample", name).permutation(len(idx))]
        k = int(min(cfg.heldout_max_docs, max(cfg.heldout_min_docs, round(cfg.heldout_fraction * len(idx)))))
        k = min(k, max(0, len(idx) - 1))  # keep at least one document to train on
        held, rest = order[:k], order[k:]
        take = int(round(cfg.sample_ratio * len(rest)))
        cum = np.cumsum(chars[rest])
        if take < len(rest) and (take == 0 or cum[take - 1] < cfg.min_chars_per_source):
            take = max(take, int(np.searchsorted(cum, cfg.min_chars_per_source)) + 1)
        take = min(take, len(rest))
        train = sorted(rest[:take].tolist())
        out[name] = Split(train=train, heldout=sorted(held.tolist()))
        naive = idx[naive_mask[idx]]
        stats[name] = {
            "docs": len(idx), "heldout_docs": len(held), "heldout_chars": int(chars[held].sum()),
            "train_docs": len(train), "train_chars": int(chars[train].sum()),
            "floor_applied": take > int(round(cfg.sample_ratio * len(rest))),
            "every_10th_docs": int(len(naive)), "every_10th_chars": int(chars[naive].sum()),
        }
    tot = sum(v["train_chars"] for v in stats.values()) or 1
    tot10 = sum(v["every_10th_chars"] for v in stats.values()) or 1
    for v in stats.values():
        v["train_char_share"] = round(v["train_chars"] / tot, 4)
        v["every_10th_char_share"] = round(v["every_10th_chars"] / tot10, 4)
    return out, stats
