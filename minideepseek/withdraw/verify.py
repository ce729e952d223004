"""Prove a withdrawal: no artifact still holds a withdrawn document.

Before anything is removed, each withdrawn document leaves a *fingerprint* (never its text): the
sorted unique 64-bit hashes of its word n-grams (the decontamination tokenization, CJK characters
as words) and of its token-id n-grams under the run's tokenizer. Verification then scans

- ``mixed_raw`` / ``mixed_dedup`` rows: the id (and upsampled-copy ids), the normalized-text hash,
  and the share of the withdrawn document's word n-grams a remaining row contains (containment);
- the packed shards: the ``doc_ids`` spans, and the share of the withdrawn document's token n-grams
  found anywhere in the token stream (windows inside each block);
- every text file of the run's artifacts and reports (JSON, JSONL, Markdown): the ids and hashes.

A row or stream holding >= ``withdraw.containment`` of a withdrawn document's n-grams is a trace:
the same content under another id (a near-copy stage 2 did not pair, a containment, a quote).
The ticket log, the withdrawal records and the release note are the audit trail and are not scanned.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..decontam import ngram_hashes, words
from ..records import base_id
from .locate import DATASETS, iter_batches, shard_paths

log = logging.getLogger(__name__)

_MULT = np.uint64(0x9E3779B97F4A7C15)
_ID_TOKEN = re.compile(r"[\w.\-]+/[0-9a-f]{16}")
TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".txt")
AUDIT_NAMES = ("release_note.md",)  # the audit trail names what was removed, by design


def word_grams(text: str, n: int) -> np.ndarray:
    ws = words(text)
    if not ws:
        return np.empty(0, np.uint64)
    return np.unique(ngram_hashes(ws, min(n, len(ws))))


def token_windows(tokens: np.ndarray, n: int) -> np.ndarray:
    """Hash of every length-``n`` window along the last axis (1-D: one sequence; 2-D: per row)."""
    t = np.asarray(tokens).astype(np.uint64)
    width = t.shape[-1] - n + 1
    if width <= 0:
        return np.empty(t.shape[:-1] + (0,), np.uint64)
    out = np.zeros(t.shape[:-1] + (width,), np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            out = out * _MULT + (t[..., k:k + width] + np.uint64(1))
    return out


def token_grams(tokens: np.ndarray, n: int) -> np.ndarray:
    return np.unique(token_windows(tokens, min(n, len(tokens)))) if len(tokens) else np.empty(0, np.uint64)


def _containment(grams: np.ndarray, present: np.ndarray) -> float:
    return float(np.isin(grams, present).sum() / len(grams)) if len(grams) else 0.0


def verify(run_dir: Path, report_dir: Path, docs: list[dict[str, Any]], word_fp: list[np.ndarray],
           token_fp: list[np.ndarray | None], ngram: int, token_ngram: int, threshold: float) -> dict[str, Any]:
    """Scan the run's artifacts for the withdrawn ``docs``; ``pass`` is True when nothing is found."""
    ids = {d["id"] for d in docs}
    bases = {base_id(i) for i in ids}
    hashes = {d["hash"]: d["id"] for d in docs}
    traces: list[dict[str, Any]] = []
    best: dict[str, dict[str, float]] = {d["id"]: {} for d in docs}
    union = np.unique(np.concatenate(word_fp)) if word_fp else np.empty(0, np.uint64)
    checked: dict[str, int] = {}

    for art in DATASETS:
        d = run_dir / art
        if not (d / "state.json").is_file():
            continue
        n_rows = 0
        for path in shard_paths(d):
            for batch in iter_batches(path, ["id", "hash", "text"]):
                for row in batch.to_pylist():
                    n_rows += 1
                    if row["id"] in ids or base_id(row["id"]) in bases:
                        traces.append({"artifact": art, "file": path.name, "kind": "id", "doc": row["id"]})
                    if row["hash"] in hashes:
                        traces.append({"artifact": art, "file": path.name, "kind": "hash", "doc": hashes[row["hash"]],
                                       "found_as": row["id"]})
                    g = word_grams(row["text"], ngram)
                    if not len(union) or not np.isin(g, union).any():
                        continue
                    for doc, fp in zip(docs, word_fp):
                        c = _containment(fp, g)
                        if c > best[doc["id"]].get(art, 0.0):
                            best[doc["id"]][art] = round(c, 4)
                        if c >= threshold:
                            traces.append({"artifact": art, "file": path.name, "kind": "ngram_containment",
                                           "doc": doc["id"], "found_as": row["id"], "containment": round(c, 4)})
        checked[f"{art}_rows"] = n_rows

    packed = run_dir / "packed"
    if (packed / "state.json").is_file():
        tok_union = [fp for fp in token_fp if fp is not None and len(fp)]
        present: list[np.ndarray] = []
        n_blocks = 0
        for path in shard_paths(packed):
            for batch in iter_batches(path, ["input_ids", "doc_ids"]):
                for r, docs_in_block in enumerate(batch.column("doc_ids").to_pylist()):
                    for dd in docs_in_block:
                        if dd in ids or base_id(dd) in bases:
                            traces.append({"artifact": "packed", "file": path.name, "kind": "id", "doc": dd, "row": r})
                if not tok_union or batch.num_rows == 0:
                    n_blocks += batch.num_rows
                    continue
                col = batch.column("input_ids")
                seq = col.type.list_size
                blocks = col.values.to_numpy().reshape(-1, seq)
                n_blocks += len(blocks)
                allg = np.unique(np.concatenate(tok_union))
                w = token_windows(blocks, token_ngram).ravel()
                present.append(np.unique(w[np.isin(w, allg)]))
        hits = np.unique(np.concatenate(present)) if present else np.empty(0, np.uint64)
        for doc, fp in zip(docs, token_fp):
            if fp is None:
                continue
            c = _containment(fp, hits)
            best[doc["id"]]["packed"] = round(c, 4)
            if c >= threshold:
                traces.append({"artifact": "packed", "kind": "token_ngram_containment", "doc": doc["id"],
                               "containment": round(c, 4)})
        checked["packed_blocks"] = n_blocks

    n_files = 0
    for root in (run_dir, report_dir):
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if (not p.is_file() or p.suffix not in TEXT_SUFFIXES or p.name in AUDIT_NAMES
                    or "withdrawals" in p.parts or p.name.startswith("deletion_requests")):
                continue
            n_files += 1
            text = p.read_text(encoding="utf-8", errors="replace")
            found = {t for t in _ID_TOKEN.findall(text) if t in bases}
            found |= {hashes[h] for h in hashes if h in text}
            for doc in sorted(found):
                traces.append({"artifact": "files", "file": str(p), "kind": "id_or_hash", "doc": doc})
    checked["text_files"] = n_files
    return {"pass": not traces, "threshold": threshold, "ngram": ngram, "token_ngram": token_ngram,
            "checked": checked, "max_containment": best, "traces": traces}
