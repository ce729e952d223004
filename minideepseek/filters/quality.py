"""Model-based quality filter: a fastText classifier's probability of the "good" label.

    - {type: quality, model: models/demo_quality/model.bin, label: hq, threshold: 0.5}
    - {type: quality, model: dclm_hq.bin, label: hq, top_fraction: 0.1}   # DCLM keeps its top ~10%

``model`` is any fastText supervised ``.bin``/``.ftz`` on local disk: one ``python -m
minideepseek.quality train`` wrote, or a published one (DCLM's OH-2.5+ELI5 classifier, label ``hq``)
used unchanged. It is scored by ``fasttext-predict`` (:mod:`minideepseek.filters.fasttext_model`, the same
code the trainer's held-out report uses). The document is kept when its score is ``>= threshold``.

``top_fraction`` is DCLM's rule (keep the best-scored share of a source). Stage 1 stays one pass and
the recipe exact: before a source's quota is counted, stage 1 scores a seeded pilot (the first
``pilot_docs`` documents of the source's sampling order that pass the filters before this one) and
sets the threshold to the pilot's ``1 - top_fraction`` quantile (``pilot_threshold``, written into
the filter report with the pilot size). The kept share then equals ``top_fraction`` within the
pilot's sampling error (binomial: ~``sqrt(f(1-f)/pilot_docs)``, 0.009 for f=0.1 and 1,000 docs).

``train: configs/quality/X.yaml`` makes stage 1 build the model itself (before sampling, from the
source's raw records; rebuilt when the trainer settings, the corpus or the chain before the filter
change; :mod:`minideepseek.sampling.quality_build`). Either way stage 1's manifest lists the model file's
sha256 as an input (``quality_model:<source>``), so a changed model makes stage 1 stale.

``sha256`` pins the model file: stage 1's config hash sees the path, not the file, so without a pin a
retrained model at the same path would not make stage 1 stale. A mismatch stops the stage.

Signal: ``quality_score`` (or ``signal:``) in ``quality_signals``; drop reason ``quality_low_score``.
Cost: one fastText prediction over at most ``max_chars`` characters (measured in docs/stages.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..config import ConfigError, require
from .base import DocContext, FilterResult, register

_SIGNAL = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class QualityConfig:
    model: str = ""  # path to a fastText .bin/.ftz
    label: str = "hq"  # the positive label (with or without __label__)
    threshold: float | None = None  # keep score >= threshold ...
    top_fraction: float | None = None  # ... or keep this best-scored share of the source (pilot threshold)
    pilot_docs: int = 1000  # top_fraction: documents scored to set the threshold
    pilot_threshold: float | None = None  # set by stage 1 from the pilot (top_fraction); not a user setting
    sha256: str = ""  # optional pin of the model file
    max_chars: int = 20_000  # the scored prefix; use the trainer's max_chars
    signal: str = "quality_score"  # the signal's name (two quality filters in one chain need two names)
    # a trainer YAML (minideepseek.classifier, with `source:`): stage 1 builds `model` from that source's raw
    # records before sampling when it is missing or its build key changed (sampling/quality_build.py)
    train: str = ""

    def __post_init__(self) -> None:
        require(bool(self.model), "quality.model: set the path of a fastText .bin/.ftz classifier (train one with "
                                  "`python -m minideepseek.quality train`)")
        require((self.threshold is None) != (self.top_fraction is None),
                "quality: set exactly one of threshold (keep score >= t) or top_fraction (keep the best share, DCLM: 0.1)")
        require(self.threshold is None or 0.0 <= self.threshold <= 1.0,
                f"quality.threshold={self.threshold} must be a probability in [0, 1]")
        require(self.top_fraction is None or 0.0 < self.top_fraction <= 1.0,
                f"quality.top_fraction={self.top_fraction} must be in (0, 1], e.g. 0.1 for DCLM's top 10%")
        require(self.pilot_docs >= 50, f"quality.pilot_docs={self.pilot_docs}: use >= 50 (default 1000)")
        require(self.pilot_threshold is None or self.top_fraction is not None,
                "quality.pilot_threshold is set by stage 1 for top_fraction; use threshold: instead")
        require(not self.sha256 or re.fullmatch(r"[0-9a-f]{64}", self.sha256) is not None,
                "quality.sha256 must be the model file's 64-hex-digit sha256 (model_card.json: model_sha256)")
        require(self.max_chars >= 100, f"quality.max_chars={self.max_chars} is too small; use >= 100")
        require(not self.train or Path(self.train).is_file(),
                f"quality.train: {self.train} not found (a trainer YAML with source:, e.g. "
                "configs/quality/demo_classifier.yaml)")
        require(_SIGNAL.fullmatch(self.signal) is not None,
                f"quality.signal={self.signal!r}: a snake_case name such as quality_score")

    @property
    def keep_threshold(self) -> float | None:
        return self.threshold if self.threshold is not None else self.pilot_threshold


@register
class QualityFilter:
    """Keep documents whose classifier score reaches the threshold (fixed, or from the pilot)."""

    name: ClassVar[str] = "quality"
    Config: ClassVar[type] = QualityConfig

    def __init__(self, cfg: QualityConfig) -> None:
        self.cfg = cfg
        self._model: Any = None
        self._label = ""
        # a model stage 1 builds (train:) may not exist yet when the config is validated: loaded on first use
        if not (cfg.train and not Path(cfg.model).is_file()):
            self._load()

    def _load(self) -> None:
        from .fasttext_model import check_label, load, model_sha256

        cfg = self.cfg
        if cfg.sha256:
            have = model_sha256(cfg.model)
            if have != cfg.sha256:
                raise ConfigError(f"quality.model {cfg.model} has sha256 {have}, the config pins {cfg.sha256}: "
                                  "update quality.sha256 (the model changed) or restore the pinned file")
        self._model = load(cfg.model)
        self._label = check_label(self._model, cfg.label, cfg.model)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._load()
        return self._model

    @property
    def label(self) -> str:
        if self._model is None:
            self._load()
        return self._label

    def score(self, text: str) -> float:
        from .fasttext_model import score

        return score(self.model, text, self.label, self.cfg.max_chars)

    def __call__(self, text: str, ctx: DocContext) -> FilterResult:
        # decided on the stored value (6 decimals), so a decision recomputed from quality_signals is this one
        signals = {self.cfg.signal: round(self.score(text), 6)}
        reason = self.decide(signals, self.cfg)
        return FilterResult(keep=not reason, reason=reason, signals=signals)

    DECIDE_KEYS: ClassVar[tuple[str, ...]] = ("threshold",)

    @staticmethod
    def decide(signals: dict[str, Any], cfg: QualityConfig) -> str:
        t = cfg.keep_threshold
        if t is None:  # a config error, not a record's: stage 1 resolves top_fraction before any document
            raise ConfigError("quality.top_fraction needs stage 1's pilot (run it through mix_sampler.py)")
        return "" if signals[cfg.signal] >= t else "quality_low_score"
