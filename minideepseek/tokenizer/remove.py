"""How a withdrawal removes documents from the tokenizer artifact (the registry's ``remove_ids`` for
train_tokenizer): the training/held-out sample lists without them, and the evaluation report noting it.
The vocabulary stays byte-identical; retraining is the withdrawal's decision (``withdraw.retrain_share``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..edits import ArtifactEdit, EditContext, EditHost, copy_artifact, load_report, note_withdrawal, redact, save_report
from ..fsio import write_json_atomic
from .report import eval_markdown
from .stage import ARTIFACT, UPSTREAM


def remove_from_tokenizer(w: EditHost, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry, decision = c.ids, c.bases, c.entry, c.decision
    src = w.run_dir / ARTIFACT
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
             {UPSTREAM: w.fingerprint(UPSTREAM)})
    return {}


def refresh_tokenizer(tmp: Path, bases: set[str], entry: dict[str, Any]) -> None:
    rep, n = redact(load_report(tmp / "tokenizer_eval.json"), bases)
    note_withdrawal(rep, entry, n)
    save_report(tmp, "tokenizer_eval", rep, eval_markdown)
