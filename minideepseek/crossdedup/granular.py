"""Stage 2's finer-grained dedup steps around exact + MinHash (seed 003 §四.6-7). The order:

1. ``url``: exact dedup on the normalized URL / origin (:mod:`.urls`), before any content dedup;
2. the stage's ``exact`` and ``near`` (MinHash) document dedup, then ``against``: near dedup against
   earlier runs' indexes (:mod:`.index`) -- whole documents, each removal with its kept twin;
3. on the survivors, text cleaning (the seed: MinHash keeps one of two pages, "but the survivor still
   carries the navigation bar"): ``lines`` (boilerplate lines counted in seeded buckets,
   :mod:`.lines`), ``paragraphs`` (repeats after their first occurrence, Bloom filter, :mod:`.spans`),
   ``substrings`` (repeated >= 50-token spans via a suffix array, :mod:`.substrings`);
4. decontamination, on the cleaned texts. After the stage has written its survivors, the run's own
   index is saved beside them (signatures of the texts as they entered near dedup).

Cleaning after document dedup keeps exact and near dedup's meaning (a copy is removed as a copy, with
its kept partner named, not whittled down paragraph by paragraph into a fragment that no longer looks
like its twin). The cleaned texts go to a rewritten copy of ``mixed_raw`` (same rows, same order;
text, n_chars, hash and n_tokens updated) in a work directory inside the stage's temporary directory,
deleted before the commit. A document left shorter than the step's ``min_doc_chars`` is dropped
(``too_short_after_<step>``). Upsampled copies (``#eK``) are neither counted nor cleaned on their own:
they take their original's cleaned text. "Run order" (first occurrence wins) is the input order of
``mixed_raw``.

Every step's documents and characters in/out per source form the report's funnel; wall time and
peak RSS of every step are measured in-process (RSS sampled every 10 ms).
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from tqdm import tqdm

from ..arrow_io import DatasetWriter
from ..dedup import signatures_for_texts
from ..executor import LocalExecutor
from ..records import DOC_FEATURES, text_hash
from ..tokencount import TokenCounter
from .docs import Docs, Texts
from .granular_config import step_sources
from .granular_tasks import CHUNK_DOCS, POOL_MIN_CHARS, Chunk, clean_chunk, count_chunk, save_boiler
from .index import INDEX_DIR, PriorIndex, against_prior, index_params, save_index
from .lines import LineCounter
from .near import banding
from .resume import Memo
from .spans import ParagraphDedup
from .substrings import (
    ChunkTask,
    SubstringResult,
    TextRefs,
    chunk_repeats,
    count_tokens,
    cut_text,
    find_repeats,
    merge,
    plan_chunks,
    resolve_engine,
)
from .textstore import TextStore

log = logging.getLogger(__name__)

SUB_COUNT_DOCS = 2048  # documents per task of the substring step's token count pass (a cheap pass: big tasks)

# the funnel's order: whole documents first (URL, then the stage's exact and near, then earlier runs),
# then the survivors' texts are cleaned (lines, paragraphs, substrings), then decontamination
ORDER = ("url", "exact", "near", "against", "lines", "paragraphs", "substrings", "exact_after_cleaning", "contamination",
         "copy_of_removed")
REWRITE = ("lines", "paragraphs", "substrings")
REWRITE_ROWS = 512  # rows per token-recount unit of the rewritten copy


class RssPeak:
    """Peak RSS of this process between marks (a 10 ms sampling thread)."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def mark(self) -> tuple[float, float]:
        """(peak MB since the last mark, RSS MB now); restarts the window."""
        now = self.proc.memory_info().rss
        peak = max(self.peak, now)
        self.peak = now
        return round(peak / 2**20, 1), round(now / 2**20, 1)

    def stop(self) -> None:
        self._stop.set()


class Granular:
    """The steps around exact + near on the stage's table ``d`` (removals go into ``d.removed``) and the
    texts of ``raw`` (``mixed_raw``); after :meth:`rewrite`, ``texts`` reads the cleaned copy."""

    def __init__(self, cfg: Any, up: dict[str, Any], d: Docs, raw: Texts, tmp: Path, memo: Memo | None = None) -> None:
        self.cfg, self.dc = cfg, cfg.dedup
        self.memo = memo or Memo(None)  # the stage's units (resume.py)
        self.d, self.raw, self.texts = d, raw, raw
        self.work = tmp / ".granular-work"
        # a source's domain: the demo's `domain`, else its `lang` ("code" for code sources of any type)
        self.recipe = {s["name"]: s.get("domain") or s.get("lang") or "" for s in up["config"]["sources"]}
        self.rep: dict[str, Any] = {"order": list(ORDER)}
        self.perf: dict[str, dict[str, Any]] = {}
        self.rss = RssPeak()
        self.snap: dict[str, np.ndarray] = {}  # step -> chars per doc after it (-1: removed)
        self.dropped: dict[int, dict[str, Any]] = {}  # too short after a cleaning step
        self._t = time.perf_counter()
        self._near_window = 0.0
        self.para: ParagraphDedup | None = None  # the paragraph step's filter, after rewrite()
        self.line_buckets = 0  # the line step's bucket count, after rewrite()
        self.sub_note = "in this process"  # where the substring step ran (its perf entry's note)

    # ---- helpers
    def _perf(self, step: str, docs: int, chars: int) -> None:
        wall = time.perf_counter() - self._t
        peak, now = self.rss.mark()
        self.perf[step] = {"wall_s": round(wall, 3), "docs": docs, "chars": chars,
                           "docs_per_s": round(docs / wall, 1) if wall > 0 else None,
                           "mb_per_s": round(chars / 1e6 / wall, 2) if wall > 0 else None, "peak_rss_mb": peak}
        self._t = time.perf_counter()

    def _snapshot(self, step: str, chars: np.ndarray, removed: dict[int, dict[str, Any]]) -> None:
        upto = set()
        for x in ORDER[:ORDER.index(step) + 1]:
            upto |= {x, f"too_short_after_{x}"}
        s = np.asarray(chars, dtype=np.int64).copy()
        s[[i for i, r in removed.items() if r["reason"] in upto]] = -1
        for i in np.flatnonzero(self.d.copies).tolist():  # copies follow their original
            o = self.d.orig.get(i)
            s[i] = s[o] if o is not None else s[i]
        self.snap[step] = s

    def _drop_short(self, i: int, text: str, min_chars: int, step: str) -> bool:
        if len(text.strip()) < min_chars:
            self.dropped[i] = self.d.removed[i] = {"reason": f"too_short_after_{step}", "n_chars_left": len(text.strip())}
            return True
        return False

    # ---- step url, before any content dedup
    def prepare(self) -> None:
        dc, d = self.dc, self.d
        n, urls = d.n, d.urls
        chars = np.array(d.n_chars0, dtype=np.int64)
        self.snap["input"] = chars.copy()
        self.rss.mark()
        self._t = time.perf_counter()

        # 1. URL / origin
        if dc.urls.enabled:
            from .urls import url_duplicates
            srcs_ok = step_sources(dc.urls, self.recipe)
            elig = [(not d.copies[i]) and d.srcs[i] in srcs_ok for i in range(n)]
            dups, norm = url_duplicates(urls, elig, d.keep_key, dc.urls)  # keep_key: on the sizes as sampled yet
            for i, k in sorted(dups.items()):
                d.removed[i] = {"reason": "url", "kept": d.ids[k], "kept_source": d.srcs[k],
                                "url": urls[i], "kept_url": urls[k], "normalized": norm[i]}
            twins = [i for i in sorted(dups) if self._rule_hit(urls[i]) or self._rule_hit(urls[dups[i]])]
            self.rep["url"] = {"sources": sorted(srcs_ok), "removed": len(dups),
                               "per_source": dict(sorted(Counter(d.srcs[i] for i in dups).items())),
                               "by_origin_rule": len(twins),
                               "examples": [{"removed": d.ids[i], "url": urls[i], "kept": d.ids[dups[i]],
                                             "kept_url": urls[dups[i]]} for i in (twins or sorted(dups))[:dc.urls.examples]]}
        self._perf("url", n, int(chars.sum()))
        self._snapshot("url", chars, d.removed)
        self.rss.mark()
        self._t = time.perf_counter()

    # ---- steps lines, paragraphs, substrings: on the documents that survived exact/near/against
    def rewrite(self) -> Texts:
        """Clean the survivors' texts; documents left too short join ``d.removed``; the table's sizes and
        hashes follow the cleaned texts; returns the texts the stage reads from here on (decontamination,
        writing): the cleaned copy's, or ``raw`` when no step changed a text."""
        dc, d = self.dc, self.d
        removed = d.removed
        chars = np.array(d.n_chars, dtype=np.int64)
        for step in ("exact", "near", "against"):
            self._snapshot(step, chars, removed)
        self.rss.mark()
        self._t = time.perf_counter()
        if not (dc.lines.enabled or dc.paragraphs.enabled or dc.substrings.enabled):
            for step in REWRITE:
                self._snapshot(step, chars, removed)
            return self.texts

        self.line_srcs = step_sources(dc.lines, self.recipe) if dc.lines.enabled else set()
        self.para_srcs = step_sources(dc.paragraphs, self.recipe) if dc.paragraphs.enabled else set()
        sub_srcs = step_sources(dc.substrings, self.recipe) if dc.substrings.enabled else set()
        live = d.live()
        texts = TextStore(self.work)  # the cleaned texts, on disk (memory does not grow with the run)
        counter, para = self._count_lines(live)
        after_lines = self._strip_lines_and_paragraphs(live, counter, para, texts, chars)
        self._snapshot("lines", after_lines, removed)
        after_para = after_lines.copy()
        for i in texts.keys():
            after_para[i] = texts.chars(i)
        self._snapshot("paragraphs", after_para, removed)
        after_sub = self._substrings(live, sub_srcs, texts, after_para, removed)
        self._snapshot("substrings", after_sub, removed)

        # the rewritten copy of mixed_raw the stage reads from here on; the table follows it (in _write)
        self._t = time.perf_counter()
        self.texts = self._write(texts)
        # re-counting the changed documents' tokens (the DeepSeek tokenizer) and writing them is a cost too
        self._perf("rewrite (token recount + write)", len(texts), texts.total_chars())
        texts.close()
        self.rss.mark()
        self._t = time.perf_counter()
        return self.texts

    # ---- the line and paragraph steps: two passes over the survivors, shared
    def _chunks(self, live: list[int]) -> None:
        """The documents the line/paragraph steps read, in CHUNK_DOCS parts; in a process pool on large
        inputs (granular_tasks), results taken in row order."""
        self.lp_docs = [i for i in live if self.d.srcs[i] in self.line_srcs or self.d.srcs[i] in self.para_srcs]
        self.parts = [self.lp_docs[s0:s0 + CHUNK_DOCS] for s0 in range(0, len(self.lp_docs), CHUNK_DOCS)]
        self.pool = self.dc.num_proc > 1 and sum(self.d.n_chars0[i] for i in self.lp_docs) >= POOL_MIN_CHARS

    def _chunk(self, part: list[int], n_buckets: int, boiler_file: str = "") -> Chunk:
        dc = self.dc
        return Chunk(self.raw.shards, np.array(part, dtype=np.int64), tuple(self.d.ids[i] for i in part),
                     tuple(self.d.srcs[i] in self.line_srcs for i in part),
                     tuple(self.d.srcs[i] in self.para_srcs for i in part), dc.lines.min_line_chars, dc.lines.code_aware,
                     dc.paragraphs.min_chars, self.cfg.run.seed, n_buckets, boiler_file)

    def _map(self, step: str, fn: Any, make: Any) -> Any:
        """``fn`` over the chunks in order (``make(k)``: chunk k's task), each chunk's result a unit
        (``lines.<step>.c=CHUNK_DOCS.k=K``); in a process pool on large inputs."""
        names = [f"lines.{step}.c={CHUNK_DOCS}.k={k:06d}" for k in range(len(self.parts))]
        pool = LocalExecutor().pool(self.dc.num_proc) if self.pool else None
        try:
            yield from self.memo.imap(names, fn, make, pool)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)

    def _count_lines(self, live: list[int]) -> tuple[LineCounter, ParagraphDedup]:
        """Lines, pass 1: counts per bucket, and the paragraph count that sizes the Bloom filter."""
        dc = self.dc
        counter = LineCounter(len(live), dc.lines.bucket_docs, dc.lines.max_repeats, dc.lines.min_line_chars,
                              self.cfg.run.seed, dc.lines.code_aware)
        self._chunks(live)
        n_para = 0
        results = self._map("count", count_chunk, lambda k: self._chunk(self.parts[k], counter.n_buckets))
        for part, res in zip(self.parts, tqdm(results, total=len(self.parts), unit="chunks", desc="lines: count",
                                              mininterval=2)):
            for i, (hs, k) in zip(part, res):
                if hs is not None:
                    counter.add_hashes(self.d.ids[i], hs)
                n_para += k
        counter.finish()
        para = ParagraphDedup(n_para, dc.paragraphs.min_chars, dc.paragraphs.false_positive_rate, dc.paragraphs.exact)
        # kept for the recall certificate (certificate.py), which asks them without adding to them
        self.para = para if self.para_srcs else None
        self.line_buckets = counter.n_buckets if self.line_srcs else 0
        self.t_count = time.perf_counter() - self._t
        return counter, para

    def _strip_lines_and_paragraphs(self, live: list[int], counter: LineCounter, para: ParagraphDedup,
                                    texts: TextStore, chars: np.ndarray) -> np.ndarray:
        """Lines pass 2 + paragraphs: the workers strip lines and hash paragraphs, this process keeps the
        run-order state (the Bloom filter: a paragraph's first occurrence wins) and the counters. Returns
        each document's length after the line step."""
        dc = self.dc
        top: Counter = Counter()
        line_stats: dict[str, Counter] = {}
        para_stats: dict[str, Counter] = {}
        para_examples: list[dict[str, Any]] = []
        after_lines = chars.copy()
        chars_in_lines = 0
        if self.pool:
            boiler_file = str(self.work / "boiler.npz")
            self.work.mkdir(parents=True, exist_ok=True)
            save_boiler(boiler_file, counter.boiler)
            cleaned = self._map("clean", clean_chunk, lambda k: self._chunk(self.parts[k], counter.n_buckets, boiler_file))
        else:
            cleaned = self._map("clean", functools.partial(clean_chunk, boiler=counter.boiler),
                                lambda k: self._chunk(self.parts[k], counter.n_buckets))
        for part, res in zip(self.parts, tqdm(cleaned, total=len(self.parts), unit="chunks", desc="lines + paragraphs",
                                              mininterval=2)):
            for i, (text, gone, p_idx, p_hs) in zip(part, res):
                s = self.d.srcs[i]
                if s in self.line_srcs:
                    chars_in_lines += self.d.n_chars0[i]
                    if gone:
                        st = line_stats.setdefault(s, Counter())
                        st["docs_touched"] += 1
                        st["lines_removed"] += len(gone)
                        st["chars_removed"] += self.d.n_chars0[i] - len(text)
                        top.update(gone)
                        texts[i] = text
                        after_lines[i] = len(text)
                        if self._drop_short(i, text, dc.lines.min_doc_chars, "lines"):
                            st["docs_dropped_too_short"] += 1
                            continue
                if s in self.para_srcs:
                    new, pgone = para.apply(text, p_idx, p_hs)
                    if pgone:
                        st = para_stats.setdefault(s, Counter())
                        st["docs_touched"] += 1
                        st["paragraphs_removed"] += len(pgone)
                        st["chars_removed"] += len(text) - len(new)
                        if len(para_examples) < 10:
                            para_examples.append({"doc": self.d.ids[i], "paragraph": pgone[0][:200]})
                        texts[i] = new
                        if self._drop_short(i, new, dc.paragraphs.min_doc_chars, "paragraphs"):
                            st["docs_dropped_too_short"] += 1
        self._lines_perf(live, chars, chars_in_lines)
        if self.line_srcs:
            self.rep["lines"] = {"sources": sorted(self.line_srcs), "buckets": counter.n_buckets,
                                 "bucket_docs": dc.lines.bucket_docs, "max_repeats": dc.lines.max_repeats,
                                 "boilerplate_lines": sum(len(v) for v in counter.boiler.values()),
                                 "per_source": {k: dict(v) for k, v in sorted(line_stats.items())},
                                 "top_lines": [{"line": ln[:160], "removed_from_docs": c}
                                               for ln, c in top.most_common(dc.lines.top_lines)]}
        if self.para_srcs:
            self.rep["paragraphs"] = {"sources": sorted(self.para_srcs), "min_chars": dc.paragraphs.min_chars,
                                      **para.stats(), "per_source": {k: dict(v) for k, v in sorted(para_stats.items())},
                                      "examples": para_examples}
        return after_lines

    def _lines_perf(self, live: list[int], chars: np.ndarray, chars_in_lines: int) -> None:
        """The two passes serve both steps: lines gets pass 1 (counting), paragraphs pass 2 (strip + dedup)."""
        total_wall = time.perf_counter() - self._t
        t_count = self.t_count
        peak, _ = self.rss.mark()
        where = f"{self.dc.num_proc} worker processes" if self.pool else "this process"
        self.perf["lines"] = {"wall_s": round(t_count, 3), "docs": len(live), "chars": chars_in_lines,
                              "mb_per_s": round(chars_in_lines / 1e6 / t_count, 2) if t_count else None,
                              "peak_rss_mb": peak, "note": f"pass 1 (line counts + paragraph count) in {where}"}
        self.perf["paragraphs"] = {"wall_s": round(total_wall - t_count, 3), "docs": len(live), "chars": int(chars.sum()),
                                   "mb_per_s": round(int(chars.sum()) / 1e6 / (total_wall - t_count), 2),
                                   "peak_rss_mb": peak, "note": f"pass 2 (line strip + paragraph dedup) in {where}"}
        self._t = time.perf_counter()

    # ---- the substring step
    def _substrings(self, live: list[int], sub_srcs: set[str], texts: TextStore, after_para: np.ndarray,
                    removed: dict[int, dict[str, Any]]) -> np.ndarray:
        """Exact substrings over the selected sources' current texts, in run order; returns the lengths after."""
        after_sub = after_para.copy()
        if not sub_srcs:
            return after_sub
        docs = [i for i in live if i not in removed and self.d.srcs[i] in sub_srcs]
        sc = self.dc.substrings
        if self.dc.num_proc > 1 and sum(self.d.n_chars0[i] for i in docs) >= POOL_MIN_CHARS:
            res = self._substrings_pooled(docs, texts)
        else:
            # a generator: find_repeats holds one max_tokens chunk of texts at a time, not all of them
            cur = ((i, texts[i] if i in texts else self.raw[i]) for i in docs)
            # one unit: the suffix array's result (5.9 s of the demo's 38 s)
            res = self.memo.one("substrings", lambda: find_repeats(cur, sc.min_tokens, sc.engine, sc.max_tokens,
                                                                   sc.examples, self.d.ids, sc.cross_doc_only))
        st_sub: dict[str, Counter] = {}
        for i, iv in sorted(res.cut.items()):
            text = texts[i] if i in texts else self.raw[i]
            new = cut_text(text, iv)
            st = st_sub.setdefault(self.d.srcs[i], Counter())
            st["docs_touched"] += 1
            st["spans_removed"] += len(iv)
            st["chars_removed"] += len(text) - len(new)
            texts[i] = new
            after_sub[i] = len(new)
            if self._drop_short(i, new, sc.min_doc_chars, "substrings"):
                st["docs_dropped_too_short"] += 1
        self.rep["substrings"] = {"sources": sorted(sub_srcs), "min_tokens": sc.min_tokens, "engine": res.engine,
                                  "cross_doc_only": sc.cross_doc_only,
                                  "chunks": res.chunks, "tokens_in": res.tokens_in, "tokens_removed": res.tokens_removed,
                                  "spans_removed": res.spans,
                                  "per_source": {k: dict(v) for k, v in sorted(st_sub.items())},
                                  "examples": _pick_examples(res.examples, sc.examples)}
        self._perf("substrings", len(docs), int(sum(self.d.n_chars0[i] for i in docs)))
        self.perf["substrings"]["note"] = self.sub_note
        return after_sub

    def _substrings_pooled(self, docs: list[int], texts: TextStore) -> SubstringResult:
        """find_repeats's result from the pool: the token counts of SUB_COUNT_DOCS-document parts, then each
        max_tokens chunk (the same chunks) -- both passes' results are units, so a killed run resumes
        inside the step. Workers read the texts themselves (the input's rows, the store's file)."""
        sc = self.dc.substrings

        def refs(part: list[int]) -> TextRefs:
            return TextRefs(tuple(part), tuple(texts.ref(i) if i in texts else (-1, 0) for i in part),
                            self.raw.shards, str(texts.path))

        parts = [docs[s0:s0 + SUB_COUNT_DOCS] for s0 in range(0, len(docs), SUB_COUNT_DOCS)]
        pool = LocalExecutor().pool(self.dc.num_proc)
        t0 = time.perf_counter()
        try:
            counted = self.memo.imap([f"substrings.count.c={SUB_COUNT_DOCS}.k={k:06d}" for k in range(len(parts))],
                                     count_tokens, lambda k: refs(parts[k]), pool)
            counts = [n for part in tqdm(counted, total=len(parts), unit="parts", desc="substrings: count",
                                         mininterval=2) for n in part]
            plan = plan_chunks(counts, sc.max_tokens)
            self.sub_note = f"in {self.dc.num_proc} worker processes, the token count pass {time.perf_counter() - t0:.1f} s"
            engine = resolve_engine(sc.engine)

            def task(k: int) -> ChunkTask:
                a, b = plan[k]
                return ChunkTask(refs(docs[a:b]), sc.min_tokens, engine, sc.examples,
                                 tuple(self.d.ids[i] for i in docs[a:b]), sc.cross_doc_only)

            # window 1 per worker: a chunk's texts, ids and suffix array are its worker's memory
            found = self.memo.imap([f"substrings.chunk.t={sc.max_tokens}.k={k:06d}" for k in range(len(plan))],
                                   chunk_repeats, task, pool, window=self.dc.num_proc)
            res = SubstringResult(engine=engine)
            for part in tqdm(found, total=len(plan), unit="chunks", desc="substrings", mininterval=2):
                merge(res, part, sc.examples)
        finally:
            pool.shutdown(cancel_futures=True)
        return res

    def _rule_hit(self, url: str) -> bool:
        import re
        return any(re.search(p, url) for p, _ in self.dc.urls.origin_rules)

    def _write(self, texts: TextStore) -> Texts:
        """The cleaned copy of mixed_raw (every row, in order); the table takes its rows' sizes and hashes."""
        if not texts:
            return self.raw
        out, d = self.work / "mixed", self.d
        writer = DatasetWriter(out, DOC_FEATURES, 256 << 20)
        counter: TokenCounter | None = None  # loaded (~4 s) only when a batch's counts are not a unit yet
        batch: list[dict] = []
        where: list[int] = []  # batch's row numbers
        n_flushed = [0]

        def count(texts: list[str]) -> list[int]:
            nonlocal counter
            counter = counter or TokenCounter("deepseek")
            return list(counter.count(texts))

        def flush() -> None:
            changed = [(i, r) for i, r in zip(where, batch) if r.pop("_changed")]
            # a unit: the token counts of one batch's rewritten rows (the rows are written again on resume)
            name = f"rewrite.tokens.rows={REWRITE_ROWS}.k={n_flushed[0]:06d}"
            for (i, r), k in zip(changed, self.memo.one(name, lambda: count([r["text"] for _, r in changed]))):
                r["n_tokens"] = k
                # the table says what the cleaned copy holds (the later steps and the reports read it)
                d.n_chars[i], d.n_tokens[i], d.hashes[i] = r["n_chars"], int(k), r["hash"]
            n_flushed[0] += 1
            writer.write_rows(batch)
            batch.clear()
            where.clear()

        for i, row in enumerate(self.raw.rows()):
            src = self.d.orig.get(i, i) if self.d.copies[i] else i
            new = texts.get(src) if src is not None else None
            row["_changed"] = new is not None
            if new is not None:
                row["text"], row["n_chars"], row["hash"] = new, len(new), text_hash(new)
            batch.append(row)
            where.append(i)
            if len(batch) >= REWRITE_ROWS:
                flush()
        flush()
        writer.close()
        return Texts(out)

    # ---- step "against", after the stage's near dedup
    def against(self, nd: Any) -> None:
        self.near_peak, _ = self.rss.mark()
        self._t = time.perf_counter()
        self.nd = nd
        if not self.dc.against:
            return
        b, r = banding(self.dc)
        prior = [PriorIndex(p, index_params(self.dc, b, r)) for p in self.dc.against]
        docs = self.d.live()
        sigs = self._sigs(docs)
        found, stats = against_prior(prior, self.dc, b, r, docs, sigs, self.d.hashes, self._text)
        self.d.removed.update(found)
        stats["removed"] = len(found)
        stats["per_source"] = dict(sorted(Counter(self.d.srcs[i] for i in found).items()))
        stats["examples"] = [{"removed": self.d.ids[i], "kept": v["kept"], "jaccard": v["jaccard"]}
                             for i, v in sorted(found.items())[:10]]
        self.rep["against"] = stats
        self._perf("against", len(docs), 0)

    def _text(self, i: int) -> str:
        # what `against` and the saved index sign: the text as it entered near dedup (mixed_raw's), as the
        # near step's matrix does, so a document's index row does not depend on which steps ran before
        return self.raw[int(i)]

    def _sigs(self, docs: list[int]) -> np.ndarray:
        """Signatures of `docs` (copies: their original's), from the near step's matrix when it has them."""
        dc = self.dc
        rows = [self.d.orig.get(d, d) if self.d.copies[d] else d for d in docs]
        out = np.zeros((len(docs), dc.num_perm), dtype=np.uint32)
        missing = list(range(len(docs)))
        nd = getattr(self, "nd", None)
        if nd is not None and getattr(nd, "sigs", None) is not None and len(nd.doc_index):
            di = np.asarray(nd.doc_index)
            pos = np.searchsorted(di, rows)
            ok = (pos < len(di)) & (di[np.minimum(pos, len(di) - 1)] == rows)
            if ok.any():
                out[ok] = np.asarray(nd.sigs[pos[ok]])
            missing = np.flatnonzero(~ok).tolist()
        for s0 in range(0, len(missing), 256):
            part = missing[s0:s0 + 256]
            out[part] = signatures_for_texts([self._text(rows[k]) for k in part], dc.shingle, dc.ngram, dc.num_perm,
                                             dc.seed, dc.base_hash)
        return out

    # ---- after the stage wrote its survivors: the index, the report section
    def finish(self, tmp: Path) -> dict[str, Any]:
        removed, hashes, n_chars = self.d.removed, self.d.hashes, self.d.n_chars
        self._t = time.perf_counter()
        self.rss.mark()
        kept = [i for i in range(self.d.n) if i not in removed]
        if self.dc.save_index:
            b, r = banding(self.dc)
            info = save_index(tmp / INDEX_DIR, [self.d.ids[i] for i in kept], [hashes[i] for i in kept], self._sigs(kept),
                              index_params(self.dc, b, r))
            self.rep["index"] = {"path": f"mixed_dedup/{INDEX_DIR}", **info}
            self._perf("save_index", len(kept), 0)
        self.rss.stop()
        self.rep["near_step_peak_rss_mb"] = self.near_peak if hasattr(self, "near_peak") else None
        self.rep["perf"] = self.perf
        self.rep["funnel"] = self._funnel(removed, n_chars)
        self.rep["params"] = {"urls": _plain(self.dc.urls), "lines": _plain(self.dc.lines),
                              "paragraphs": _plain(self.dc.paragraphs), "substrings": _plain(self.dc.substrings),
                              "against": list(self.dc.against), "save_index": self.dc.save_index}
        return self.rep

    def _funnel(self, removed: dict[int, dict[str, Any]], n_chars: list[int]) -> list[dict[str, Any]]:
        for step in ("exact_after_cleaning", "contamination", "copy_of_removed"):
            self._snapshot(step, np.array(n_chars, dtype=np.int64), removed)
        for step in ORDER:  # a step that did not run changes nothing
            if step not in self.snap:
                self.snap[step] = self.snap[ORDER[ORDER.index(step) - 1]] if step != "url" else self.snap["input"]
        rows = []
        order = ["input", *ORDER]
        names = sorted(set(self.d.srcs), key=lambda x: self.d.priority.get(x, len(self.d.priority)))
        srcs = np.array(self.d.srcs)
        for a, b in zip(order, order[1:]):
            for s in [*names, "all"]:
                m = np.ones(len(srcs), dtype=bool) if s == "all" else srcs == s
                x, y = self.snap[a][m], self.snap[b][m]
                rows.append({"step": b, "source": s, "docs_in": int((x >= 0).sum()), "docs_out": int((y >= 0).sum()),
                             "chars_in": int(x[x >= 0].sum()), "chars_out": int(y[y >= 0].sum())})
        return rows

    def close(self) -> None:
        self.rss.stop()
        self.raw.close()  # the stage's readers: the cleaned one is this step's, and finish() read the last text
        self.texts.close()
        shutil.rmtree(self.work, ignore_errors=True)


def _pick_examples(examples: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Spans quoted across sources first (docstrings in docs pages), one per document, then the rest."""
    def src(d: Any) -> str:
        return str(d).split("/")[0]

    cross = [x for x in examples if src(x["doc"]) != src(x["first_in"])]
    out, docs = [], set()
    for x in cross:
        if x["doc"] not in docs:
            out.append(x)
            docs.add(x["doc"])
    out += [x for x in cross + examples if x not in out]
    return out[:k]


def _plain(obj: Any) -> dict[str, Any]:
    from ..config import to_plain
    return to_plain(obj)
