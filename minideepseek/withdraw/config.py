"""``withdraw:`` config: how deletion requests are resolved, applied and verified."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import require
from ..runconfig import RunConfig


@dataclass(frozen=True)
class WithdrawConfig:
    # Share of the tokenizer's training documents withdrawn at which it must be retrained (the seed's
    # "若删除比例较大，评估是否重训 tokenizer"). Below it the vocabulary stays (byte-identical), which
    # keeps every untouched packed shard valid; above it the tool stops short of retraining unless
    # --retrain-tokenizer is given: a retrain re-tokenizes and re-packs everything.
    retrain_share: float = 0.01
    # A request (other than --source) that matches more documents than this stops before changing
    # anything: a too-short fragment or a broad URL prefix must not silently wipe a corpus.
    max_docs: int = 100
    # Also withdraw the documents stage 2 recorded as exact/near duplicates of a withdrawn one (either
    # direction): a near-copy carries the same content, and verification would find it.
    duplicates: bool = True
    # Verification: a remaining document (or the packed token stream) that holds >= `containment` of
    # a withdrawn document's word n-grams (or token-id n-grams) is reported as a trace.
    ngram: int = 13
    token_ngram: int = 16
    containment: float = 0.5

    def __post_init__(self) -> None:
        require(0.0 < self.retrain_share <= 1.0, f"withdraw.retrain_share={self.retrain_share}: use a share in (0, 1]")
        require(self.max_docs >= 1, "withdraw.max_docs must be >= 1 (100 default)")
        require(3 <= self.ngram <= 64, f"withdraw.ngram={self.ngram}: use 3..64 (13 default, as decontamination)")
        require(4 <= self.token_ngram <= 256, f"withdraw.token_ngram={self.token_ngram}: use 4..256 (16 default)")
        require(0.0 < self.containment <= 1.0, f"withdraw.containment={self.containment}: use a share in (0, 1]")


@dataclass(frozen=True)
class WithdrawStageConfig:
    run: RunConfig = field(default_factory=RunConfig)
    withdraw: WithdrawConfig = field(default_factory=WithdrawConfig)
