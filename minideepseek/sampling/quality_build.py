"""Stage 1 builds the quality classifier its config names: ``{type: quality, model: M, train: T.yaml}``.

    .venv/bin/python -m minideepseek.quality build --config configs/demo.yaml   # the same step, by hand

Before sampling, for every ``quality`` filter with ``train:``, the trainer YAML (keys of
:class:`minideepseek.classifier.data.QualityTrainConfig`, with ``source:`` naming the pipeline source)
is read and a **build key** computed: a hash of the trainer settings, the source's corpus fingerprint
(the pinned demo corpus file), the source's read settings, the chain before the filter, extraction and
the length limits, the seed and the trainer package's version. When ``model_card.json`` beside ``M``
records that key and ``M`` still has the card's sha256, the model is reused; otherwise it is trained
from the source's raw records: the whole first pass in the seeded sampling order, extracted and run
through the filters before the ``quality`` filter (the text the filter will score), labeled by the
trainer's ``rule``. So the model comes from the pinned corpus, never from this run's own output (no
chicken-and-egg), and a fresh clone builds it on its first run. With ``thread: 1`` and a seed the bytes
are the same on every build (tested). Every quality filter's model sha256 is one of stage 1's inputs
(``quality_model:<source>``), so a changed model makes stage 1 stale.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from ..classifier.data import QualityTrainConfig, label_rows
from ..config import ConfigError, apply_overrides, build, load_yaml, to_plain
from ..executor import LocalExecutor
from ..fsio import sha256_file
from ..records import Reject
from ..sources import make_source
from ..stage import InputRef
from .config import MixSamplerConfig
from .process import ProcessSettings, process_batch

log = logging.getLogger(__name__)

BUILD_VERSION = 1  # bump when this module's way of choosing the training documents changes
CARD_FILE = "model_card.json"
MODEL_FILE = "model.bin"
_BATCH = 64


def _trainer_version() -> str:
    try:
        from importlib.metadata import version

        return version("fasttext-new")
    except Exception:  # noqa: BLE001 - not installed: the build itself then fails with the install hint
        return ""


def trainer_config(spec: dict[str, Any], where: str, overrides: list[str] | tuple[str, ...] = ()) -> QualityTrainConfig:
    path = Path(spec["train"])
    if not path.is_file():
        raise ConfigError(f"{where}: train: {path} not found (a trainer YAML, e.g. configs/quality/demo_classifier.yaml)")
    tcfg = build(QualityTrainConfig, apply_overrides(load_yaml(str(path)), list(overrides)), f"{where}.train ({path})")
    if not tcfg.source:
        raise ConfigError(f"{where}: the trainer {path} has no `source:`; stage 1 builds from a pipeline source "
                          "(set source: to the source's name), or train it by hand and drop train:")
    if Path(tcfg.out) / MODEL_FILE != Path(spec["model"]):
        raise ConfigError(f"{where}: model: {spec['model']} is not where the trainer {path} writes "
                          f"({Path(tcfg.out) / MODEL_FILE}); make them agree")
    return tcfg


def _specs(cfg: MixSamplerConfig) -> list[tuple[str, int, dict[str, Any]]]:
    return [(s.name, i, f) for s in cfg.sources for i, f in enumerate(s.filters) if f.get("type") == "quality"]


def build_key(cfg: MixSamplerConfig, tcfg: QualityTrainConfig, source_fp: str, index: int) -> str:
    """What the model is a function of (see the module docstring)."""
    src = next(s for s in cfg.sources if s.name == tcfg.source)
    read = {k: v for k, v in to_plain(src).items() if k not in ("filters", "weight", "max_epochs")}
    return hashlib.sha256(json.dumps({
        "version": BUILD_VERSION, "trainer": to_plain(tcfg), "corpus": source_fp, "source": read,
        "chain_before": list(src.filters[:index]), "extract": to_plain(cfg.extract), "seed": cfg.run.seed,
        "min_chars": cfg.sampler.min_chars, "max_chars": cfg.sampler.max_chars, "demo_tiers": cfg.sampler.demo_tiers,
        "fasttext_new": _trainer_version()}, sort_keys=True, default=str).encode()).hexdigest()


def _documents(cfg: MixSamplerConfig, tcfg: QualityTrainConfig, src: Any, index: int) -> list[dict[str, Any]]:
    """The source's first pass in sampling order, through the chain before the quality filter: kept rows."""
    s = next(x for x in cfg.sources if x.name == tcfg.source)
    settings = ProcessSettings(source=s.name, min_chars=cfg.sampler.min_chars, max_chars=cfg.sampler.max_chars,
                               extract=cfg.extract, filters=s.filters[:index], lang=s.lang)
    batches: list[tuple[list[Any], ProcessSettings]] = []
    cur: list[Any] = []
    for raw in src.iter_raw(1):
        cur.append(raw)
        if len(cur) == _BATCH:
            batches.append((cur, settings))
            cur = []
    if cur:
        batches.append((cur, settings))
    rows = []
    for items in LocalExecutor().map(process_batch, batches, workers=cfg.sampler.num_proc):
        rows += [x for x in items if not isinstance(x, Reject)]
    return rows


def ensure_models(cfg: MixSamplerConfig, force: bool = False) -> list[InputRef]:
    """Build (or reuse) every ``train:`` model; return every quality filter's model as a stage-1 input."""
    refs: list[InputRef] = []
    for source, index, spec in _specs(cfg):
        where = f"sources.{source}.filters[{index}]"
        if spec.get("train"):
            tcfg = trainer_config(spec, where)
            if tcfg.source != source:
                raise ConfigError(f"{where}: the trainer {spec['train']} labels source {tcfg.source!r}; a model a "
                                  f"stage builds is trained on the source it filters ({source!r})")
            _ensure_one(cfg, tcfg, index, force)
        model = Path(spec["model"])
        if not model.is_file():
            raise ConfigError(f"{where}: quality model {model} not found; train it (python -m minideepseek.quality "
                              "train) or add train: <trainer YAML> so stage 1 builds it")
        refs.append(InputRef(name=f"quality_model:{source}", path=str(model), fingerprint=sha256_file(model)))
    return refs


def _ensure_one(cfg: MixSamplerConfig, tcfg: QualityTrainConfig, index: int, force: bool) -> dict[str, Any]:
    from ..classifier.train import train_model

    s = next(x for x in cfg.sources if x.name == tcfg.source)
    src = make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers, cfg.sampler.max_chars)
    try:
        ref = src.input_ref()
        key = build_key(cfg, tcfg, ref.fingerprint, index)
        out = Path(tcfg.out)
        card_path, model = out / CARD_FILE, out / MODEL_FILE
        if not force and card_path.is_file() and model.is_file():
            card = json.loads(card_path.read_text(encoding="utf-8"))
            if card.get("build_key") == key and card.get("model_sha256") == sha256_file(model):
                log.info("quality model %s is up to date (build key %s)", model, key[:12])
                return card
            log.info("quality model %s is stale (trainer, corpus or chain changed); rebuilding", model)
        t0 = time.perf_counter()
        rows = _documents(cfg, tcfg, src, index)
        counts: dict[str, int] = {"both_rules": 0}
        docs = label_rows(tcfg, rows, counts)
        extract_s = time.perf_counter() - t0
        inputs = [{"path": ref.path, "label": None, "sha256": ref.fingerprint, "docs": len(docs),
                   "what": f"source {s.name}'s corpus file (its first pass, {len(rows):,} documents past the chain "
                           "before the quality filter)"}]
        built = {"source": s.name, "docs": len(docs), "read": len(rows), "extract_s": round(extract_s, 2)}
        card = train_model(tcfg, (docs, inputs, counts), {"build_key": key, "built_from": built})
        log.info("quality model %s built from source %s: %s labeled documents; held-out ROC AUC %s; %.1f s",
                 model, s.name, f"{len(docs):,}", card["metrics"]["roc_auc"], time.perf_counter() - t0)
        return card
    finally:
        src.close()
