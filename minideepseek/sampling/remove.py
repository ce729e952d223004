"""How a withdrawal removes documents from ``mixed_raw`` and refreshes stage 1's reports (the registry's
``remove_ids`` for mix_sampler): shards without the rows, per-source counters, the mix recomputed from
the data that is left (a withdrawn document may push a source out of tolerance), report entries naming a
withdrawn id dropped."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..arrow_io import read_columns
from ..edits import ArtifactEdit, EditContext, EditHost, filter_dataset, load_report, note_withdrawal, redact, save_report
from ..records import copy_epoch
from .filter_report import filter_report_markdown
from .report import TOLERANCE_PP, recipe_verdict, source_mix_markdown
from .signals import filter_store
from .stage import ARTIFACT, DELETION_INPUT


def remove_from_mixed_raw(w: EditHost, c: EditContext, ed: ArtifactEdit, man: dict[str, Any],
                          tmp: Path) -> dict[str, Any]:
    ids, bases, entry, docs = c.ids, c.bases, c.entry, c.docs
    present = w.present(ARTIFACT, ids)
    shards = filter_dataset(w.run_dir / ARTIFACT, tmp, ids)  # reports linked, then replaced by refresh
    filter_store(w.run_dir / ARTIFACT, tmp, bases)  # the signal store (sampler.signals), when there is one
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
    fp = w.deletion_log_fingerprint()
    result = {"shards": shards, "rows_removed": len(present)}
    w.commit(ed, man, tmp, entry, {"docs": man["counters"]["docs"] - len(present), "per_source": per},
             {DELETION_INPUT: fp}, result)
    return result


def refresh_mixed_raw(tmp: Path, bases: set[str], entry: dict[str, Any]) -> None:
    mix = load_report(tmp / "source_mix.json")
    c = read_columns(tmp, ["source", "n_tokens", "n_chars"])
    per: dict[str, Counter] = {}
    for s, t, ch in zip(c["source"], c["n_tokens"], c["n_chars"]):
        per.setdefault(s, Counter()).update({"docs": 1, "tokens": t, "chars": ch})
    totals = {k: sum(v[k] for v in per.values()) for k in ("docs", "tokens", "chars")}
    unit = mix["unit"]
    for r in mix["sources"]:
        got = per.get(r["source"], Counter())
        for k in ("docs", "tokens", "chars"):
            r[k] = got[k]
            r[f"share_{k}"] = round(got[k] / totals[k], 6) if totals[k] else 0.0
        dev = 100 * (r[f"share_{unit}"] - r["target_share"])
        r["deviation_pp"], r["abs_deviation_pp"] = round(dev, 4), round(abs(dev), 4)
        r["within_tolerance"] = abs(dev) <= TOLERANCE_PP
    t = mix["totals"]
    t.update(totals)
    t["max_abs_deviation_pp"] = max((r["abs_deviation_pp"] for r in mix["sources"]), default=0.0)
    t["all_within_tolerance"] = all(r["within_tolerance"] for r in mix["sources"])
    target = None if mix["target"] == "all" else mix["target"]
    t["target_fill"] = None if target is None else round(totals[unit] / target, 6)
    if "recipe" in mix:  # the verdict after the withdrawal (a withdrawn document may push a source out of tolerance)
        mix["recipe"] = recipe_verdict(mix["sources"], unit, target, totals[unit], mix["shortfall_policy"])
    mix, n = redact(mix, bases)
    note_withdrawal(mix, entry, n)
    save_report(tmp, "source_mix", mix, source_mix_markdown)
    fr, n = redact(load_report(tmp / "filter_report.json"), bases)
    note_withdrawal(fr, entry, n)
    save_report(tmp, "filter_report", fr, filter_report_markdown)
