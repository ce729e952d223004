"""The dedup index a stage-2 run saves, and near dedup against an earlier run's index.

Saved in ``mixed_dedup/dedup_index/`` for the run's kept documents, row k = the k-th row of
``mixed_dedup``: ``band_keys.npy`` (n x b uint64 LSH band keys), ``signatures.npy`` (n x num_perm
uint32, for the signature estimate), ``ids.txt`` and ``hashes.txt`` (normalized-text sha256, the
exact dedup key) and ``index.json`` (the MinHash parameters, which a later run must share).

``dedup.against: [<run dir, mixed_dedup dir or index dir>]``: a later run removes its documents that
are exact duplicates (same hash) or near duplicates of an indexed document, with the stage's rules:
candidates share a band key, a signature estimate below threshold - prefilter_margin rejects them,
and the rest need exact Jaccard >= threshold on the earlier run's text (read from its mixed_dedup;
``verify: estimated`` or a missing dataset falls back to the estimate, said in the report). The
earlier document always wins (it is already in use). Counted as ``against`` apart from ``near``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ConfigError
from ..dedup import band_keys, estimated_jaccard, exact_jaccard, shingle_hashes
from .config import DedupConfig
from .docs import Texts

INDEX_DIR = "dedup_index"
INDEX_FILES = tuple(f"{INDEX_DIR}/{n}" for n in ("band_keys.npy", "signatures.npy", "ids.txt", "hashes.txt", "index.json"))
MAX_BUCKET = 64  # candidates per (document, band) from one index bucket: a giant bucket costs O(64)


def index_params(dc: DedupConfig, b: int, r: int) -> dict[str, Any]:
    return {"shingle": dc.shingle, "ngram": dc.ngram, "num_perm": dc.num_perm, "seed": dc.seed,
            "base_hash": dc.base_hash, "bands": b, "rows": r}


def save_index(out: Path, ids: list[str], hashes: list[str], sigs: np.ndarray, params: dict[str, Any]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    keys = band_keys(sigs, params["bands"], params["rows"]) if len(sigs) else np.zeros((0, params["bands"]), np.uint64)
    np.save(out / "band_keys.npy", keys)
    np.save(out / "signatures.npy", np.ascontiguousarray(sigs, dtype=np.uint32))
    (out / "ids.txt").write_text("".join(i + "\n" for i in ids), encoding="utf-8")
    (out / "hashes.txt").write_text("".join(h + "\n" for h in hashes), encoding="utf-8")
    meta = {**params, "docs": len(ids)}
    (out / "index.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return {"docs": len(ids), "bytes": sum(p.stat().st_size for p in out.iterdir())}


def resolve_index(path: str) -> Path:
    p = Path(path)
    for cand in (p, p / INDEX_DIR, p / "mixed_dedup" / INDEX_DIR):
        if (cand / "index.json").is_file():
            return cand
    raise ConfigError(f"dedup.against: no dedup index under {path} (looked for index.json in it, in {INDEX_DIR}/ and in "
                      f"mixed_dedup/{INDEX_DIR}/); run stage 2 there first, with dedup.save_index: true")


class PriorIndex:
    def __init__(self, path: str, params: dict[str, Any]) -> None:
        self.dir = resolve_index(path)
        self.meta = json.loads((self.dir / "index.json").read_text(encoding="utf-8"))
        differ = {k: (self.meta.get(k), v) for k, v in params.items() if self.meta.get(k) != v}
        if differ:
            raise ConfigError(f"dedup.against {path}: its MinHash parameters differ from this run's {differ} "
                              f"(index, this run); set dedup.* to the index's values to compare against it")
        self.keys = np.load(self.dir / "band_keys.npy")
        self.sigs = np.load(self.dir / "signatures.npy")
        self.ids = (self.dir / "ids.txt").read_text(encoding="utf-8").splitlines()
        self.hashes = {h: k for k, h in enumerate((self.dir / "hashes.txt").read_text(encoding="utf-8").splitlines())}
        ds_dir = self.dir.parent
        self.ds: Texts | None = None  # the earlier run's mixed_dedup texts (exact verification)
        if (ds_dir / "state.json").is_file():
            self.ds = Texts(ds_dir)  # shard_paths: its state.json's file names must stay inside it
        if self.ds is not None and len(self.ds) != len(self.ids):
            self.ds = None  # not the dataset the index was saved with
        self._order = [np.argsort(self.keys[:, j], kind="stable") for j in range(self.keys.shape[1])]
        self._sorted = [self.keys[o, j] for j, o in enumerate(self._order)]

    def candidates(self, keys: np.ndarray) -> np.ndarray:
        """(m, 2) pairs (query row, index row) that share a band key, unique."""
        out = []
        for j in range(keys.shape[1]):
            s = self._sorted[j]
            lo = np.searchsorted(s, keys[:, j], side="left")
            hi = np.minimum(np.searchsorted(s, keys[:, j], side="right"), lo + MAX_BUCKET)
            cnt = hi - lo
            q = np.repeat(np.arange(len(keys)), cnt)
            off = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            out.append(np.stack((q, self._order[j][np.repeat(lo, cnt) + off]), axis=1))
        if not out:
            return np.zeros((0, 2), dtype=np.int64)
        pairs = np.concatenate(out)
        return np.unique(pairs, axis=0) if len(pairs) else pairs.reshape(0, 2)


def against_prior(prior: list[PriorIndex], dc: DedupConfig, b: int, r: int, docs: list[int], sigs: np.ndarray,
                  hashes: list[str], text_of: Any) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """removed doc -> reason record, and the counts, for `docs` (with signatures `sigs`, same order)."""
    removed: dict[int, dict[str, Any]] = {}
    stats = {"indexes": [], "candidates": 0, "rejected_by_estimate": 0, "exact_matches": 0, "near_matches": 0}
    keys = band_keys(sigs, b, r) if len(sigs) else np.zeros((0, b), np.uint64)
    for idx in prior:
        stats["indexes"].append({"path": str(idx.dir), "docs": len(idx.ids),
                                 "verify": dc.verify if idx.ds is not None else "estimated (earlier dataset not found)"})
        for d in docs:
            k = idx.hashes.get(hashes[d])
            if d not in removed and k is not None:
                removed[d] = {"reason": "against", "kept": idx.ids[k], "kept_source": "earlier run", "jaccard": 1.0,
                              "index": str(idx.dir)}
                stats["exact_matches"] += 1
        pairs = idx.candidates(keys)
        stats["candidates"] += int(len(pairs))
        if not len(pairs):
            continue
        est = np.asarray(estimated_jaccard(sigs[pairs[:, 0]], idx.sigs[pairs[:, 1]]), dtype=np.float64).reshape(-1)
        best: dict[int, tuple[float, int]] = {}
        for (q, k), e in zip(pairs.tolist(), est.tolist()):
            d = docs[q]
            if d in removed and removed[d]["reason"] == "against" and removed[d]["jaccard"] == 1.0:
                continue
            if e < dc.threshold - dc.prefilter_margin:
                stats["rejected_by_estimate"] += 1
                continue
            if dc.verify == "exact" and idx.ds is not None:
                a = shingle_hashes(text_of(d), dc.shingle, dc.ngram, dc.base_hash)
                bb = shingle_hashes(idx.ds[int(k)], dc.shingle, dc.ngram, dc.base_hash)
                j = float(exact_jaccard(a, bb))
            else:
                j = e
            if j >= dc.threshold and (d not in best or (j, -k) > (best[d][0], -best[d][1])):
                best[d] = (j, k)
        for d, (j, k) in sorted(best.items()):
            if d not in removed:
                removed[d] = {"reason": "against", "kept": idx.ids[k], "kept_source": "earlier run",
                              "jaccard": round(j, 4), "index": str(idx.dir)}
                stats["near_matches"] += 1
    return removed, stats


def filter_index(src: Path, dst: Path, drop: set[str]) -> int:
    """Copy an index without the documents in `drop` (a deletion request: withdraw.py); rows keep the
    order of the filtered ``mixed_dedup``. Returns the number of rows dropped."""
    if not (src / "index.json").is_file():
        return 0
    meta = json.loads((src / "index.json").read_text(encoding="utf-8"))
    ids = (src / "ids.txt").read_text(encoding="utf-8").splitlines()
    hashes = (src / "hashes.txt").read_text(encoding="utf-8").splitlines()
    keep = np.array([i not in drop for i in ids], dtype=bool)
    sigs = np.load(src / "signatures.npy")[keep]
    params = {k: v for k, v in meta.items() if k != "docs"}
    save_index(dst, [i for i, k in zip(ids, keep) if k], [h for h, k in zip(hashes, keep) if k], sigs, params)
    return int((~keep).sum())
