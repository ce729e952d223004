"""The impact note of one ticket (``reports/<run>/withdrawals/<ticket>.md``) and the run's release note
(``reports/<run>/release_note.md``: every applied ticket, what was removed, where, before/after)."""

from __future__ import annotations

from typing import Any

from ..mdsafe import md_code, md_text
from ..pipeline import MIXED_DEDUP, MIXED_RAW, PACKED, SMOKE_TRAIN, TOKENIZER

# the artifacts whose text verification scans (the tokenizer holds ids of a sample, the model weights)
TEXT_ARTIFACTS = (MIXED_RAW, MIXED_DEDUP, PACKED)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.3f}%"


def _figures_table(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    rows = [(f"{MIXED_RAW} documents", (MIXED_RAW, "docs")), (f"{MIXED_RAW} DeepSeek tokens", (MIXED_RAW, "tokens")),
            ("mix max deviation (pp)", (MIXED_RAW, "max_abs_deviation_pp")),
            (f"{MIXED_DEDUP} documents", (MIXED_DEDUP, "docs")), (f"{PACKED} documents", (PACKED, "docs")),
            (f"{PACKED} blocks", (PACKED, "blocks")), ("tokens produced (ours)", (PACKED, "tokens_produced")),
            ("tokens in blocks", (PACKED, "tokens_in_blocks")), ("dropped tail tokens", (PACKED, "dropped_tail_tokens")),
            ("pad tokens", (PACKED, "pad_tokens")), ("packing efficiency", (PACKED, "packing_efficiency"))]
    out = ["| figure | before | after |", "|---|---:|---:|"]
    for label, (a, k) in rows:
        b, c = before.get(a, {}).get(k), after.get(a, {}).get(k)
        fmt = _pct if k == "packing_efficiency" else (lambda v: "—" if v is None else f"{v:,}")
        out.append(f"| {label} | {fmt(b)} | {fmt(c)} |")
    shares_b = before.get(MIXED_RAW, {}).get("share_tokens", {})
    shares_a = after.get(MIXED_RAW, {}).get("share_tokens", {})
    ours_b = before.get(PACKED, {}).get("token_share", {})
    ours_a = after.get(PACKED, {}).get("token_share", {})
    out += ["", "| source | token share stage 1 (DeepSeek) before | after | token share packed (ours) before | after |",
            "|---|---:|---:|---:|---:|"]
    for s in shares_b:
        out.append(f"| {s} | {_pct(shares_b.get(s))} | {_pct(shares_a.get(s))} | {_pct(ours_b.get(s))} | "
                   f"{_pct(ours_a.get(s))} |")
    return out


def training_line(doc: str, t: dict[str, Any]) -> str:
    """One line of a withdrawal note: where a withdrawn document was trained."""
    if not t["steps"]:
        why = "; ".join(t["not_trained"]) or "never drawn"
        return f"{md_code(doc)}: never trained ({md_text(why)})"
    steps = ", ".join(map(str, t["steps"][:20])) + (", ..." if len(t["steps"]) > 20 else "")
    return (f"{md_code(doc)}: trained in steps {steps} ({t['exposures']} exposure(s), {t['tokens']:,} tokens); "
            f"checkpoints from step {t['first_checkpoint']} contain it (the run ended at step {t['last_step']})")


def _training_lines(training: dict[str, Any] | None) -> list[str]:
    """Where the smoke train read each withdrawn document (the step ledger, train/blame.py)."""
    if training is None:
        return ["- training: no smoke train of this packed data to look up"]
    return [f"- training: {training_line(d, t)}" for d, t in training.items()]


def impact_markdown(r: dict[str, Any], brief: bool = False) -> str:
    v, tk, loc = r["verification"], r[TOKENIZER], r["location"]
    verdict = "PASS: no trace in any artifact" if v["pass"] else f"FAIL: {len(v['traces'])} trace(s) remain"
    shards = r["shards"].get(PACKED, [])
    changed = [s for s in shards if s["changed"]]
    lines = [f"# Withdrawal {r['ticket']}", "",
             f"Requested by {md_text(r['who']) or '—'} ({md_text(r['why']) or 'no reason given'}); selectors "
             + ", ".join(md_code(f"{s['kind']}={s['value']}") for s in r["selectors"])
             + f"; accepted {r['accepted']}, applied {r['applied']}.", "",
             f"- documents withdrawn: {len(r['docs'])} "
             f"({', '.join(d['id'] + ' [' + d['via'] + ']' for d in r['docs'][:10])}"
             f"{', ...' if len(r['docs']) > 10 else ''})",
             f"- packed: {r['repack'].get('touched_blocks', 0)} block(s) touched, "
             f"{r['repack'].get('removed_tokens', 0):,} tokens removed, {r['repack'].get('moved_tokens', 0):,} tokens "
             f"of other documents re-packed into {r['repack'].get('new_blocks', 0)} block(s) with "
             f"{r['repack'].get('pad_tokens', 0):,} pad tokens; shards changed {len(changed)} of {len(shards)}, "
             f"the other {len(shards) - len(changed)} byte-identical (sha256 below)",
             f"- tokenizer: {tk['train_docs_withdrawn']} training documents withdrawn by this ticket, "
             f"{tk.get('train_docs_withdrawn_total', tk['train_docs_withdrawn'])} of {tk['train_docs']:,} since it was "
             f"trained ({_pct(tk['share'])}; retrain threshold {_pct(tk['threshold'])}) -> "
             + ("RETRAINED, every shard re-packed" if tk["retrained"] else
                "RETRAIN REQUIRED: run `bash run_pipeline.sh --from train_tokenizer --force` (retrains on the "
                "data without the withdrawn documents and re-packs everything), or pass --retrain-tokenizer with "
                "the request" if tk["retrain_required"] else
                "vocabulary kept (byte-identical)")
             + f"; {tk['heldout_docs_withdrawn']} held-out document(s) withdrawn",
             f"- smoke train: {r[SMOKE_TRAIN]}",
             *_training_lines(r.get("training")),
             f"- verification: **{verdict}** (checked "
             + ", ".join(f"{k} {n:,}" if isinstance(n, int) else f"{k}: {n}" for k, n in v["checked"].items()) + ")"]
    if brief:
        return "\n".join(lines) + "\n"
    lines += ["", "## Where the documents were", "",
              "| artifact | shard | rows |", "|---|---|---:|"]
    for art, per in loc["datasets"].items():
        for f, n in per.items():
            lines.append(f"| {art} | {f} | {n} |")
    for f, rows in loc["packed_blocks"].items():
        lines.append(f"| packed | {f} | blocks {', '.join(map(str, rows))} |")
    if loc["packing_tail"]:
        lines.append(f"| packed (dropped tail) | — | {', '.join(loc['packing_tail'])} |")
    lines += ["", "| document | source | via | parts in packed blocks |", "|---|---|---|---:|"]
    for d in r["docs"]:
        lines.append(f"| {d['id']} | {d['source']} | {d['via']} | {loc['packed_parts'].get(d['id'], 0)} |")
    lines += ["", "## Before / after", ""] + _figures_table(r["before"], r["after"])
    lines += ["", "## Shards (sha256)", "", "| artifact | shard | rows before -> after | changed | sha256 before | "
              "sha256 after |", "|---|---|---|:-:|---|---|"]
    for art, recs in r["shards"].items():
        for s in recs:
            lines.append(f"| {art} | {s['file']} | {s['rows_before']} -> {s['rows_after']} | "
                         f"{'yes' if s['changed'] else 'no'} | `{s['sha256_before'][:16]}` | `{s['sha256_after'][:16]}` |")
    lines += ["", "## Verification", "",
              f"Containment threshold {v['threshold']} (word n-grams in the datasets; token n-grams in the packed "
              f"stream, or decoded words after a tokenizer retrain); largest containment of each withdrawn document "
              "found in what remains:", "",
              "| document | " + " | ".join(TEXT_ARTIFACTS) + " |", "|---|---:|---:|---:|"]
    for d, best in v["max_containment"].items():
        lines.append(f"| {d} | " + " | ".join(f"{best.get(a, 0.0):.3f}" for a in TEXT_ARTIFACTS)
                     + " |")
    if v["traces"]:
        lines += ["", "Traces:", ""] + [f"- {x}" for x in v["traces"][:50]]
    return "\n".join(lines) + "\n"


def release_note(records: list[dict[str, Any]]) -> str:
    lines = ["# Release note: withdrawn documents", "",
             "Every deletion request applied to this run (`withdraw.py`; ticket log `deletion_requests.jsonl`). "
             "Per ticket: what was removed, where, and the figures before and after. Details and shard checksums: "
             "`withdrawals/<ticket>.md`.", ""]
    for r in records:
        v = r["verification"]
        lines += [f"## {r['ticket']} — {len(r['docs'])} document(s), applied {r['applied']}", "",
                  f"Requested by {md_text(r['who']) or '—'}: {md_text(r['why']) or 'no reason given'}. Selectors: "
                  + ", ".join(md_code(f"{s['kind']}={s['value']}") for s in r["selectors"]) + ".", "",
                  "Removed: " + ", ".join(f"`{d['id']}` ({d['source']}; {d['via']})" for d in r["docs"]) + ".", "",
                  "Where: " + "; ".join(f"{a}: {sum(p.values())} row(s)" for a, p in r["location"]["datasets"].items())
                  + f"; packed: {sum(len(x) for x in r['location']['packed_blocks'].values())} block(s) in "
                  f"{len(r['location']['packed_blocks'])} shard(s)"
                  + (f", dropped tail: {len(r['location']['packing_tail'])}" if r["location"]["packing_tail"] else "")
                  + f"; tokenizer sample: {r[TOKENIZER]['train_docs_withdrawn']} train / "
                  f"{r[TOKENIZER]['heldout_docs_withdrawn']} held out.", "",
                  f"Verification: {'PASS' if v['pass'] else 'FAIL (' + str(len(v['traces'])) + ' traces)'}.", ""]
        lines += _figures_table(r["before"], r["after"]) + [""]
    return "\n".join(lines) + "\n"
