"""How a withdrawal removes documents from each stage's artifact and refreshes that artifact's reports.

The registry (``minideepseek/pipeline.py``) names one of these per stage (``StageSpec.remove_ids``);
``run.Withdrawal`` calls them in the registry's order. Each edits its artifact through the contract's
edit mode (``stage.ArtifactEdit``: tmp dir, manifest last, atomic swap, done-marker per ticket), so a
kill between or inside them is resumed by rerunning the request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import pipeline
from ..crossdedup.index import INDEX_DIR, INDEX_FILES, filter_index
from ..fsio import write_json_atomic
from ..pipeline import MIXED_DEDUP, MIXED_RAW, PACKED, TOKENIZER
from ..records import copy_epoch
from ..stage import ArtifactEdit, read_manifest
from .locate import iter_batches, shard_paths
from .refresh import packed_stats, refresh_mixed_dedup, refresh_mixed_raw, refresh_packed, refresh_tokenizer
from .rewrite import copy_artifact, filter_dataset, filter_jsonl, repack_shards

if TYPE_CHECKING:
    from .run import Withdrawal


@dataclass(frozen=True)
class EditContext:
    """One ticket's removal, as every artifact's hook needs it."""

    ticket: str
    ids: set[str]  # withdrawn documents (upsampled copies included)
    bases: set[str]  # their base ids (the copy suffix ``#e<k>`` dropped)
    entry: dict[str, Any]  # the manifest/report entry: names the ticket, never the ids
    docs: list[dict[str, Any]]  # the resolution recorded when the ticket was accepted
    decision: dict[str, Any]  # the tokenizer retrain decision
    before: dict[str, Any]  # figures and token lengths saved before any artifact changed


def remove_from_mixed_raw(w: Withdrawal, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry, docs = c.ids, c.bases, c.entry, c.docs
    present = w.present(MIXED_RAW, ids)
    shards = filter_dataset(w.run_dir / MIXED_RAW, tmp, ids)  # reports linked, then replaced by refresh
    from ..sampling.signals import filter_store

    filter_store(w.run_dir / MIXED_RAW, tmp, bases)  # the signal store (sampler.signals), when there is one
    refresh_mixed_raw(tmp, bases, entry)
    per = json.loads(json.dumps(man["counters"]["per_source"]))
    for d in docs:
        row = per.get(d["source"])
        if row is None or d["id"] not in present:
            continue
        row["docs"] -= 1
        row["tokens"] -= d["n_tokens"]
        row["chars"] -= d["n_chars"]
        ep = f"epoch_{copy_epoch(d['id'])}"
        if ep in row:
            row[ep] -= 1
    fp = w.log.fingerprint()
    assert fp is not None
    from ..sampling.stage import DELETION_INPUT

    result = {"shards": shards, "rows_removed": len(present)}
    w.commit(ed, man, tmp, entry, {"docs": man["counters"]["docs"] - len(present), "per_source": per},
             {DELETION_INPUT: fp}, result)
    return result


def remove_from_mixed_dedup(w: Withdrawal, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry = c.ids, c.bases, c.entry
    # the two JSONL files are rewritten in place (open "w"): never a hard link to the old artifact's
    own = {"removed.jsonl", "contamination_hits.jsonl", *INDEX_FILES}  # rewritten here, never linked
    shards = filter_dataset(w.run_dir / MIXED_DEDUP, tmp, ids, skip=own)
    src = w.run_dir / MIXED_DEDUP
    filter_index(src / INDEX_DIR, tmp / INDEX_DIR, ids)  # the dedup index lists kept documents too
    filter_jsonl(src / "removed.jsonl", tmp / "removed.jsonl", ids, ("id", "kept", "original"))
    filter_jsonl(src / "contamination_hits.jsonl", tmp / "contamination_hits.jsonl", ids, ("doc_id",))
    refresh_mixed_dedup(tmp, w.run_dir / MIXED_RAW, bases, entry)
    rep = json.loads((tmp / "dedup_report.json").read_text())
    removed = rep["removed"]
    result = {"shards": shards}
    w.commit(ed, man, tmp, entry,
             {"docs_in": rep["docs_in"], "docs_out": rep["docs_out"], "removed": removed,
             "exact_removed": removed.get("exact", 0), "near_removed": removed.get("near", 0),
             "contamination_hits": len((tmp / "contamination_hits.jsonl").read_text().splitlines())},
             {MIXED_RAW: w.fingerprint(MIXED_RAW)}, result)
    return result


def remove_from_tokenizer(w: Withdrawal, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry, decision = c.ids, c.bases, c.entry, c.decision
    src = w.run_dir / TOKENIZER
    copy_artifact(src, tmp, {"sample.json"})
    sample = json.loads((src / "sample.json").read_text(encoding="utf-8"))
    for split in sample.values():
        split["train"] = [d for d in split["train"] if d not in ids]
        split["heldout"] = [d for d in split["heldout"] if d not in ids]
    write_json_atomic(tmp / "sample.json", sample)
    verdict = ("kept although a retrain is REQUIRED (`bash run_pipeline.sh --from train_tokenizer --force`)"
               if decision["retrain_required"] else "kept")
    entry_t = {**entry, "train_docs_withdrawn": decision["train_docs_withdrawn"], "summary": entry["summary"] + (
        f"; {decision['train_docs_withdrawn']} training documents withdrawn, {decision['train_docs_withdrawn_total']} "
        f"of {decision['train_docs']:,} since training ({100 * decision['share']:.3f}%, threshold "
        f"{100 * decision['threshold']:.1f}%): vocabulary {verdict}; {decision['heldout_docs_withdrawn']} held-out "
        "documents (evaluation figures are from before the withdrawal)")}
    refresh_tokenizer(tmp, bases, entry_t)
    w.commit(ed, man, tmp, entry_t,
             {"withdrawn_from_training_sample": decision["train_docs_withdrawn_total"]},
             {MIXED_DEDUP: w.fingerprint(MIXED_DEDUP)})
    return {}


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


def remove_from_packed(w: Withdrawal, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry, before = c.ids, c.bases, c.entry, c.before
    src = w.run_dir / PACKED
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
    shards, info = repack_shards(src, tmp, ids, old["seq_len"], skip=set(pipeline.stage(PACKED).reports),
                                 ranges=ranges)
    # withdrawn documents that produced tokens in this artifact: in its blocks or its dropped tail
    tail = set(old["tail_docs"]["dropped_entirely"]) | set(old["tail_docs"]["truncated"])
    gone = set(in_block) | (tail & ids)
    lens = {d: before["packed_lengths"][d] for d in gone}
    st = packed_stats(tmp, old, ids, lens, in_block, {d: n - 1 for d, n in lens.items()})
    pcfg = w.plan.config(PACKED)
    weights = {s["name"]: float(s["weight"]) for s in
               (read_manifest(w.run_dir / MIXED_RAW) or {}).get("config", {}).get("sources", [])}
    summary = (f"; {info['touched_blocks']} block(s) touched, {info['removed_tokens']:,} tokens removed, "
               f"{info['moved_tokens']:,} tokens of other documents re-packed into {info['new_blocks']} "
               f"block(s) ({info['pad_tokens']:,} pad tokens)")
    if table:
        table = by_source_after(table, info.pop("ranges"), gone, lens, in_block)
        man = {**man, "by_source": table}
    rep = refresh_packed(tmp, old, st, pcfg.pack, weights, w._tokenizer(), w.cfg.run.seed, bases,
                         {**entry, "summary": entry["summary"] + summary}, by_source=table)
    counters = {k: rep[k] for k in ("docs", "blocks", "seq_len", "tokens_produced", "tokens_in_blocks",
                                    "packing_efficiency", "dropped_tail_tokens", "pad_tokens", "eot")}
    counters["shards"] = len(st.shards)
    result = {"shards": shards, "repack": info}
    w.commit(ed, man, tmp, entry, counters,
             {MIXED_DEDUP: w.fingerprint(MIXED_DEDUP), TOKENIZER: w.fingerprint(TOKENIZER)}, result)
    return result
