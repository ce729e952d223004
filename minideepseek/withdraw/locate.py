"""Resolve a deletion request to documents, and find every place they occupy.

Resolution runs on stage 1's ``mixed_raw`` (every sampled document, duplicates included):
1. documents matching a selector;
2. their upsampled copies (``<id>#e<k>``) and, when ``withdraw.duplicates`` is on, the members of
   their stage-2 duplicate groups (``mixed_dedup/removed.jsonl`` records "removed X, kept Y"), in
   both directions: withdrawing the kept page of a near-duplicate pair would otherwise leave its
   removed twin in ``mixed_raw``, and withdrawing the removed one would leave the kept twin, with the
   same content, in the training data.

Location then lists, per artifact, where those ids are: dataset shards, packed blocks (through the
per-block ``doc_ids`` spans, so a document cut across blocks is found in each), the tokenizer's
training/held-out sample, and the packing run's dropped tail.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import pipeline
from ..arrow_io import iter_batches, shard_paths
from ..artifact import read_manifest
from ..config import ConfigError
from ..records import base_id, is_copy
from ..tickets import Matcher, Selector

log = logging.getLogger(__name__)

DATASETS = (pipeline.MIXED_RAW, pipeline.MIXED_DEDUP)


def resolve(run_dir: Path, selectors: list[Selector], ticket: str, duplicates: bool) -> list[dict[str, Any]]:
    """Every document of ``mixed_raw`` the request withdraws, with why (``via``), in dataset order."""
    raw = run_dir / pipeline.MIXED_RAW
    if read_manifest(raw) is None:
        raise ConfigError(f"{raw} is missing or incomplete: there is nothing to withdraw from yet; run "
                          f"`bash run_pipeline.sh` (at least stage 1) first")
    matcher = Matcher([(ticket, selectors, [])])
    cols = ["id", "source", "url", "hash", "text", "n_chars", "n_tokens"]
    meta: dict[str, dict[str, Any]] = {}
    via: dict[str, str] = {}
    for path in shard_paths(raw):
        for batch in iter_batches(path, cols):
            for row in batch.to_pylist():
                hit = matcher.match(row)
                if hit is not None:
                    via[row["id"]] = f"selector:{hit[1]}"
                row.pop("text")
                meta[row["id"]] = row
    if not via:
        return []
    by_base = defaultdict(list)
    for doc_id in meta:
        by_base[base_id(doc_id)].append(doc_id)
    edges = _duplicate_edges(run_dir) if duplicates else {}
    todo = list(via)
    while todo:  # closure over upsampled copies and duplicate groups
        cur = todo.pop()
        for other in by_base[base_id(cur)]:
            if other not in via:
                via[other] = f"upsampled copy of {cur}" if is_copy(other) else f"original of {cur}"
                todo.append(other)
        for other, why in edges.get(base_id(cur), []):
            if other not in via and other in meta:
                via[other] = f"{why} {cur}"
                todo.append(other)
    return [{**{k: meta[i][k] for k in ("id", "source", "url", "hash", "n_chars", "n_tokens")}, "via": via[i]}
            for i in meta if i in via]


def _duplicate_edges(run_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """id -> [(other id, relation)] from stage 2's removed.jsonl (exact and near pairs, and the documents the
    cleaning steps made identical)."""
    path = run_dir / pipeline.MIXED_DEDUP / "removed.jsonl"
    edges: dict[str, list[tuple[str, str]]] = defaultdict(list)
    if not path.is_file():
        return edges
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("reason") in ("exact", "near", "exact_after_cleaning") and r.get("kept"):
            j = f" (J={r['jaccard']})" if r.get("jaccard") is not None else ""
            edges[r["kept"]].append((r["id"], f"{r['reason']} duplicate{j} of"))
            edges[r["id"]].append((r["kept"], f"kept twin{j} of"))
    return edges


@dataclass
class Location:
    """Where the withdrawn ids are, artifact by artifact (what the impact note and the plan list)."""

    datasets: dict[str, dict[str, int]] = field(default_factory=dict)  # artifact -> shard file -> rows
    packed_blocks: dict[str, list[int]] = field(default_factory=dict)  # shard file -> row numbers
    packed_parts: dict[str, int] = field(default_factory=dict)  # doc id -> spans (parts) in blocks
    tokenizer_train: list[str] = field(default_factory=list)
    tokenizer_heldout: list[str] = field(default_factory=list)
    tokenizer_train_total: int = 0
    tail_docs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"datasets": self.datasets, "packed_blocks": self.packed_blocks, "packed_parts": self.packed_parts,
                pipeline.TOKENIZER: {"train": self.tokenizer_train, "heldout": self.tokenizer_heldout,
                              "train_total": self.tokenizer_train_total},
                "packing_tail": self.tail_docs}


def locate(run_dir: Path, ids: set[str]) -> Location:
    loc = Location()
    for art in DATASETS:
        d = run_dir / art
        if read_manifest(d) is None:
            continue
        per = {}
        for path in shard_paths(d):
            n = sum(int(np.count_nonzero(np.isin(b.column("id").to_numpy(zero_copy_only=False), list(ids))))
                    for b in iter_batches(path, ["id"]))
            if n:
                per[path.name] = n
        loc.datasets[art] = per
    packed = run_dir / pipeline.PACKED
    if read_manifest(packed) is not None:
        for path in shard_paths(packed):
            rows = []
            row0 = 0
            for b in iter_batches(path, ["doc_ids"]):
                for r, docs in enumerate(b.column("doc_ids").to_pylist()):
                    hit = [d for d in docs if d in ids]
                    if hit:
                        rows.append(row0 + r)
                        for d in hit:
                            loc.packed_parts[d] = loc.packed_parts.get(d, 0) + 1
                row0 += b.num_rows
            if rows:
                loc.packed_blocks[path.name] = rows
        rep = packed / pipeline.report("packing_report.json")
        if rep.is_file():
            tail = json.loads(rep.read_text(encoding="utf-8")).get("tail_docs", {})
            loc.tail_docs = [d for d in tail.get("dropped_entirely", []) + tail.get("truncated", []) if d in ids]
    sample = run_dir / pipeline.TOKENIZER / "sample.json"
    if sample.is_file():
        s = json.loads(sample.read_text(encoding="utf-8"))
        for split in s.values():
            loc.tokenizer_train += [d for d in split["train"] if d in ids]
            loc.tokenizer_heldout += [d for d in split["heldout"] if d in ids]
            loc.tokenizer_train_total += len(split["train"])
    return loc
