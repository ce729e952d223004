"""``quality_report.{md,json}``: what the quality filter did in a run, from its signal store. Stage 1
writes it into ``mixed_raw`` (published to ``reports/<run>/``) whenever a chain has a ``quality`` filter;
``python -m minideepseek.quality report --config C`` rebuilds it for an existing run.

Per source with a ``quality`` filter: the classifier's own held-out metrics (ROC AUC, precision/recall
at its threshold, the unseen groups) from the ``model_card.json`` beside the model, when there is one.
With ``sampler.signals: full`` (every rule scored every document) also: the score histogram by decile
(documents, kept by the run), three
example documents per decile (with how many are in the run's output: the quota may stop short of
every document that passed), the share kept at each threshold from 0.1 to 0.9 (of every scored
document, and of those the rule filters keep), and the model against the rules: documents the model
dropped that every rule kept, and the reverse, with examples. Snippets come from the kept documents'
text or ``rejects.jsonl`` (first 200 characters, PII-redacted, as the filter report quotes them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..fsio import write_json_atomic, write_text_atomic
from ..mdsafe import md_text, redact, snippet_md

CARD_FILE = "model_card.json"  # quality/train.py writes it next to model.bin
REPORT_JSON, REPORT_MD = "quality_report.json", "quality_report.md"

EXAMPLES = 3


def _snippets(art: Path) -> tuple[dict[str, str], set[str]]:
    """First 200 characters per document id (kept: the artifact; dropped: rejects.jsonl), and the kept ids."""
    from ..arrow_io import iter_dataset_rows

    out = {r["id"]: r["text"][:200] for r in iter_dataset_rows(art, ["id", "text"])}
    kept = set(out)
    rej = art / "rejects.jsonl"
    if rej.is_file():
        for line in rej.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r.get("id") and r.get("kind") == "filtered":
                out.setdefault(r["id"], r.get("snippet", "")[:200])
    return out, kept


def card_summary(model: str) -> dict[str, Any] | None:
    """The classifier's held-out figures from the model card next to the model file (None: no card, e.g. a
    published model used as is)."""
    card_path = Path(model).parent / CARD_FILE
    if not card_path.is_file():
        return None
    card = json.loads(card_path.read_text(encoding="utf-8"))
    split = card.get("split", {})
    return {"card": str(card_path), "model_sha256": card.get("model_sha256"),
            "roc_auc": (card.get("metrics") or {}).get("roc_auc"),
            "at_threshold": (card.get("metrics") or {}).get("at_threshold"),
            "held_out_docs": split.get("held_out_docs"), "train_docs": split.get("train_docs"),
            "held_out_groups": split.get("held_out_groups", []), "split_by": split.get("by"),
            "built_from": card.get("built_from")}


def quality_chains(chains: dict[str, Any]) -> dict[str, int]:
    """Source -> the index of its (first) quality filter."""
    out = {}
    for name, chain in chains.items():
        qi = [i for i, f in enumerate(chain) if f.get("type") == "quality"]
        if qi:
            out[name] = qi[0]
    return out


def build_quality_report(art: Path, run_name: str, chains: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report of the stage-1 artifact (or its tmp dir) ``art``. ``chains`` (source -> resolved filter
    specs) is needed only when the artifact has no signal store (then: per source the model card only)."""
    from .signals import STORE_DIR, read_store

    if not (art / STORE_DIR / "meta.json").is_file():
        sources = [{"source": name, "threshold": chain[q].get("threshold", chain[q].get("pilot_threshold")),
                    "top_fraction": chain[q].get("top_fraction"), "classifier": card_summary(chain[q]["model"])}
                   for name, chain in (chains or {}).items() for q in [quality_chains({name: chain}).get(name)]
                   if q is not None]
        return {"run": run_name, "signals": "none", "sources": sources}
    meta, tables = read_store(art)
    snippets, in_artifact = _snippets(art)
    sources = []
    for name, q in quality_chains(meta["chains"]).items():
        chain = meta["chains"][name]
        key = chain[q].get("signal", "quality_score")
        threshold = chain[q].get("threshold", chain[q].get("pilot_threshold"))
        rows = [r for r in tables[name].to_pylist() if r[f"verdict_{q}"] is not None]
        others = [i for i in range(len(chain)) if i != q]
        docs = []
        for r in rows:
            score = json.loads(r["signals"])[key]
            rules_keep = all(r[f"verdict_{i}"] == "" for i in others)
            docs.append({"id": r["id"], "url": r["url"], "score": score, "model_keep": r[f"verdict_{q}"] == "",
                         "rules_keep": rules_keep, "kept": r["id"] in in_artifact})
        deciles = []
        for b in range(10):
            lo, hi = b / 10, (b + 1) / 10
            inb = sorted((d for d in docs if lo <= d["score"] < hi or (b == 9 and d["score"] >= 1.0)),
                         key=lambda d: d["id"])
            deciles.append({"bin": f"[{lo:.1f}, {hi:.1f}{']' if b == 9 else ')'}", "docs": len(inb),
                            "kept": sum(d["kept"] for d in inb),
                            "examples": [_ex(d, snippets) for d in inb[:EXAMPLES]]})
        ruled = [d for d in docs if d["rules_keep"]]
        curve = [{"threshold": t / 10, "kept_share_all": _share(docs, t / 10),
                  "kept_share_rules_kept": _share(ruled, t / 10)} for t in range(1, 10)]
        model_only = sorted((d for d in docs if d["rules_keep"] and not d["model_keep"]), key=lambda d: d["score"])
        rules_only = sorted((d for d in docs if not d["rules_keep"] and d["model_keep"]), key=lambda d: -d["score"])
        ruled_kept = sum(d["model_keep"] for d in ruled)
        sources.append({"source": name, "threshold": threshold, "top_fraction": chain[q].get("top_fraction"),
                        "classifier": card_summary(chain[q]["model"]),
                        "kept_share_at_threshold": {"all": _share(docs, threshold),
                                                    "rules_kept": round(ruled_kept / len(ruled), 4) if ruled else None},
                        "scored": len(docs), "kept_by_model": sum(d["model_keep"] for d in docs),
                        "deciles": deciles, "kept_share_by_threshold": curve,
                        "agreement": {"both_keep": sum(d["rules_keep"] and d["model_keep"] for d in docs),
                                      "model_drops_rules_keep": len(model_only),
                                      "rules_drop_model_keeps": len(rules_only),
                                      "both_drop": sum(not d["rules_keep"] and not d["model_keep"] for d in docs)},
                        "model_drops_rules_keep": [_ex(d, snippets) for d in model_only[:EXAMPLES]],
                        "rules_drop_model_keeps": [_ex(d, snippets) for d in rules_only[:EXAMPLES]]})
    return {"run": run_name, "signals": meta["mode"], "sources": sources}


def _share(docs: list[dict[str, Any]], t: float | None) -> float | None:
    if t is None:
        return None
    return round(sum(d["score"] >= t for d in docs) / len(docs), 4) if docs else None


def _ex(d: dict[str, Any], snippets: dict[str, str]) -> dict[str, Any]:
    return {"id": d["id"], "url": redact(d["url"] or ""), "score": d["score"], "kept": d["kept"],
            "text": redact(snippets.get(d["id"], ""))}


def quality_markdown(rep: dict[str, Any]) -> str:
    if rep["signals"] == "full":
        intro = ("Scores are the classifier's probability of the positive label, stored per document by stage 1 "
                 "(`sampler.signals: full`); every document the source read was scored.")
    else:
        intro = (f"`sampler.signals: {rep['signals']}`: no per-document scores were stored, so this report holds the "
                 "classifier's card only; set `sampler.signals: full` for the histogram, examples and the model "
                 "against the rules.")
    lines = [f"# Quality filter report — run `{md_text(rep['run'])}`", "", intro, ""]
    for s in rep["sources"]:
        rule = (f"top fraction {s['top_fraction']} (pilot threshold {s['threshold']:.4f})" if s["top_fraction"]
                else f"threshold {s['threshold']}")
        lines += [f"## {md_text(s['source'])}", ""]
        lines += _card_lines(s.get("classifier"))
        if "scored" not in s:
            continue
        a = s["agreement"]
        k = s["kept_share_at_threshold"]
        lines += [f"{s['scored']:,} documents scored; {rule}: the model keeps {s['kept_by_model']:,} "
                  f"({s['kept_by_model'] / max(1, s['scored']):.1%}; of the documents every rule keeps: "
                  f"{_pct(k['rules_kept'])}).", "",
                  "| score decile | docs | in the run's output |", "|---|---:|---:|"]
        lines += [f"| {d['bin']} | {d['docs']:,} | {d['kept']:,} |" for d in s["deciles"]]
        lines += ["", "Kept share against the threshold:", "",
                  "| threshold | of all scored | of those the rules keep |", "|---:|---:|---:|"]
        for c in s["kept_share_by_threshold"]:
            lines.append(f"| {c['threshold']:.1f} | {_pct(c['kept_share_all'])} | {_pct(c['kept_share_rules_kept'])} |")
        lines += ["", "Model against the rules:", "", "| | model keeps | model drops |", "|---|---:|---:|",
                  f"| rules keep | {a['both_keep']:,} | {a['model_drops_rules_keep']:,} |",
                  f"| rules drop | {a['rules_drop_model_keeps']:,} | {a['both_drop']:,} |", ""]
        for key, title in (("model_drops_rules_keep", "Dropped by the model, kept by every rule (lowest scores)"),
                           ("rules_drop_model_keeps", "Dropped by a rule, kept by the model (highest scores)")):
            lines += [f"### {title}", ""]
            lines += [_ex_line(e) for e in s[key]] or ["(none)"]
            lines.append("")
        lines += ["### Examples per decile", ""]
        for d in s["deciles"]:
            for e in d["examples"]:
                lines.append(f"- {d['bin']} " + _ex_line(e)[2:])
        lines.append("")
    return "\n".join(lines) + "\n"


def _card_lines(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return ["Classifier: no `model_card.json` beside the model (a model not trained here); no held-out figures.",
                ""]
    auc = "undefined" if c["roc_auc"] is None else f"**{c['roc_auc']:.4f}**"
    t = c.get("at_threshold") or {}
    prf = (f"; at its card's threshold {t['threshold']}: precision {t['precision']:.3f}, recall {t['recall']:.3f}"
           if t else "")
    built = c.get("built_from") or {}
    src = (f" Built by stage 1 from the pinned corpus (source `{md_text(built['source'])}`, "
           f"{built.get('docs', 0):,} labeled documents)." if built.get("source") else "")
    groups = c["held_out_groups"]
    names = ", ".join(md_text(g) for g in groups)
    return [f"Classifier (card `{md_text(c['card'])}`, model sha256 `{(c['model_sha256'] or '')[:16]}`): held-out "
            f"ROC AUC {auc} on {c['held_out_docs'] or 0:,} documents of {len(groups)} group"
            f"{'' if len(groups) == 1 else 's'} it never saw ({names}; split by {c['split_by']}), trained on "
            f"{c['train_docs'] or 0:,}{prf}.{src}", ""]


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.1%}"


def _ex_line(e: dict[str, Any]) -> str:
    return f"- {e['score']:.3f} {'kept' if e['kept'] else 'dropped'} {md_text(e['id'])}: {snippet_md(e['text'], 160)}"


def write_quality_report(art: Path, out_dir: Path, run_name: str, chains: dict[str, Any] | None = None) -> Path:
    """Build the report of artifact ``art`` and write it into ``out_dir`` (stage 1: the artifact's tmp dir)."""
    rep = build_quality_report(art, run_name, chains)
    write_json_atomic(out_dir / REPORT_JSON, rep)
    write_text_atomic(out_dir / REPORT_MD, quality_markdown(rep))
    return out_dir / REPORT_MD
