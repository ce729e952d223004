"""Prove a withdrawal: no artifact still holds a withdrawn document.

Before anything is removed, each withdrawn document leaves a *fingerprint* (never its text): the
sorted unique 64-bit hashes of its word n-grams (the decontamination tokenization, CJK characters
as words) and of its token-id n-grams under the run's tokenizer. A document shorter than n is one
gram of its own length, and is searched with windows of that length. Verification then scans

- ``mixed_raw`` / ``mixed_dedup`` rows: the id (and upsampled-copy ids), the normalized-text hash,
  and the share of the withdrawn document's word n-grams a remaining row contains (containment);
- the packed shards: the ``doc_ids`` spans, and the share of the withdrawn document's token n-grams
  found anywhere in the token stream (windows inside each block); after a tokenizer retrain the
  token ids changed, so the blocks are decoded and their words are scanned instead;
- every text file of the run's artifacts and reports (JSON, JSONL, Markdown): the ids and hashes.

A row or stream holding >= ``withdraw.containment`` of a withdrawn document's n-grams is a trace:
the same content under another id (a near-copy stage 2 did not pair, a containment, a quote).
The ticket log, the withdrawal records and the release note are the audit trail and are not scanned.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..arrow_io import iter_batches, shard_paths
from ..crossdedup.decontam import ngram_hashes, words
from ..edits import ID_TOKEN
from ..pipeline import PACKED
from ..records import base_id
from .locate import DATASETS

log = logging.getLogger(__name__)

_MULT = np.uint64(0x9E3779B97F4A7C15)
TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".txt")
AUDIT_NAMES = ("release_note.md",)  # the audit trail names what was removed, by design


def word_grams(text: str, n: int) -> tuple[np.ndarray, int]:
    """(unique word n-gram hashes, the n used: min(n, words))."""
    ws = words(text)
    if not ws:
        return np.empty(0, np.uint64), n
    k = min(n, len(ws))
    return np.unique(ngram_hashes(ws, k)), k


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


def token_grams(tokens: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """(unique token-id n-gram hashes, the n used: min(n, tokens))."""
    if not len(tokens):
        return np.empty(0, np.uint64), n
    k = min(n, len(tokens))
    return np.unique(token_windows(tokens, k)), k


def _containment(grams: np.ndarray, present: np.ndarray) -> float:
    return float(np.isin(grams, present).sum() / len(grams)) if len(grams) else 0.0


def _by_n(prints: list[dict[str, Any]], key: str) -> dict[int, list[int]]:
    """Window length -> indices of the documents fingerprinted with it."""
    out: dict[int, list[int]] = defaultdict(list)
    for k, fp in enumerate(prints):
        if fp.get(key.replace("_n", "s")) is not None and len(fp[key.replace("_n", "s")]):
            out[int(fp[key])].append(k)
    return out


def verify(run_dir: Path, report_dir: Path, docs: list[dict[str, Any]], prints: list[dict[str, Any]],
           threshold: float, decoded_with: Any = None, exclude: set[Path] | None = None) -> dict[str, Any]:
    """Scan the run's artifacts for the withdrawn ``docs`` (``prints[k]``: ``words``/``word_n`` and
    ``tokens``/``token_n`` of document k); ``pass`` is True when nothing is found."""
    ids = {d["id"] for d in docs}
    bases = {base_id(i) for i in ids}
    hashes = {d["hash"]: d["id"] for d in docs}
    traces: list[dict[str, Any]] = []
    best: dict[str, dict[str, float]] = {d["id"]: {} for d in docs}
    word_ns = _by_n(prints, "word_n")
    unions = {n: np.unique(np.concatenate([prints[k]["words"] for k in ks])) for n, ks in word_ns.items()}
    checked: dict[str, int] = {}

    def row_hits(text: str, art: str, where: dict[str, Any]) -> None:
        ws = words(text)
        for n, ks in word_ns.items():
            if len(ws) < n:
                continue
            g = ngram_hashes(ws, n)
            if not np.isin(g, unions[n]).any():
                continue
            g = np.unique(g)
            for k in ks:
                c = _containment(prints[k]["words"], g)
                doc = docs[k]["id"]
                if c > best[doc].get(art, 0.0):
                    best[doc][art] = round(c, 4)
                if c >= threshold:
                    traces.append({"artifact": art, **where, "kind": "ngram_containment", "doc": doc,
                                   "containment": round(c, 4)})

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
                    row_hits(row["text"], art, {"file": path.name, "found_as": row["id"]})
        checked[f"{art}_rows"] = n_rows

    packed = run_dir / PACKED
    if (packed / "state.json").is_file():
        checked["packed_blocks"] = _scan_packed(packed, docs, prints, ids, bases, threshold, decoded_with, traces, best)
        checked["packed_mode"] = "decoded words" if decoded_with is not None else "token ids"  # type: ignore[assignment]

    n_files = 0
    skip = {p.resolve() for p in exclude or set()}
    for root in (run_dir, report_dir):
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if (not p.is_file() or p.suffix not in TEXT_SUFFIXES or p.name in AUDIT_NAMES or p.resolve() in skip
                    or "withdrawals" in p.parts or p.name.startswith("deletion_requests")):
                continue
            n_files += 1
            text = p.read_text(encoding="utf-8", errors="replace")
            found = {t for t in ID_TOKEN.findall(text) if t in bases}
            found |= {hashes[h] for h in hashes if h in text}
            for doc in sorted(found):
                traces.append({"artifact": "files", "file": str(p), "kind": "id_or_hash", "doc": doc})
    checked["text_files"] = n_files
    return {"pass": not traces, "threshold": threshold, "checked": checked, "max_containment": best, "traces": traces}


def _scan_packed(packed: Path, docs: list[dict[str, Any]], prints: list[dict[str, Any]], ids: set[str],
                 bases: set[str], threshold: float, tok: Any, traces: list[dict[str, Any]],
                 best: dict[str, dict[str, float]]) -> int:
    """Spans and n-gram containment over the packed stream; returns the number of blocks scanned."""
    key, field = ("word_n", "words") if tok is not None else ("token_n", "tokens")
    by_n = _by_n(prints, key)
    unions = {n: np.unique(np.concatenate([prints[k][field] for k in ks])) for n, ks in by_n.items()}
    present: dict[int, list[np.ndarray]] = defaultdict(list)
    n_blocks = 0
    for path in shard_paths(packed):
        for batch in iter_batches(path, ["input_ids", "doc_ids"]):
            for r, docs_in_block in enumerate(batch.column("doc_ids").to_pylist()):
                for dd in docs_in_block:
                    if dd in ids or base_id(dd) in bases:
                        traces.append({"artifact": PACKED, "file": path.name, "kind": "id", "doc": dd, "row": r})
            n_blocks += batch.num_rows
            if not by_n or batch.num_rows == 0:
                continue
            col = batch.column("input_ids")
            blocks = col.values.to_numpy().reshape(-1, col.type.list_size)
            if tok is None:
                for n in by_n:
                    w = token_windows(blocks, n).ravel()
                    present[n].append(np.unique(w[np.isin(w, unions[n])]))
            else:
                for text in tok.decode_batch(blocks.tolist(), skip_special_tokens=True):
                    ws = words(text)
                    for n in by_n:
                        if len(ws) >= n:
                            g = ngram_hashes(ws, n)
                            present[n].append(np.unique(g[np.isin(g, unions[n])]))
    for n, ks in by_n.items():
        hits = np.unique(np.concatenate(present[n])) if present[n] else np.empty(0, np.uint64)
        for k in ks:
            c = _containment(prints[k][field], hits)
            best[docs[k]["id"]][PACKED] = round(c, 4)
            if c >= threshold:
                traces.append({"artifact": PACKED, "kind": f"{'word' if tok is not None else 'token'}_ngram_containment",
                               "doc": docs[k]["id"], "containment": round(c, 4)})
    return n_blocks
