"""How a withdrawal removes documents from ``packed`` and refreshes stage 4's report (the registry's
``remove_ids`` for pack_shuffle): the touched blocks re-cut (``repack.py``), the packing statistics
recounted from the shards (carrying what only the original run knew: the dropped tail), the per-source
table of ``pack.by_source`` data, and the report rebuilt with the stage's own builder."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..arrow_io import iter_batches, shard_paths
from ..artifact import read_manifest
from ..edits import ArtifactEdit, EditContext, EditHost, note_withdrawal, redact, save_report
from ..pipeline import MIXED_RAW
from ..rng import rng_for
from ..tokenizer.config import EOT_ID
from .packer import PackStats, shard_info
from .repack import repack_shards
from .report import REPORT_FILES, build_report, decode_samples, report_markdown
from .stage import ARTIFACT, DOCS, TOKENIZER


def by_source_after(table: dict[str, Any], ranges: dict[str, Any], gone: set[str], lens: dict[str, int],
                    in_block: dict[str, int]) -> dict[str, Any]:
    """The per-source table of ``pack.by_source`` data after a withdrawal: new row ranges from the
    re-pack, and each source's counts minus its withdrawn documents (their blocks' tokens, their tail)."""
    out = {}
    for name, t in table.items():
        r = ranges[name]
        mine = [d for d in gone if d.split("/", 1)[0] == name]  # doc ids are "<source>/<key>"
        produced = sum(lens[d] for d in mine)
        lo, hi = r["block_range"]
        out[name] = {**t, "block_range": [lo, hi], "blocks": hi - lo, "docs": t["docs"] - len(mine),
                     "content_tokens": t["content_tokens"] - produced + len(mine),
                     "tokens_produced": t["tokens_produced"] - produced,
                     "tokens_in_blocks": t["tokens_in_blocks"] - r["removed_tokens"],
                     "dropped_tail_tokens": t["dropped_tail_tokens"] - sum(lens[d] - in_block.get(d, 0) for d in mine),
                     "pad_tokens": t["pad_tokens"] + r["pad_tokens"]}
    return out


def remove_from_packed(w: EditHost, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry, before = c.ids, c.bases, c.entry, c.before
    src = w.run_dir / ARTIFACT
    old = json.loads((src / "packing_report.json").read_text(encoding="utf-8"))
    in_block: dict[str, int] = {}  # withdrawn doc -> its tokens inside blocks (the rest was the dropped tail)
    for path in shard_paths(src):
        for b in iter_batches(path, ["doc_ids", "starts", "ends"]):
            for docs, s, e in zip(b.column("doc_ids").to_pylist(), b.column("starts").to_pylist(),
                                  b.column("ends").to_pylist()):
                for d, lo, hi in zip(docs, s, e):
                    if d in ids:
                        in_block[d] = in_block.get(d, 0) + hi - lo
    table = man.get("by_source")  # pack.by_source data: re-pack per source, ranges kept contiguous
    ranges = {n: t["block_range"] for n, t in table.items()} if table else None
    shards, info = repack_shards(src, tmp, ids, old["seq_len"], skip=set(REPORT_FILES),
                                 ranges=ranges)
    # withdrawn documents that produced tokens in this artifact: in its blocks or its dropped tail
    tail = set(old["tail_docs"]["dropped_entirely"]) | set(old["tail_docs"]["truncated"])
    gone = set(in_block) | (tail & ids)
    lens = {d: before["packed_lengths"][d] for d in gone}
    st = packed_stats(tmp, old, ids, lens, in_block, {d: n - 1 for d, n in lens.items()})
    pcfg = w.plan.config(ARTIFACT)
    weights = {s["name"]: float(s["weight"]) for s in
               (read_manifest(w.run_dir / MIXED_RAW) or {}).get("config", {}).get("sources", [])}
    summary = (f"; {info['touched_blocks']} block(s) touched, {info['removed_tokens']:,} tokens removed, "
               f"{info['moved_tokens']:,} tokens of other documents re-packed into {info['new_blocks']} "
               f"block(s) ({info['pad_tokens']:,} pad tokens)")
    if table:
        table = by_source_after(table, info.pop("ranges"), gone, lens, in_block)
        man = {**man, "by_source": table}
    rep = refresh_packed(tmp, old, st, pcfg.pack, weights, w.tokenizer(), w.cfg.run.seed, bases,
                         {**entry, "summary": entry["summary"] + summary}, by_source=table)
    counters = {k: rep[k] for k in ("docs", "blocks", "seq_len", "tokens_produced", "tokens_in_blocks",
                                    "packing_efficiency", "dropped_tail_tokens", "pad_tokens", "eot")}
    counters["shards"] = len(st.shards)
    result = {"shards": shards, "repack": info}
    w.commit(ed, man, tmp, entry, counters,
             {DOCS: w.fingerprint(DOCS), TOKENIZER: w.fingerprint(TOKENIZER)}, result)
    return result


def packed_stats(packed: Path, old: dict[str, Any], drop: set[str], doc_lens: dict[str, int],
                 in_block_before: dict[str, int], n_tokens_ours: dict[str, int]) -> PackStats:
    """Recount a packed dataset from its shards, carrying what only the original run knew (the dropped
    tail) minus the withdrawn documents; asserts that no other document lost a token."""
    S = old["seq_len"]
    st = PackStats(seq_len=S, vocab_size=old["vocab_size"])
    parts: Counter = Counter()
    for path in shard_paths(packed):
        for b in iter_batches(path):
            tok = b.column("input_ids").values.to_numpy().reshape(-1, S)
            st.eot_in_blocks += int(np.count_nonzero(tok == EOT_ID))
            if len(tok):
                st.max_id = max(st.max_id, int(tok.max()))
            for docs, s, e in zip(b.column("doc_ids").to_pylist(), b.column("starts").to_pylist(),
                                  b.column("ends").to_pylist()):
                st.blocks += 1
                st.spans_per_block[len(docs)] += 1
                for d, lo, hi in zip(docs, s, e):
                    parts[d] += 1
                    st.tokens_in_blocks += hi - lo
        st.shards.append(shard_info(path))
    tail = old["tail_docs"]
    st.tail_dropped_docs = [d for d in tail["dropped_entirely"] if d not in drop]
    st.tail_truncated_docs = [d for d in tail["truncated"] if d not in drop]
    gone = [d for d in drop if d in doc_lens]  # withdrawn documents that had been packed
    st.docs = old["docs"] - len(gone)
    st.tokens_produced = old["tokens_produced"] - sum(doc_lens[d] for d in gone)
    st.content_tokens = st.tokens_produced - st.docs
    st.eot_produced = st.docs
    st.dropped_tail_tokens = old["dropped_tail_tokens"] - sum(doc_lens[d] - in_block_before.get(d, 0) for d in gone)
    st.pad_tokens = st.blocks * S - st.tokens_in_blocks
    st.split_docs = sum(1 for d, k in parts.items() if k > 1)
    for name, s in old["per_source"].items():
        lost = [d for d in gone if d.split("/", 1)[0] == name]
        st.source_docs[name] = s["docs"] - len(lost)
        st.source_tokens[name] = s["tokens"] - sum(n_tokens_ours[d] for d in lost)
    assert st.tokens_in_blocks + st.dropped_tail_tokens == st.tokens_produced, (
        f"token accounting after withdrawal: {st.tokens_in_blocks:,} in blocks + {st.dropped_tail_tokens:,} tail != "
        f"{st.tokens_produced:,} produced")
    return st


def refresh_packed(tmp: Path, old: dict[str, Any], st: PackStats, pack_cfg: Any, recipe: dict[str, float],
                   tok: Any, seed: int, bases: set[str], entry: dict[str, Any],
                   by_source: dict[str, Any] | None = None) -> dict[str, Any]:
    samples = decode_samples(tmp, tok, pack_cfg.decode_samples, rng_for(seed, "pack", "decode"))
    t = old["timing"]
    rep = build_report(st, pack_cfg, recipe, samples, wall_s=t["wall_s"], peak_rss=t["peak_rss_mb"],
                       threads=t["threads"])
    rep["timing"] = t  # the original run's timing: a withdrawal does not re-pack the whole run
    rep["orders"] = old.get("orders")
    rep["stage1_target"] = old.get("stage1_target")
    if by_source:
        rep["by_source"] = by_source
    for w in old.get("withdrawals", []):
        rep.setdefault("withdrawals", []).append(w)
    rep, n = redact(rep, bases)
    note_withdrawal(rep, entry, n)
    save_report(tmp, "packing_report", rep, report_markdown)
    return rep
