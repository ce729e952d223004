"""Automatic sizing: a setting the data cannot support is lowered to what it can, said once in the log,
recorded in the stage's manifest (``sizing``) and listed in the run's ``summary.md``.

A config is written before the data is seen; a user's folder of 200 documents cannot reach a 150K
vocabulary, fill 16 validation blocks of 4,096 tokens, or feed 80 training steps without repeating itself
dozens of times. Instead of failing one stage at a time, each stage lowers what it must (the vocabulary
to what the sample reaches, the block length to what fills enough blocks, validation blocks to a share of
the blocks, training steps to ``train.max_epochs`` passes) and says so. A run that wants the configured
values or nothing turns each off (``tokenizer.allow_smaller_vocab: false``, ``pack.auto_seq_len: false``,
``train.auto_size: false``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger("minideepseek.sizing")


@dataclass(frozen=True)
class Sizing:
    """One automatic decision: ``setting`` was ``configured`` and ``used`` is what the stage used, because ``why``."""

    stage: str
    setting: str
    configured: Any
    used: Any
    why: str
    warning: bool = False  # a decision the user should act on (e.g. the data repeated many times)

    def announce(self) -> Sizing:
        (log.warning if self.warning else log.info)("sizing: %s %s -> %s: %s", self.setting, _fmt(self.configured),
                                                    _fmt(self.used), self.why)
        return self

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def markdown_lines(decisions: list[dict[str, Any]]) -> list[str]:
    """The summary's "Automatic sizing" section (empty when nothing was resized)."""
    if not decisions:
        return []
    out = ["", "## Automatic sizing", "", "What the data could not support, and what was used instead (each stage's "
           "`manifest.json` records it under `sizing`):", "",
           "| stage | setting | configured | used | why |", "|---|---|---:|---:|---|"]
    for d in decisions:
        flag = " **(warning)**" if d.get("warning") else ""
        out.append(f"| {d['stage']} | `{d['setting']}` | {_fmt(d['configured'])} | {_fmt(d['used'])} | {d['why']}{flag} |")
    return out
