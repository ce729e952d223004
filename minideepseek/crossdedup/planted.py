"""Planted near-duplicate pairs of known exact Jaccard, and stage 2 run on them.

A pair is a real document and an edited copy whose exact Jaccard -- on the shingle sets exactly as
stage 2 defines them (:func:`minideepseek.dedup.shingle_hashes` with the stage's shingle kind, n and
base hash) -- lands in a target bin. Edit kinds:

- ``substitute``: words (CJK: characters) replaced by other words of the same document;
- ``typo``: a character swapped, dropped or doubled inside words;
- ``nav``: navigation/boilerplate lines inserted between lines ("Home | Docs | Next »", ...);
- ``truncate``: the end of the document cut off;
- ``delete_sentences``: whole sentences (or lines) removed.

Each edit applies a seeded permutation of positions and edits the first k of them, so the copy
moves away from the original as k grows; a binary search over k finds the k whose exact Jaccard is
nearest the target, and the pair is kept only if it falls inside the target bin. Every pair uses
its own base document, so pairs are independent (base documents can still be near duplicates of
each other: such removals are counted apart, and judged by their own exact Jaccard).

:func:`run_stage` writes the documents as a ``mixed_raw`` artifact and runs the real stage 2 on it;
:func:`score` reads ``removed.jsonl`` back: recall per Jaccard bin against 1-(1-J^r)^b, false
removals (a removal whose named kept partner is below the threshold), verification cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import pipeline
from ..dedup import exact_jaccard, s_curve, shingle_hashes

EDIT_KINDS = ("substitute", "typo", "nav", "truncate", "delete_sentences")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+|\\s+")  # a CJK character, a word, or a whitespace run
_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
_NAV = ("Home | Docs | Blog | Contact", "« Previous | Next »", "Skip to main content", "Share: Twitter Facebook Email",
        "首页 | 文档 | 联系我们", "Log in | Sign up | Search", "© All rights reserved. Privacy policy | Terms",
        "Table of contents ▾", "Back to top ↑", "Was this page helpful? Yes No")


@dataclass(frozen=True)
class Pair:
    domain: str
    kind: str
    target: float  # lower edge of the target bin
    jaccard: float  # exact, as stage 2 defines it
    a: str
    b: str


def _edited(text: str, kind: str, k: int, seed: int) -> tuple[str, int]:
    """The text with the first k edits of kind `kind` applied, and the number of possible edits."""
    rng = np.random.default_rng(seed)
    if kind in ("substitute", "typo"):
        toks = _TOKEN.findall(text)
        slots = [i for i, t in enumerate(toks) if not t.isspace()]
        if not slots:
            return text, 0
        perm = rng.permutation(len(slots))
        repl = rng.integers(0, len(slots), size=len(slots))
        ops = rng.integers(0, 3, size=len(slots))
        for p in perm[:k].tolist():
            i = slots[p]
            t = toks[i]
            if kind == "substitute":
                toks[i] = toks[slots[int(repl[p])]] if toks[slots[int(repl[p])]] != t else t + t[-1]
            elif len(t) == 1:  # a CJK character (or a one-letter word): a neighbouring code point
                toks[i] = chr(ord(t) + 1) if t.isprintable() else t
            else:
                c = int(repl[p]) % (len(t) - 1)
                op = int(ops[p])
                if op == 0:
                    toks[i] = t[:c] + t[c + 1] + t[c] + t[c + 2:]  # swap two neighbours
                elif op == 1:
                    toks[i] = t[:c] + t[c + 1:]  # drop one
                else:
                    toks[i] = t[:c] + t[c] + t[c:]  # double one
        return "".join(toks), len(slots)
    if kind == "nav":
        lines = text.split("\n")
        n_max = 4 * len(lines) + 20
        where = np.sort(rng.integers(0, len(lines) + 1, size=n_max)[:k]) if k else np.empty(0, dtype=np.int64)
        which = rng.integers(0, len(_NAV), size=n_max)
        out: list[str] = []
        w = 0
        for li in range(len(lines) + 1):
            while w < len(where) and where[w] == li:
                out.append(_NAV[int(which[w])])
                w += 1
            if li < len(lines):
                out.append(lines[li])
        return "\n".join(out), n_max
    if kind == "truncate":
        steps = 200
        return text[:len(text) - len(text) * k // steps], steps
    if kind == "delete_sentences":
        parts = [s for s in _SENTENCE.split(text) if s]
        perm = rng.permutation(len(parts))
        drop = set(perm[:k].tolist())
        return " ".join(s for i, s in enumerate(parts) if i not in drop), len(parts)
    raise ValueError(f"edit kind must be one of {EDIT_KINDS}, got {kind!r}")


def plant(text: str, kind: str, lo: float, hi: float, seed: int, jaccard: Callable[[str, str], float]
          ) -> tuple[str, float] | None:
    """An edited copy of `text` with lo <= exact Jaccard < hi, or None when the edit cannot land there."""
    _, n_max = _edited(text, kind, 0, seed)
    target = (lo + hi) / 2
    a, b = 0, n_max  # J(k) falls (roughly monotonically) with k: bisect for the target
    best: tuple[float, str, float] | None = None
    while a <= b:
        k = (a + b) // 2
        t, _ = _edited(text, kind, k, seed)
        j = jaccard(text, t)
        if lo <= j < hi and (best is None or abs(j - target) < best[0]):
            best = (abs(j - target), t, j)
        if j > target:
            a = k + 1
        else:
            b = k - 1
    return (best[1], best[2]) if best else None


def build_pairs(docs: dict[str, Sequence[str]], levels: Sequence[float], per_cell: int, seed: int,
                shingle: str = "char", ngram: int = 5, base_hash: str = "mix64", width: float = 0.05,
                kinds: Sequence[str] = EDIT_KINDS) -> tuple[list[Pair], dict[str, int]]:
    """`per_cell` pairs per (domain, edit kind, level bin [level, level + width)), each from its own
    base document (documents are drawn in order; one that cannot land in the bin is skipped)."""
    cache: dict[str, np.ndarray] = {}

    def sh(t: str) -> np.ndarray:
        if t not in cache:
            cache[t] = shingle_hashes(t, shingle, ngram, base_hash)  # type: ignore[arg-type]
        return cache[t]

    def jac(x: str, y: str) -> float:
        v = float(exact_jaccard(sh(x), shingle_hashes(y, shingle, ngram, base_hash)))  # type: ignore[arg-type]
        return v

    pairs: list[Pair] = []
    stats = {"skipped": 0, "short_of_docs": 0}
    for d_i, (domain, texts) in enumerate(sorted(docs.items())):
        pool = list(texts)
        nxt = 0
        for k_i, kind in enumerate(kinds):
            for l_i, lo in enumerate(levels):
                got = 0
                while got < per_cell and nxt < len(pool):
                    text = pool[nxt]
                    nxt += 1
                    res = plant(text, kind, lo, min(lo + width, 1.0), seed + 7919 * d_i + 104729 * k_i + 31 * l_i + nxt,
                                jac)
                    if res is None:
                        stats["skipped"] += 1
                        continue
                    pairs.append(Pair(domain, kind, lo, round(res[1], 6), text, res[0]))
                    got += 1
                stats["short_of_docs"] += per_cell - got
        cache.clear()
    return pairs, stats


def run_stage(pairs: Sequence[Pair], work: Path, dedup: dict[str, Any] | None = None, seed: int = 0
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Stage 2 (decontamination off) on the pairs' documents: (dedup report, removed.jsonl rows).

    Document ``p{k}a`` / ``p{k}b`` are pair k's original and copy, in source ``domain``; the copy is
    the shorter one in most edits, so the keep policy usually removes it.
    """
    from ..arrow_io import DatasetWriter
    from ..config import build
    from ..records import DOC_FEATURES, SCHEMA_VERSION, text_hash
    from ..stage import StageRun
    from .config import DedupStageConfig
    from .stage import run_dedup

    cfg = build(DedupStageConfig, {
        "run": {"name": "planted", "data_dir": str(work / "data"), "reports_dir": str(work / "reports"), "seed": seed},
        # document-level dedup only: the text-cleaning steps after it (issue 19) would drop what is left of a
        # missed twin as "too short" and blur what this benchmark counts (near-duplicate recall)
        "dedup": {"num_proc": 1, "scurve_docs": 0, "lines": {"enabled": False}, "paragraphs": {"enabled": False},
                  "substrings": {"enabled": False}, **(dedup or {})},
        "decontam": {"enabled": False}}, "planted")
    run_dir = cfg.run.run_dir
    stage = StageRun(pipeline.producer(pipeline.MIXED_RAW).name, pipeline.MIXED_RAW, run_dir,
                     {"planted": len(pairs), "seed": seed}, [], SCHEMA_VERSION, seed)
    tmp = stage.begin()
    writer = DatasetWriter(tmp, DOC_FEATURES, 256 << 20)
    rows = []
    for k, p in enumerate(pairs):
        for side, t in (("a", p.a), ("b", p.b)):
            rows.append({"id": f"p{k:05d}{side}", "source": p.domain, "text": t, "url": "", "license": "",
                         "lang": None, "lang_score": None, "n_chars": len(t), "n_tokens": len(t) // 4,
                         "hash": text_hash(t), "quality_signals": "{}", "stage": "mix_sampler",
                         "audit_trace": [f"source:{p.domain}:planted"]})
    writer.write_rows(rows)
    writer.close()
    stage.cfg = {"sources": [{"name": d, "weight": 1.0} for d in sorted({p.domain for p in pairs})]}
    up = stage.commit({"docs": len(rows)})
    run_dedup(cfg, {pipeline.MIXED_RAW: up["config_hash"]}, "planted", force=True)
    rep = json.loads((cfg.run.report_dir / "dedup_report.json").read_text())
    removed = [json.loads(x) for x in (run_dir / "mixed_dedup" / "removed.jsonl").read_text().splitlines()]
    return rep, removed


def score(pairs: Sequence[Pair], rep: dict[str, Any], removed: Sequence[dict[str, Any]], threshold: float,
          levels: Sequence[float], width: float = 0.05) -> dict[str, Any]:
    """Recall per bin (a pair is found when one of its two documents is removed) against theory,
    and every removal judged by the exact Jaccard to the kept document it names."""
    b, r = rep["params"]["bands"], rep["params"]["rows"]
    gone = {x["id"] for x in removed}
    found = np.array([f"p{k:05d}a" in gone or f"p{k:05d}b" in gone for k in range(len(pairs))])
    js = np.array([p.jaccard for p in pairs])
    bins = []
    for lo in levels:
        m = (js >= lo) & (js < lo + width)
        if m.any():
            bins.append({"bin": f"{lo:.2f}-{lo + width:.2f}", "pairs": int(m.sum()),
                         "removed_share": round(float(found[m].mean()), 4),
                         "p_candidate_theory": round(float(np.mean(s_curve(js[m], b, r))), 4)})
    at = js >= threshold
    near = [x for x in removed if x["reason"] == "near"]
    twin = [x for x in near if x["kept"][:-1] == x["id"][:-1]]
    kinds = sorted({p.kind for p in pairs})
    return {
        "bands": b, "rows": r, "pairs": len(pairs),
        "recall_at_or_above_threshold": round(float(found[at].mean()), 4) if at.any() else None,
        "pairs_at_or_above_threshold": int(at.sum()),
        "missed_at_or_above_threshold": [{"pair": int(k), "jaccard": float(js[k]), "kind": pairs[k].kind,
                                          "domain": pairs[k].domain} for k in np.flatnonzero(at & ~found)][:20],
        "removed_below_threshold_pairs": int((found & ~at).sum()),
        "false_removals": sum(1 for x in near if x["jaccard"] < threshold),
        "near_removals": len(near), "removals_of_twin": len(twin), "removals_across_pairs": len(near) - len(twin),
        "min_removal_jaccard": min((x["jaccard"] for x in near), default=None),
        "recall_by_kind": {k: round(float(found[at & np.array([p.kind == k for p in pairs])].mean()), 4)
                           for k in kinds if (at & np.array([p.kind == k for p in pairs])).any()},
        "recall_by_domain": {d: round(float(found[at & np.array([p.domain == d for p in pairs])].mean()), 4)
                             for d in sorted({p.domain for p in pairs})
                             if (at & np.array([p.domain == d for p in pairs])).any()},
        "candidate_pairs": rep["near"]["candidate_pairs"], "verified_pairs": rep["near"]["verified_pairs"],
        "rejected_candidates": rep["near"]["rejected_candidates"],
        "residual": rep["near"].get("residual"), "policy": rep["near"].get("policy"),
        "bins": bins,
    }
