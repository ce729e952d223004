"""Train a fastText quality classifier, evaluate it on held-out components, write model + card + report.

Training uses ``fasttext-new`` (a maintained Rust port of fastText with the original's API, import
name ``fasttext_new``; it does not shadow ``fasttext-predict``'s ``fasttext`` module, which
``langid`` needs). Its ``.bin`` files are fastText's standard format: the held-out scores in the
report are computed by loading the saved file through :mod:`.model` (fasttext-predict, the C++
core), the same path the stage-1 ``quality`` filter takes. With ``thread: 1`` and a seed, two runs
write byte-identical model files (tested).

Outputs in ``out``: ``model.bin``; ``model_card.json`` (input hashes, counts, the split, settings,
metrics, the model's sha256); ``quality_model_report.{json,md}`` (precision/recall/F1 at the
threshold, ROC AUC, calibration by decile, examples).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import metrics
from ..config import ConfigError, to_plain
from ..filters.fasttext_model import check_label, load, score
from ..fsio import sha256_file, write_json_atomic, write_text_atomic
from ..mdsafe import md_text, snippet_md
from .data import Given, LabeledDoc, QualityTrainConfig, load_labeled, split_by_group

log = logging.getLogger(__name__)

MODEL_FILE = "model.bin"
CARD_FILE = "model_card.json"
REPORT = "quality_model_report"


def _trainer() -> Any:
    try:
        import fasttext_new
    except ImportError as exc:
        raise ConfigError("training a quality model needs the fasttext-new package (pinned in requirements.lock): "
                          "bash scripts/ensure_venv.sh, or .venv/bin/pip install fasttext-new==0.1.0") from exc
    return fasttext_new


def _train_lines(docs: list[LabeledDoc], cfg: QualityTrainConfig) -> str:
    names = {1: cfg.label, 0: cfg.negative_label}
    return "".join(f"__label__{names[d.label]} {d.text}\n" for d in docs)


def train_model(cfg: QualityTrainConfig, given: Given | None = None,
                extra_card: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole command: read, split, train, save, evaluate, report. Returns the card. ``given``: labeled
    documents (stage 1's build); ``extra_card``: fields added to the card (the build's key)."""
    t0 = time.perf_counter()
    labeled = load_labeled(cfg, given)
    train, held = split_by_group(labeled.docs, cfg.held_out, cfg.seed, cfg.held_out_groups)
    log.info("quality train: %s documents (%s positive), %s groups; training on %s, holding out %s in %s groups",
             f"{len(labeled.docs):,}", f"{labeled.counts['positives']:,}", len({d.group for d in labeled.docs}),
             f"{len(train):,}", f"{len(held):,}", len({d.group for d in held}))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = _train_lines(train, cfg)
    train_file = out / "train.txt"  # kept next to the model: the exact training input (its sha256 is in the card)
    write_text_atomic(train_file, lines)
    ft = _trainer()
    t1 = time.perf_counter()
    model = ft.train_supervised(input=str(train_file), seed=cfg.seed, verbose=0, **asdict(cfg.fasttext))
    train_s = time.perf_counter() - t1
    model_path = out / MODEL_FILE
    model.save_model(str(model_path))
    del model

    scorer = load(model_path)  # the filter's path (fasttext-predict), not the trainer's object
    label = check_label(scorer, cfg.label, model_path)
    t2 = time.perf_counter()
    scores = [score(scorer, d.text, label, cfg.max_chars) for d in held]
    score_s = time.perf_counter() - t2
    y = [d.label for d in held]
    auc = metrics.roc_auc(scores, y)
    report = {
        "held_out": {"docs": len(held), "positives": sum(y), "groups": sorted({d.group for d in held})},
        "train": {"docs": len(train), "positives": sum(d.label for d in train),
                  "groups": sorted({d.group for d in train})},
        "roc_auc": round(auc, 4) if auc is not None else None,
        "at_threshold": metrics.prf(scores, y, cfg.threshold),
        "calibration": metrics.calibration(scores, y),
        "examples": _examples(held, scores, cfg.examples),
        "timing": {"train_s": round(train_s, 3), "score_docs_per_s": round(len(held) / score_s, 1) if score_s else None,
                   "total_s": round(time.perf_counter() - t0, 3)},
    }
    card = {
        "format": "fasttext supervised .bin (loads with fasttext.load_model / fasttext-predict)",
        "model_file": MODEL_FILE,
        "model_sha256": sha256_file(model_path),
        "labels": {"positive": f"__label__{cfg.label}", "negative": f"__label__{cfg.negative_label}"},
        "filter_snippet": {"type": "quality", "model": str(model_path), "label": cfg.label,
                           "sha256": sha256_file(model_path), "max_chars": cfg.max_chars},
        "trainer": {"package": "fasttext-new", "version": getattr(_trainer(), "__version__", "")},
        "settings": to_plain(cfg),
        "inputs": labeled.inputs,
        "counts": labeled.counts,
        "train_file_sha256": hashlib.sha256(lines.encode()).hexdigest(),
        "split": {"by": cfg.group_field, "seed": cfg.seed,
                  "held_out_groups": report["held_out"]["groups"], "train_groups": report["train"]["groups"],
                  "train_docs": len(train), "held_out_docs": len(held)},
        "metrics": {"roc_auc": report["roc_auc"], "at_threshold": report["at_threshold"]},
        **(extra_card or {}),
    }
    write_json_atomic(out / CARD_FILE, card)
    write_json_atomic(out / f"{REPORT}.json", report)
    write_text_atomic(out / f"{REPORT}.md", report_markdown(card, report))
    return card


def _examples(held: list[LabeledDoc], scores: list[float], n: int) -> dict[str, list[dict[str, Any]]]:
    order = sorted(range(len(held)), key=lambda i: (-scores[i], held[i].origin))

    def ex(i: int) -> dict[str, Any]:
        return {"origin": held[i].origin, "group": held[i].group, "label": held[i].label,
                "score": round(scores[i], 4), "text": held[i].text[:200]}

    fp = [i for i in order if not held[i].label]
    fn = [i for i in reversed(order) if held[i].label]
    return {"top": [ex(i) for i in order[:n]], "bottom": [ex(i) for i in order[::-1][:n]],
            "worst_negatives": [ex(i) for i in fp[:n]], "worst_positives": [ex(i) for i in fn[:n]]}


def report_markdown(card: dict[str, Any], rep: dict[str, Any]) -> str:
    t = rep["at_threshold"]
    auc = rep["roc_auc"]
    lines = [
        "# Quality classifier: held-out evaluation", "",
        f"Model `{card['model_file']}` (sha256 `{card['model_sha256'][:16]}…`), positive label "
        f"`{card['labels']['positive']}`. Trained on {rep['train']['docs']:,} documents in "
        f"{len(rep['train']['groups'])} groups; evaluated on {rep['held_out']['docs']:,} documents "
        f"({rep['held_out']['positives']:,} positive) in {len(rep['held_out']['groups'])} groups it never saw "
        f"(split by {card['split']['by']}, seed {card['split']['seed']}).", "",
        f"- ROC AUC: **{auc:.4f}**" if auc is not None else "- ROC AUC: undefined (one class held out)",
        f"- at threshold {t['threshold']}: precision {t['precision']:.3f}, recall {t['recall']:.3f}, F1 {t['f1']:.3f}, "
        f"accuracy {t['accuracy']:.3f} (tp {t['tp']:,}, fp {t['fp']:,}, fn {t['fn']:,}, tn {t['tn']:,})",
        f"- held-out groups: {', '.join(md_text(g) for g in rep['held_out']['groups'])}",
        f"- training: {rep['timing']['train_s']} s; scoring: {rep['timing']['score_docs_per_s']} docs/s "
        "(fasttext-predict, one process)", "",
        "## Calibration by score decile", "",
        "| score bin | docs | mean score | positive share |", "|---|---:|---:|---:|",
    ]
    for r in rep["calibration"]:
        ms = "" if r["mean_score"] is None else f"{r['mean_score']:.3f}"
        ps = "" if r["positive_share"] is None else f"{r['positive_share']:.3f}"
        lines.append(f"| {r['bin']} | {r['docs']:,} | {ms} | {ps} |")
    titles = {"top": "Highest scored", "bottom": "Lowest scored", "worst_negatives": "Negatives scored highest",
              "worst_positives": "Positives scored lowest"}
    for key, title in titles.items():
        lines += ["", f"## {title}", "", "| score | label | group | text |", "|---:|---:|---|---|"]
        for e in rep["examples"][key]:
            lines.append(f"| {e['score']:.3f} | {e['label']} | {md_text(e['group'])} | {snippet_md(e['text'], 160)} |")
    return "\n".join(lines) + "\n"
