"""``report.py blame``: the documents of a training step, and the steps of a document (ledger.py).

``blame_step`` rebuilds every micro-batch of a step on every rank from the packed data and the
schedule, checks the rebuilt sample ids and token digest against what stage 5 recorded, and lists
the documents in each sequence. ``blame_doc`` finds every (step, rank, micro-batch, row) where a
document's tokens were trained, counts its exposures per mixture phase and epoch, names the first
checkpoint holding it, and says why any part of it was never trained (dropped tail, held-out
validation block, the unused end of a block, not reached in the steps run).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import pipeline
from ..arrow_io import shard_paths
from ..config import ConfigError
from ..mdsafe import md_code, md_text
from ..pipeline import MIXED_DEDUP, PACKED
from .ledger import Replay, token_digest

EXCERPT_TOKENS = 24


def doc_meta(run_dir: Path, ids: set[str]) -> dict[str, dict[str, str]]:
    """{id: {"source", "url"}} of ``ids`` from stage 2's documents (columns read, filtered in Arrow)."""
    out: dict[str, dict[str, str]] = {}
    want = pa.array(sorted(ids), pa.string())
    for path in shard_paths(run_dir / MIXED_DEDUP):
        with pa.memory_map(str(path)) as mm:
            for batch in pa.ipc.open_stream(mm):
                b = batch.select(["id", "source", "url"])
                b = b.filter(pc.is_in(b.column("id"), value_set=want))
                for row in b.to_pylist():
                    out[row["id"]] = {"source": row["source"], "url": row["url"]}
    return out


def resolve_doc(rp: Replay, doc_id: str) -> str:
    """The packed id of ``doc_id``: itself, or a user's own id kept as ``<source>/<id>`` (records.own_doc_id)."""
    if (rp.docs.ids == doc_id).any():
        return doc_id
    own = {str(i) for i in rp.docs.ids if str(i).split("/", 1)[-1] == doc_id}
    if len(own) > 1:
        raise ConfigError(f"--doc {doc_id} matches {len(own)} documents ({', '.join(sorted(own)[:5])}); give the "
                          f"full id")
    return own.pop() if own else doc_id


def _excerpt(tok: Any, tokens: np.ndarray) -> str:
    if tok is None:
        return ""
    return tok.decode(tokens[:EXCERPT_TOKENS].tolist(), skip_special_tokens=False)


def blame_step(rp: Replay, step: int, tok: Any = None) -> dict[str, Any]:
    """Every rank's micro-batches of ``step``, rebuilt and checked, with the documents in each sequence."""
    rebuilt = rp.step_samples(step)
    rec = rp.recorded[step - 1] if step - 1 < len(rp.recorded) else {}
    pieces: dict[int, list[tuple[int, int, int]]] = {}
    ranks, ids = [], set()
    for r, micros in enumerate(rebuilt):
        toks = [rp.tokens_of(m) for m in micros]
        digest = token_digest(toks)
        rec_samples = (rec.get("samples") or [[]] * rp.world)[r] if rec else None
        rec_hash = (rec.get("token_hash") or [None] * rp.world)[r] if rec else None
        seqs = []
        for m, (samples, tk) in enumerate(zip(micros, toks)):
            for row, s in enumerate(samples.tolist()):
                blk, w, _ = rp.window(s)
                pieces[s] = rp.pieces_in(s)
                docs = []
                for j, a, b in pieces[s]:
                    d = str(rp.docs.ids[j])
                    ids.add(d)
                    off = int(rp.docs.doc_start[j]) + (a + w * rp.tc.seq_len - int(rp.docs.starts[j]))
                    docs.append({"id": d, "span": [a, b], "doc_tokens": [off, off + b - a],
                                 "excerpt": _excerpt(tok, tk[row, a:b])})
                seqs.append({"micro": m, "row": row, "sample": s, "block": blk, "window": w, "documents": docs})
        flat = np.concatenate(micros).tolist()
        ranks.append({"rank": r, "sequences": seqs, "token_hash": digest, "recorded_hash": rec_hash,
                      "samples_match": rec_samples == flat if rec_samples is not None else None,
                      "hash_match": None if rec_hash is None else rec_hash == digest})
    meta = doc_meta(rp.run_dir, ids)
    for rk in ranks:
        for sq in rk["sequences"]:
            for d in sq["documents"]:
                d.update(meta.get(d["id"], {"source": "?", "url": ""}))
    checks = [rk["samples_match"] for rk in ranks] + [rk["hash_match"] for rk in ranks]
    return {"run": rp.run_dir.name, "step": step, "steps": rp.steps, "world": rp.world,
            "grad_accum": rp.tc.grad_accum, "micro_batch": rp.tc.micro_batch, "seq_len": rp.tc.seq_len,
            "verified": all(c is True for c in checks), "unrecorded": any(c is None for c in checks),
            "documents": len(ids), "ranks": ranks}


def _untrained_reason(rp: Replay, blk: int, w: int) -> str | None:
    if w >= rp.plan.windows:
        return (f"in the unused end of block {blk} (packed seq_len {rp.plan.blocks.seq_len} is not a multiple of "
                f"train.seq_len {rp.tc.seq_len})")
    if blk in set(rp.plan.val_block_ids.tolist()):
        return f"in held-out validation block {blk} (evaluated, never trained)"
    return None


def _tail_docs(run_dir: Path) -> dict[str, list[str]]:
    rep = run_dir / PACKED / pipeline.report("packing_report.json")
    return json.loads(rep.read_text(encoding="utf-8")).get("tail_docs", {}) if rep.is_file() else {}


def _absent_reason(run_dir: Path, doc_id: str) -> str:
    if doc_id in _tail_docs(run_dir).get("dropped_entirely", []):
        return "in the dropped tail of packing (pack.tail: drop): in no packed block"
    if doc_meta(run_dir, {doc_id}):
        return "in stage 2's output but in no packed block"
    return "not in this run's packed data (removed by stage 1/2 filters, dedup or decontamination, or an unknown id)"


def blame_doc(rp: Replay, doc_id: str, tok: Any = None, schedule: np.ndarray | None = None) -> dict[str, Any]:
    """Where ``doc_id``'s tokens were trained (and where not, and why)."""
    did = resolve_doc(rp, doc_id)
    js = rp.docs.pieces_of(did)
    out: dict[str, Any] = {"run": rp.run_dir.name, "query": doc_id, "id": did, "steps_run": rp.steps,
                           "occurrences": [], "not_trained": [], "pieces": []}
    out.update(doc_meta(rp.run_dir, {did}).get(did, {"source": "?", "url": ""}))
    if len(js) == 0:
        out["not_trained"].append({"reason": _absent_reason(rp.run_dir, did)})
        return _summarize(rp, out)
    sched = rp.schedule() if schedule is None else schedule
    T = rp.tc.seq_len
    for j in js.tolist():
        blk, st, en = int(rp.docs.block_of[j]), int(rp.docs.starts[j]), int(rp.docs.ends[j])
        out["pieces"].append({"block": blk, "span": [st, en], "doc_tokens": [int(rp.docs.doc_start[j]),
                                                                             int(rp.docs.doc_start[j]) + en - st]})
        for w in range(st // T, (en - 1) // T + 1):
            a, b = max(st, w * T) - w * T, min(en, (w + 1) * T) - w * T
            why = _untrained_reason(rp, blk, w)
            if why:
                out["not_trained"].append({"block": blk, "window": w, "tokens": b - a, "reason": why})
                continue
            hits = np.argwhere(sched == blk * rp.plan.windows + w)
            if len(hits) == 0:
                out["not_trained"].append({"block": blk, "window": w, "tokens": b - a, "reason": (
                    f"not reached: not drawn in the run's {rp.steps} steps")})
            for s, r, m, row in hits.tolist():
                ep, ph = rp.epoch_and_phase(s + 1, m, r, row)
                out["occurrences"].append({"step": s + 1, "rank": r, "micro": m, "row": row, "block": blk,
                                           "window": w, "span": [a, b], "tokens": b - a, "epoch": ep, "phase": ph})
    if did in _tail_docs(rp.run_dir).get("truncated", []):
        out["not_trained"].append({"reason": "its end (and its end-of-text token) fell in the dropped tail of packing "
                                             "(pack.tail: drop)"})
    out["occurrences"].sort(key=lambda o: (o["step"], o["rank"], o["micro"], o["row"], o["span"][0]))
    return _summarize(rp, out)


def _summarize(rp: Replay, out: dict[str, Any]) -> dict[str, Any]:
    occ = out["occurrences"]
    steps = sorted({o["step"] for o in occ})
    out["steps"] = steps
    out["exposures"] = len(occ)
    out["tokens_trained"] = sum(o["tokens"] for o in occ)
    per = Counter((o["phase"], o["epoch"]) for o in occ)
    out["exposures_by_phase_epoch"] = [{"phase": p, "epoch": e, "exposures": n} for (p, e), n in
                                       sorted(per.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))]
    ck = [c for c in rp.checkpoint_steps() if steps and c >= steps[0]]
    out["first_checkpoint"] = ck[0] if ck else None
    out["checkpoint_steps"] = rp.checkpoint_steps()
    return out


def exposures(rp: Replay, schedule: np.ndarray | None = None) -> dict[str, dict[str, int]]:
    """{doc id: {"exposures", "tokens"}} over every trained window of the run (one pass over the schedule)."""
    sched = rp.schedule() if schedule is None else schedule
    out: dict[str, dict[str, int]] = {}
    for s in sched.ravel().tolist():
        for j, a, b in rp.pieces_in(s):
            e = out.setdefault(str(rp.docs.ids[j]), {"exposures": 0, "tokens": 0})
            e["exposures"] += 1
            e["tokens"] += b - a
    return out


def training_summary(run_dir: Path, doc_ids: list[str]) -> dict[str, dict[str, Any]] | None:
    """For a withdrawal note: each document's steps, exposures and first checkpoint in the run's smoke
    train; None when the run has no smoke train of its current packed data."""
    try:
        rp = Replay.open(run_dir)
    except (ConfigError, OSError, ValueError):
        return None
    try:
        sched = rp.schedule()
        out = {}
        for d in doc_ids:
            b = blame_doc(rp, d, schedule=sched)
            out[d] = {"steps": b["steps"], "exposures": b["exposures"], "tokens": b["tokens_trained"],
                      "first_checkpoint": b["first_checkpoint"], "last_step": rp.steps,
                      "not_trained": sorted({n["reason"] for n in b["not_trained"]})}
        return out
    finally:
        rp.close()


# -- Markdown ------------------------------------------------------------------------------------------

def step_markdown(r: dict[str, Any]) -> str:
    verdict = ("VERIFIED: the rebuilt batches match the recorded sample ids and token digests" if r["verified"] else
               "NOT VERIFIED: this run recorded no token digests (trained before the ledger)" if r["unrecorded"] else
               "MISMATCH: the rebuilt batches differ from what was recorded")
    lines = [f"# Step {r['step']} of run {md_text(r['run'])}", "",
             f"{r['world']} rank(s) x {r['grad_accum']} micro-batch(es) x {r['micro_batch']} sequence(s) of "
             f"{r['seq_len']} tokens; {r['documents']} document(s). **{verdict}**.", "",
             "| rank | recorded digest | rebuilt digest | samples | digest |", "|---:|---|---|:-:|:-:|"]
    for rk in r["ranks"]:
        mark = {True: "ok", False: "DIFFERS", None: "—"}
        lines.append(f"| {rk['rank']} | `{rk['recorded_hash'] or '—'}` | `{rk['token_hash']}` | "
                     f"{mark[rk['samples_match']]} | {mark[rk['hash_match']]} |")
    lines += ["", "| rank | micro | row | block/window | span in sequence | document | source | tokens of the "
              "document | excerpt |", "|---:|---:|---:|---|---|---|---|---|---|"]
    for rk in r["ranks"]:
        for sq in rk["sequences"]:
            for d in sq["documents"]:
                lines.append(f"| {rk['rank']} | {sq['micro']} | {sq['row']} | {sq['block']}/{sq['window']} | "
                             f"{d['span'][0]}-{d['span'][1]} | {md_code(d['id'])} | {md_text(d['source'])} | "
                             f"{d['doc_tokens'][0]}-{d['doc_tokens'][1]} | {md_text(d['excerpt'], 80)} |")
    return "\n".join(lines) + "\n"


def doc_markdown(r: dict[str, Any]) -> str:
    head = f"# Document {md_code(r['id'])} in run {md_text(r['run'])}"
    lines = [head, "", f"Source {md_text(r.get('source', '?'))}, url {md_text(r.get('url') or '—')}; "
             f"{len(r['pieces'])} piece(s) in packed blocks.", ""]
    if r["steps"]:
        lines.append(f"Trained in {len(r['steps'])} step(s) of {r['steps_run']}: {r['exposures']} exposure(s), "
                     f"{r['tokens_trained']:,} tokens; first step {r['steps'][0]}; the first checkpoint holding it is "
                     f"step {r['first_checkpoint']} (checkpoint steps {', '.join(map(str, r['checkpoint_steps']))}; "
                     f"intermediate ones are deleted when stage 5 commits, `checkpoint.pt` is the last).")
        lines += ["", "| phase | epoch | exposures |", "|---:|---:|---:|"]
        lines += [f"| {x['phase']} | {'—' if x['epoch'] is None else x['epoch']} | {x['exposures']} |"
                  for x in r["exposures_by_phase_epoch"]]
        lines += ["", "| step | rank | micro | row | block/window | span in sequence | tokens |",
                  "|---:|---:|---:|---:|---|---|---:|"]
        lines += [f"| {o['step']} | {o['rank']} | {o['micro']} | {o['row']} | {o['block']}/{o['window']} | "
                  f"{o['span'][0]}-{o['span'][1]} | {o['tokens']} |" for o in r["occurrences"]]
    else:
        lines.append("Never trained in this run.")
    if r["not_trained"]:
        by_reason: dict[str, list[dict[str, Any]]] = {}
        for n in r["not_trained"]:
            by_reason.setdefault(n["reason"], []).append(n)
        lines += ["", "Not trained:", ""]
        for why, ns in by_reason.items():
            wins = [n for n in ns if "block" in n]
            where = ", ".join(f"{n['block']}/{n['window']}" for n in wins[:8]) + (", ..." if len(wins) > 8 else "")
            tokens = sum(n["tokens"] for n in wins)
            lines.append(f"- {md_text(why)}" + (f": {tokens:,} tokens in {len(wins)} window(s) (block/window {where})"
                                                if wins else ""))
    return "\n".join(lines) + "\n"
