"""Stage 5's automatic sizing (``train.auto_size``, see ``minideepseek/sizing.py``): the smoke train's
settings fitted to the packed data it gets, before the first step.

- ``train.seq_len`` longer than the packed blocks: the block length (stage 4 may have shortened the
  blocks of a small run);
- ``train.val_blocks`` more than ``val_share`` of the blocks: that share (at least 1), so validation does not
  take the data the run trains on;
- ``train.max_steps`` that would read the training windows more than ``max_epochs`` times: capped there,
  with a warning (a few hundred notes would otherwise be repeated dozens of times and memorized, and the
  pass criteria would say nothing about the data); warmup shrinks with it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..config import ConfigError
from ..sizing import Sizing
from .config import TrainConfig

STAGE = "smoke_train"


def fit_to_data(tc: TrainConfig, num_blocks: int, block_len: int, world: int) -> tuple[TrainConfig, list[dict[str, Any]]]:
    """``tc`` with what the data cannot support lowered, and the decisions (``Sizing.to_json``)."""
    if not tc.auto_size:
        return tc, []
    out: list[dict[str, Any]] = []
    if num_blocks < 2:
        raise ConfigError(f"{STAGE}: the packed data holds {num_blocks} block(s) of {block_len:,} tokens: too little to "
                          f"train and validate on; add documents, or lower pack.seq_len / pack.min_seq_len")
    changes: dict[str, Any] = {}
    if tc.seq_len > block_len:
        changes["seq_len"] = block_len
        out.append(Sizing(STAGE, "train.seq_len", tc.seq_len, block_len,
                          f"the packed blocks hold {block_len:,} tokens").announce().to_json())
    seq_len = changes.get("seq_len", tc.seq_len)
    most = max(1, int(num_blocks * tc.val_share))
    val_blocks = tc.val_blocks
    if val_blocks > most:
        val_blocks = changes["val_blocks"] = most
        out.append(Sizing(STAGE, "train.val_blocks", tc.val_blocks, most,
                          f"{num_blocks:,} packed blocks: validation takes at most train.val_share={tc.val_share} of "
                          f"them").announce().to_json())
    windows = (num_blocks - val_blocks) * (block_len // seq_len)
    per_step = tc.micro_batch * tc.grad_accum * world  # training windows one optimizer step reads
    epochs = tc.max_steps * per_step / max(1, windows)
    if epochs > tc.max_epochs:
        steps = max(1, math.floor(tc.max_epochs * windows / per_step))
        changes["max_steps"] = steps
        if tc.warmup >= steps:
            changes["warmup"] = steps // 10
        if tc.stop_at_step >= steps:
            changes["stop_at_step"] = 0
        out.append(Sizing(STAGE, "train.max_steps", tc.max_steps, steps,
                          f"{tc.max_steps:,} steps x {per_step:,} windows would read the {windows:,} training windows "
                          f"{epochs:.1f} times; capped at train.max_epochs={tc.max_epochs:g} (more data, not more "
                          f"steps, makes this run say something)", warning=True).announce().to_json())
    return (dataclasses.replace(tc, **changes) if changes else tc), out
