"""packing_report.{json,md}: efficiency, dropped tail / padding, EOT check, docs per block, source
shares in OUR tokens against the recipe, shards, throughput, and decoded sample blocks.

Both files carry wall time and peak RSS, so the stage commits them as ``volatile`` (checksummed,
left out of the fingerprint: the packed data is byte-identical across reruns, timings are not).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from tokenizers import Tokenizer

from .. import pipeline
from ..tokenizer.config import EOT_ID, PAD_ID
from .config import PackConfig
from .packer import PackStats

REPORT_FILES = pipeline.stage("pack_shuffle").reports  # the registry's list, written once
SPAN_CONVENTION = ("block tokens [starts[k], ends[k]) belong to doc_ids[k] (end exclusive); a document's last "
                   "part includes its <|endoftext|>; doc_token_start[k] = offset of that part in the document's "
                   "own token sequence (tokens + EOT); padding belongs to no span")
WINDOW_CHARS = 300


def render_block(tok: Tokenizer, row: dict[str, Any], window: int = WINDOW_CHARS) -> str:
    """The block as text with its boundaries visible: ``⟦doc_id⟧`` opens a document (``⟦doc_id +n⟧``
    a part that starts at its token n), ``⟨EOT⟩`` ends one; cut to ``window`` chars around the first EOT."""
    ids = row["input_ids"]
    out: list[str] = []
    first_eot = None
    for d, s, e, t in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
        part = ids[s:e]
        eot = bool(part) and part[-1] == EOT_ID  # content never holds id 0 (asserted while packing)
        out.append(f"⟦{d}⟧" if t == 0 else f"⟦{d} +{t}⟧")
        out.append(tok.decode(part[:-1] if eot else part, skip_special_tokens=False))
        if eot:
            out.append("⟨EOT⟩")
            if first_eot is None:
                first_eot = sum(map(len, out))
    end = row["ends"][-1] if row["ends"] else 0
    if end < len(ids) and all(i == PAD_ID for i in ids[end:]):
        out.append(f"⟨PAD⟩×{len(ids) - end}")
    text = "".join(out)
    if len(text) <= window:
        return text
    lo = max(0, (first_eot or 0) - window // 2)
    hi = min(len(text), lo + window)
    return ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")


def decode_samples(ds_dir: Path, tok: Tokenizer, k: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """``k`` seeded random blocks, read back through ``datasets.load_from_disk`` (the loader's view)."""
    ds = datasets.load_from_disk(str(ds_dir))
    if k == 0 or len(ds) == 0:
        return []
    rows = sorted(rng.choice(len(ds), size=min(k, len(ds)), replace=False).tolist())
    out = []
    for i in rows:
        row = ds[i]
        out.append({"row": i, "spans": [{"doc_id": d, "start": s, "end": e, "doc_token_start": t} for d, s, e, t in
                                        zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"])],
                    "text": render_block(tok, row)})
    return out


def _per_source(st: PackStats, recipe: dict[str, float]) -> dict[str, dict[str, Any]]:
    total_w = sum(recipe.values())
    out = {}
    for name in list(recipe) + sorted(set(st.source_tokens) - set(recipe)):
        tokens = st.source_tokens.get(name, 0)
        share = tokens / st.content_tokens if st.content_tokens else 0.0
        target = recipe[name] / total_w if name in recipe and total_w else None
        out[name] = {"docs": st.source_docs.get(name, 0), "tokens": tokens, "token_share": round(share, 4),
                     "recipe_share": None if target is None else round(target, 4),
                     "deviation": None if target is None else round(share - target, 4)}
    return out


def build_report(st: PackStats, pc: PackConfig, recipe: dict[str, float], samples: list[dict[str, Any]],
                 wall_s: float, peak_rss: float, threads: int) -> dict[str, Any]:
    hist = dict(sorted(st.spans_per_block.items()))
    sizes = [s["bytes"] for s in st.shards]
    capacity = st.blocks * pc.seq_len
    return {
        "seq_len": pc.seq_len, "tail": pc.tail, "vocab_size": st.vocab_size, "max_token_id": st.max_id,
        "dtype": "uint32", "span_convention": SPAN_CONVENTION,
        "docs": st.docs, "content_tokens": st.content_tokens, "tokens_produced": st.tokens_produced,
        "tokens_in_blocks": st.tokens_in_blocks, "blocks": st.blocks,
        "packing_efficiency": round(st.tokens_in_blocks / st.tokens_produced, 6) if st.tokens_produced else 0.0,
        "dropped_tail_tokens": st.dropped_tail_tokens, "pad_tokens": st.pad_tokens,
        "pad_share": round(st.pad_tokens / capacity, 6) if capacity else 0.0,
        "eot": {"produced": st.eot_produced, "documents": st.docs, "in_blocks": st.eot_in_blocks,
                "lost_in_dropped_tail": st.eot_produced - st.eot_in_blocks},
        "tail_docs": {"dropped_entirely": st.tail_dropped_docs, "truncated": st.tail_truncated_docs},
        "docs_per_block": {"histogram": {str(k): v for k, v in hist.items()},
                           "mean": round(sum(k * v for k, v in hist.items()) / st.blocks, 3) if st.blocks else 0.0,
                           "max": max(hist, default=0)},
        "split_docs": {"count": st.split_docs, "share": round(st.split_docs / st.docs, 4) if st.docs else 0.0},
        "per_source": _per_source(st, recipe),
        "shards": {"count": len(st.shards), "total_bytes": sum(sizes), "max_bytes": max(sizes, default=0),
                   "min_bytes": min(sizes, default=0), "max_shard_bytes": pc.max_shard_bytes, "files": st.shards},
        "timing": {"wall_s": round(wall_s, 2), "pack_s": round(st.pack_s, 2), "shuffle_write_s": round(st.write_s, 2),
                   "tokens_per_s": round(st.tokens_produced / st.pack_s) if st.pack_s else 0,
                   "end_to_end_tokens_per_s": round(st.tokens_produced / wall_s) if wall_s else 0,
                   "peak_rss_mb": peak_rss, "threads": threads or os.cpu_count()},
        "samples": samples,
    }


def _target_sentence(target: dict[str, Any] | None) -> str:
    """What stage 1's quota counted (``stage1_target``: ``{"unit": "docs"|"tokens", "value": N}``), so the
    comparison below says what it compares against."""
    lead = "here the same documents are counted in our tokens (EOT excluded)"
    value = target and target.get("value")
    amount = "all the sources hold" if value == "all" else f"{value:,} targeted" if value else ""
    if target and target.get("unit") == "docs":
        return (f"Stage 1 met the recipe in documents ({amount}), not tokens; {lead}, so a "
                "deviation is mostly the sources' different document lengths, plus dedup.")
    if target and target.get("unit") == "tokens":
        return (f"Stage 1 met the recipe in DeepSeek-V3 tokens ({amount}); {lead}, so a deviation "
                "is our tokenizer compressing a domain differently, plus dedup.")
    return f"Stage 1's target unit is not recorded; {lead}."


def _encoder_cell(e: dict[str, Any] | None) -> str:
    """The tokenize engine and its identity check against HF (fastbpe.py)."""
    if not e:
        return "HF tokenizers"
    if e["engine"] != "tiktoken":
        return f"HF tokenizers ({e['reason']})"
    c = e["check"]
    return (f"tiktoken, ids checked against HF on {c['docs_checked']:,} of {c['docs_encoded']:,} documents "
            f"({c['tokens_checked']:,} tokens, {c['mismatches']} different)")


def report_markdown(r: dict[str, Any]) -> str:
    t, e = r["timing"], r["eot"]
    tail = (f"dropped tail: {r['dropped_tail_tokens']:,} tokens ({len(r['tail_docs']['dropped_entirely'])} docs in no "
            f"block, {len(r['tail_docs']['truncated'])} truncated)" if r["tail"] == "drop"
            else f"padded: {r['pad_tokens']:,} `<|pad|>` tokens, pad share {100 * r['pad_share']:.4f}%")
    lines = [
        "# Packing report", "",
        f"{r['docs']:,} documents -> {r['tokens_produced']:,} tokens (ours, one EOT each) -> **{r['blocks']:,} blocks "
        f"of {r['seq_len']:,}** (uint32, max id {r['max_token_id']:,} < vocab {r['vocab_size']:,}).", "",
        "| metric | value |", "|---|---:|",
        f"| tokens in blocks | {r['tokens_in_blocks']:,} |",
        f"| packing efficiency (in blocks / produced) | {100 * r['packing_efficiency']:.4f}% |",
        f"| tail (`{r['tail']}`) | {tail} |",
        f"| EOT produced = documents | {e['produced']:,} = {e['documents']:,} |",
        f"| EOT in written blocks | {e['in_blocks']:,} |",
        f"| documents split across blocks | {r['split_docs']['count']:,} ({100 * r['split_docs']['share']:.1f}%) |",
        f"| docs per block (mean / max) | {r['docs_per_block']['mean']} / {r['docs_per_block']['max']} |",
        f"| shards | {r['shards']['count']} ({r['shards']['total_bytes'] / 2**20:.1f} MiB; largest "
        f"{r['shards']['max_bytes'] / 2**20:.2f} MiB, limit {r['shards']['max_shard_bytes'] / 2**20:.1f} MiB) |",
        f"| wall / tokenize+pack / shuffle+write | {t['wall_s']} s / {t['pack_s']} s / {t['shuffle_write_s']} s |",
        f"| tokens/s (tokenize+pack) | {t['tokens_per_s']:,} on {t['threads']} threads |",
        f"| peak RSS | {t['peak_rss_mb']} MiB |",
        f"| encoder | {_encoder_cell(r.get('encoder'))} |", "",
        f"Spans: {r['span_convention']}.", "",
        "## Source shares in our tokens vs the recipe", "",
        _target_sentence(r.get("stage1_target")), "",
        "| source | docs | tokens | share | recipe | deviation |", "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in r["per_source"].items():
        rec = "" if s["recipe_share"] is None else f"{100 * s['recipe_share']:.1f}%"
        dev = "" if s["deviation"] is None else f"{100 * s['deviation']:+.1f} pp"
        lines.append(f"| {name} | {s['docs']:,} | {s['tokens']:,} | {100 * s['token_share']:.1f}% | {rec} | {dev} |")
    if r.get("by_source"):
        lines += ["", "## Per-source blocks (`pack.by_source`: single-source blocks, contiguous row ranges)", "",
                  "| source | rows [lo, hi) | blocks | docs | tokens in blocks | tail dropped | pad |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for name, b in r["by_source"].items():
            lo, hi = b["block_range"]
            lines.append(f"| {name} | [{lo:,}, {hi:,}) | {b['blocks']:,} | {b['docs']:,} | {b['tokens_in_blocks']:,} | "
                         f"{b['dropped_tail_tokens']:,} | {b['pad_tokens']:,} |")
    lines += ["", "## Documents per block", "", "| docs in block | blocks |", "|---:|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in r["docs_per_block"]["histogram"].items()]
    lines += ["", f"## Decoded sample blocks ({len(r['samples'])}, seeded; ⟦id⟧ opens a document, ⟦id +n⟧ continues "
              "one from its token n, ⟨EOT⟩ ends one; ~300 chars around the first boundary)", ""]
    for s in r["samples"]:
        docs = ", ".join(f"{x['doc_id']} [{x['start']}:{x['end']})" for x in s["spans"])
        lines += [f"**row {s['row']}**: {docs}", "", "```text", s["text"].replace("```", "ˋˋˋ"), "```", ""]
    return "\n".join(lines) + "\n"
