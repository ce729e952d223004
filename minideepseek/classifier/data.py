"""The trainer's config and its labeled documents: JSONL files, or a stage-1 artifact's documents
selected by a labeling rule; then the held-out split by component.

Why split by component: documents of one package or site share templates, boilerplate and topic
words, so a random split puts near-twins on both sides and measures memorization of the site, not
quality (the field's "group k-fold"). Every document gets a group (``group_field`` of the record;
for a run's documents the corpus component stage 1 recorded; else the URL's host; else the file),
whole groups go to the held-out side in a seeded order, and no group is on both sides. Exact
duplicate texts are dropped before the split for the same reason (counted in the card).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ..config import ConfigError, require
from ..filters.fasttext_model import DEFAULT_MAX_CHARS, prepare
from ..fsio import sha256_file
from ..rng import rng_for


@dataclass(frozen=True)
class Selector:
    """Documents of a run that a label applies to; every criterion given must hold."""

    sources: tuple[str, ...] = ()  # recipe source names
    components: tuple[str, ...] = ()  # corpus components (the demo's enwiki, python_docs_html, ...)
    url_regex: str = ""  # re.search on the document's url
    text_regex: str = ""  # re.search on the first 2,000 characters of the text
    not_url_regex: str = ""  # excluded when it matches the url

    def __post_init__(self) -> None:
        require(bool(self.sources or self.components or self.url_regex or self.text_regex),
                "rule.positive/negative: give at least one of sources, components, url_regex, text_regex")
        for key in ("url_regex", "text_regex", "not_url_regex"):
            try:
                re.compile(getattr(self, key))
            except re.error as exc:
                raise ConfigError(f"rule: {key}={getattr(self, key)!r} is not a regular expression ({exc})") from exc

    def matches(self, source: str, component: str, url: str, text: str) -> bool:
        if self.sources and source not in self.sources:
            return False
        if self.components and component not in self.components:
            return False
        if self.url_regex and not re.search(self.url_regex, url or ""):
            return False
        if self.not_url_regex and re.search(self.not_url_regex, url or ""):
            return False
        return not (self.text_regex and not re.search(self.text_regex, text[:2000]))


@dataclass(frozen=True)
class LabelRule:
    positive: Selector
    negative: Selector


@dataclass(frozen=True)
class FastTextSettings:
    """fastText supervised settings. Defaults follow DCLM's classifier (word bigrams, a few epochs,
    softmax over two labels) with fastText's own defaults elsewhere, except ``bucket``: 200K hashed
    n-gram rows instead of 2M, so a demo-size model file is ~80 MB rather than ~800 MB (a corpus of
    millions of documents wants the 2M back)."""

    dim: int = 100
    epoch: int = 5
    lr: float = 0.1
    wordNgrams: int = 2  # noqa: N815 - fastText's own spelling, so settings read as in its docs
    minCount: int = 1  # noqa: N815
    bucket: int = 200_000
    loss: Literal["softmax", "ova", "hs"] = "softmax"
    thread: int = 1  # one thread: training is then deterministic for a seed (Hogwild! with more)

    def __post_init__(self) -> None:
        require(self.dim >= 1 and self.epoch >= 1 and self.minCount >= 1 and self.bucket >= 1,
                "fasttext: dim, epoch, minCount and bucket must be >= 1")
        require(self.lr > 0, f"fasttext.lr={self.lr} must be > 0 (DCLM-style default 0.1)")
        require(1 <= self.wordNgrams <= 5, f"fasttext.wordNgrams={self.wordNgrams}: use 1..5 (default 2, DCLM)")
        require(self.thread >= 1, "fasttext.thread must be >= 1 (1 is deterministic)")


@dataclass(frozen=True)
class QualityTrainConfig:
    """``python -m minideepseek.quality train``: what to learn from and where the model goes."""

    out: str  # output folder: model.bin, model_card.json, quality_model_report.{json,md}
    positives: tuple[str, ...] = ()  # JSONL files of positive documents
    negatives: tuple[str, ...] = ()  # JSONL files of negative documents
    text_field: str = "text"
    # the split unit: a record field (JSONL) or, for a run's documents, "component" or "host" (the URL's host:
    # the package or site, so the HTML and reST twins of one manual stay on one side); missing -> host -> file
    group_field: str = "component"
    run_dir: str = ""  # or: a run (data/<run>) whose mixed_raw documents `rule` labels
    # or: a source of the pipeline config whose quality filter names this file (`train:`): stage 1 builds the
    # model from that source's raw records (pinned corpus), extracted and filtered by the chain before the filter
    source: str = ""
    rule: LabelRule | None = None
    label: str = "hq"  # the positive label's name (DCLM's model uses hq / cc)
    negative_label: str = "cc"
    held_out: float = 0.2  # share of documents (whole groups) held out for the report
    held_out_groups: tuple[str, ...] = ()  # or: exactly these groups held out (e.g. an unseen site to test on)
    seed: int = 1234
    max_chars: int = DEFAULT_MAX_CHARS  # the prefix scored (and trained on); the filter must use the same
    threshold: float = 0.5  # where precision/recall/F1 are read
    examples: int = 3  # per report section
    fasttext: FastTextSettings = field(default_factory=FastTextSettings)

    def __post_init__(self) -> None:
        require(bool(self.out), "quality train: set --out DIR (where the model and its card go)")
        files = bool(self.positives or self.negatives)
        require(files + bool(self.run_dir) + bool(self.source) == 1,
                "quality train: give --positives and --negatives (JSONL files), or --run-dir with a rule, or "
                "`source:` (a pipeline source, built by stage 1), exactly one of them")
        if files:
            require(bool(self.positives and self.negatives),
                    "quality train: both --positives and --negatives are needed (one JSONL file or more each)")
        else:
            require(self.rule is not None, "quality train: --run-dir and source: need a labeling `rule:` (positive "
                                           "and negative selectors) in the --config YAML")
        require(0.0 < self.held_out < 1.0, f"held_out={self.held_out} must be a fraction in (0, 1), e.g. 0.2")
        require(0.0 <= self.threshold <= 1.0, f"threshold={self.threshold} must be in [0, 1]")
        require(self.label != self.negative_label and "__label__" not in self.label + self.negative_label
                and not re.search(r"\s", self.label + self.negative_label),
                "label/negative_label: two different names without spaces or __label__ (e.g. hq, cc)")
        require(self.max_chars >= 100, f"max_chars={self.max_chars} is too small; use >= 100")


@dataclass
class LabeledDoc:
    text: str  # prepared (the line fastText sees)
    label: int  # 1 positive, 0 negative
    group: str
    origin: str  # file:line, or the run's document id


@dataclass
class Labeled:
    docs: list[LabeledDoc]
    inputs: list[dict[str, Any]]  # what was read, with sha256
    counts: dict[str, int]


def _group(rec: dict[str, Any], group_field: str, fallback: str) -> str:
    g = rec.get(group_field)
    if isinstance(g, str) and g:
        return g
    host = urlsplit(str(rec.get("url") or "")).netloc
    return f"host:{host}" if host else fallback


def _read_jsonl(path: Path, label: int, cfg: QualityTrainConfig, counts: dict[str, int]) -> list[LabeledDoc]:
    if not path.is_file():
        raise ConfigError(f"quality train: {path} not found; pass JSONL files with one document per line "
                          f"(field {cfg.text_field!r})")
    out = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                counts["bad_json"] += 1
                continue
            text = rec.get(cfg.text_field) if isinstance(rec, dict) else None
            if not isinstance(text, str) or not text.strip():
                counts["no_text"] += 1
                continue
            out.append(LabeledDoc(prepare(text, cfg.max_chars), label, _group(rec, cfg.group_field, f"file:{path.name}"),
                                  f"{path.name}:{n}"))
    return out


def _from_files(cfg: QualityTrainConfig, counts: dict[str, int]) -> tuple[list[LabeledDoc], list[dict[str, Any]]]:
    docs, inputs = [], []
    for label, paths in ((1, cfg.positives), (0, cfg.negatives)):
        for p in paths:
            got = _read_jsonl(Path(p), label, cfg, counts)
            inputs.append({"path": str(p), "label": label, "sha256": sha256_file(Path(p)), "docs": len(got)})
            docs += got
    return docs, inputs


def _from_run(cfg: QualityTrainConfig, counts: dict[str, int]) -> tuple[list[LabeledDoc], list[dict[str, Any]]]:
    from ..arrow_io import iter_dataset_rows
    from ..pipeline import MIXED_RAW
    from ..records import is_copy

    art = Path(cfg.run_dir) / MIXED_RAW
    man = art / "manifest.json"
    if not man.is_file():
        raise ConfigError(f"quality train: {art} has no manifest.json; run stage 1 (mix_sampler.py) for that run first")
    rows = (row for row in iter_dataset_rows(art, ["id", "source", "url", "text", "audit_trace"])
            if not is_copy(row["id"]))  # an upsampled copy is its original again
    docs = label_rows(cfg, rows, counts)
    inputs = [{"path": str(art), "label": None, "sha256": sha256_file(man), "docs": len(docs),
               "what": "stage-1 artifact; sha256 of its manifest.json"}]
    return docs, inputs


def label_rows(cfg: QualityTrainConfig, rows: Any, counts: dict[str, int]) -> list[LabeledDoc]:
    """Documents (dicts with id, source, url, text, audit_trace) labeled by ``cfg.rule``, in order; grouped by
    corpus component or URL host (``group_field``)."""
    from ..records import base_id, trace_component

    assert cfg.rule is not None
    docs = []
    for row in rows:
        comp = trace_component(row["audit_trace"])
        pos = cfg.rule.positive.matches(row["source"], comp, row["url"] or "", row["text"])
        neg = cfg.rule.negative.matches(row["source"], comp, row["url"] or "", row["text"])
        if pos and neg:
            counts["both_rules"] += 1
            continue
        if pos or neg:
            host = urlsplit(row["url"] or "").netloc
            group = f"host:{host}" if host and (cfg.group_field == "host" or not comp) else comp or row["source"]
            docs.append(LabeledDoc(prepare(row["text"], cfg.max_chars), int(pos), group, base_id(row["id"])))
    return docs


Given = tuple[list[LabeledDoc], list[dict[str, Any]], dict[str, int]]


def load_labeled(cfg: QualityTrainConfig, given: Given | None = None) -> Labeled:
    """Every labeled document, exact duplicates (and texts labeled both ways) dropped, in input order.
    ``given``: documents already labeled (stage 1's build from a source), their inputs and counts."""
    counts: dict[str, int] = {"bad_json": 0, "no_text": 0, "both_rules": 0, "duplicate_text": 0,
                              "conflicting_labels": 0}
    if given is not None:
        docs, inputs = given[0], given[1]
        counts.update(given[2])
    elif cfg.source:
        raise ConfigError(f"quality train: source: {cfg.source} is built by stage 1 from the pipeline config: "
                          "`python -m minideepseek.quality build --config configs/demo.yaml` (or mix_sampler.py)")
    else:
        docs, inputs = _from_files(cfg, counts) if not cfg.run_dir else _from_run(cfg, counts)
    by_hash: dict[str, int] = {}
    keep: list[LabeledDoc | None] = []
    for d in docs:
        h = hashlib.sha256(d.text.encode()).hexdigest()
        if h in by_hash:
            first = keep[by_hash[h]]
            if first is not None and first.label != d.label:  # the same text both good and bad: neither
                keep[by_hash[h]] = None
                counts["conflicting_labels"] += 2
            else:
                counts["duplicate_text"] += 1
            continue
        if not d.text:
            counts["no_text"] += 1
            continue
        by_hash[h] = len(keep)
        keep.append(d)
    out = [d for d in keep if d is not None]
    counts["positives"] = sum(d.label for d in out)
    counts["negatives"] = len(out) - counts["positives"]
    if not counts["positives"] or not counts["negatives"]:
        raise ConfigError(f"quality train: {counts['positives']:,} positive and {counts['negatives']:,} negative "
                          "documents after reading; both classes are needed (check the files or the rule)")
    return Labeled(out, inputs, counts)


def split_by_group(docs: list[LabeledDoc], held_out: float, seed: int,
                   groups_named: tuple[str, ...] = ()) -> tuple[list[LabeledDoc], list[LabeledDoc]]:
    """(train, held_out): whole groups, in a seeded order, go to the held-out side until it holds at least
    ``held_out`` of each class's documents (a group is only added while it brings a class still short), or
    exactly ``groups_named``. No group is on both sides; both sides must get both classes."""
    groups: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        groups.setdefault(d.group, []).append(i)
    if len(groups) < 2:
        raise ConfigError(f"quality train: all {len(docs):,} documents are in one group ({next(iter(groups))!r}); the "
                          "held-out split needs two or more: set group_field to a record field that names the "
                          "package or site, or give documents urls")
    names = sorted(groups)
    held: set[str] = set()
    if groups_named:
        unknown = sorted(set(groups_named) - set(names))
        if unknown:
            raise ConfigError(f"quality train: held_out_groups {unknown} are not groups of the data; groups: {names}")
        held = set(groups_named)
    else:
        order = [names[i] for i in rng_for(seed, "quality", "split").permutation(len(names))]
        want = {y: held_out * sum(1 for d in docs if d.label == y) for y in (0, 1)}
        have = {0: 0, 1: 0}
        for g in order:
            short = {y for y in (0, 1) if have[y] < want[y]}
            if not short:
                break
            labels = {docs[i].label for i in groups[g]}
            if labels & short and len(held) < len(names) - 1:  # never hold out every group
                held.add(g)
                for i in groups[g]:
                    have[docs[i].label] += 1
    train = [d for d in docs if d.group not in held]
    test = [d for d in docs if d.group in held]
    for name, side in (("training", train), ("held-out", test)):
        if len({d.label for d in side}) < 2:
            raise ConfigError(f"quality train: the {name} side has one class only (groups: {len(names)}); a "
                              "by-group split needs groups of both classes on each side: add groups, or change "
                              "group_field")
    return train, test
