"""Regenerate the measured figures of README.md and docs/*.md from the committed example reports, so
they cannot drift from them.

    .venv/bin/python -m minideepseek.readme_figures            # rewrite README.md + docs/*.md from reports/examples/demo
    .venv/bin/python -m minideepseek.readme_figures --check    # exit 1 (and show the diff) if a file differs
    .venv/bin/python -m minideepseek.readme_figures --run demo --reports-dir reports/examples --readme README.md

``scripts/regen_examples.sh`` makes the examples from one fresh run and then calls this; a user's own
runs (``reports/<run>/``) are never read unless named with ``--reports-dir``.

The README marks each generated region:

    <!-- figures:NAME -->
    ...generated, do not edit by hand...
    <!-- /figures:NAME -->

and NAME says what goes there (``BLOCKS`` below; ``NAME@RUN`` takes another run's reports, e.g. the
withdrawal example's own run). Everything is read from the run's JSON reports
(``reports/examples/<run>/*.json``; stage wall times and peak RSS from ``summary.json``, which copies
them from the stage manifests), never typed in. A key that a report no longer has stops the script with
the file and the key path, rather than printing a stale or empty figure. ``tests/test_readme_figures.py``
fails when a committed page differs from what the committed example reports give.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shlex
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import pipeline
from .invocation import venv_python

MARKER = re.compile(r"<!-- figures:(?P<name>[\w.@-]+) -->\n(?P<body>.*?)<!-- /figures:(?P=name) -->", re.S)


# the stage reports these figures read, by the registry's names (a report a stage renames fails here, at import)
SOURCE_MIX = pipeline.report("source_mix.json")
FILTER_REPORT = pipeline.report("filter_report.json")
DEDUP_REPORT = pipeline.report("dedup_report.json")
CONTAMINATION_REPORT = pipeline.report("contamination_report.json")
TOKENIZER_EVAL = pipeline.report("tokenizer_eval.json")
PACKING_REPORT = pipeline.report("packing_report.json")
SMOKE_TRAIN_REPORT = pipeline.report("smoke_train.json")
CERTIFICATE = pipeline.report("certificate.json")
CERTIFICATE_MD = pipeline.report("certificate.md")


class FiguresError(RuntimeError):
    """A report or key the README's figures need is missing: regenerate the run, or update this module."""


class Reports:
    """Lazy access to ``reports/<run>/<name>`` (``.json`` added when ``name`` has none) with key paths that
    fail clearly."""

    def __init__(self, report_dir: Path) -> None:
        self.dir = report_dir
        self._cache: dict[str, Any] = {}

    def path(self, name: str) -> Path:
        return self.dir / (name if name.endswith(".json") else f"{name}.json")

    def doc(self, name: str) -> Any:
        if name not in self._cache:
            path = self.path(name)
            if not path.is_file():
                raise FiguresError(f"{path} is missing: run the pipeline for this run (or pass --run/--reports-dir)")
            self._cache[name] = json.loads(path.read_text(encoding="utf-8"))
        return self._cache[name]

    def get(self, name: str, *path: str | int) -> Any:
        cur = self.doc(name)
        for i, k in enumerate(path):
            try:
                cur = cur[k]
            except (KeyError, IndexError, TypeError):
                where = ".".join(map(str, path[: i + 1]))
                raise FiguresError(f"{self.path(name)} has no key {where!r}; the report format changed: "
                                   f"update minideepseek/readme_figures.py (or regenerate the run)") from None
        return cur

    def stage(self, artifact: str) -> dict[str, Any]:
        for s in self.get("summary", "stages"):
            if s.get("artifact") == artifact:
                if s.get("wall_s") is None:
                    raise FiguresError(f"{self.dir / 'summary.json'}: stage {artifact} has no wall time (not run?)")
                return s
        raise FiguresError(f"{self.dir / 'summary.json'} lists no stage {artifact!r}")


def _pct(x: float, nd: int = 1) -> str:
    return f"{100 * x:.{nd}f}%"


def _s(x: float) -> str:
    return f"{x:.1f} s" if x < 100 else f"{x:.0f} s"


def _by_source(items: Any) -> dict[str, Any]:
    """``[{"source": name, ...}, ...]`` or ``{name: {...}}`` -> ``{name: {...}}``."""
    return {x["source"]: x for x in items} if isinstance(items, list) else dict(items)


def demo_table(r: Reports) -> str:
    """The "Measured on the demo" table: one row per stage, every figure from the reports."""
    unit = r.get(SOURCE_MIX, "unit")
    tot = r.get(SOURCE_MIX, "totals")
    mix = _by_source(r.get(SOURCE_MIX, "sources"))
    fsrc = _by_source(r.get(FILTER_REPORT, "sources"))
    tok_or_docs = "share_tokens" if unit == "tokens" else "share_docs"
    s1, s2, s3, s4, s5 = (r.stage(a) for a in pipeline.artifacts())
    rows = [("stage 1 output",
             f"{tot['docs']:,} documents, {tot['tokens']:,} DeepSeek tokens, {tot['chars'] / 1e6:.1f} M chars; "
             f"{r.get(SOURCE_MIX, 'totals', 'rejects'):,} invalid rejects, "
             f"{r.get(FILTER_REPORT, 'totals', 'dropped'):,} filtered ("
             + ", ".join(f"{n} {_pct(s['drop_rate'])}" for n, s in fsrc.items()) + " of evaluated docs)"),
            ("stage 1 time", f"{_s(s1['wall_s'])}, {s1['peak_rss_mb']:,.0f} MB peak RSS"),
            (f"mix vs recipe ({'token' if unit == 'tokens' else 'document'} share)",
             " / ".join(f"{n} {_pct(s[tok_or_docs], 2)}" for n, s in mix.items())
             + f"; max deviation {tot['max_abs_deviation_pp']:.3f} pp (tolerance {r.get(SOURCE_MIX, 'tolerance_pp')} pp)")]
    dd = r.doc(DEDUP_REPORT)
    removed = ", ".join(f"{v:,} {k}" for k, v in r.get(DEDUP_REPORT, "removed").items()) or "nothing"
    rows.append(("stage 2", f"{r.get(DEDUP_REPORT, 'docs_in'):,} -> {r.get(DEDUP_REPORT, 'docs_out'):,} "
                 f"documents ({removed}; duplicate rate {_pct(dd['dup_rate'], 2)}), "
                 f"{r.get(CONTAMINATION_REPORT, 'hits'):,} benchmark hits; {_s(s2['wall_s'])}, "
                 f"{s2['peak_rss_mb']:,.0f} MB peak RSS"))
    te = r.doc(TOKENIZER_EVAL)
    sample = r.get(TOKENIZER_EVAL, "sample")
    train_docs = sum(v["train_docs"] for v in sample.values())
    train_chars = sum(v["train_chars"] for v in sample.values())
    held = sum(v["heldout_docs"] for v in sample.values())
    rt = r.get(TOKENIZER_EVAL, "round_trip", "ours")
    per = r.get(TOKENIZER_EVAL, "per_source")

    def tpc(domain: str) -> str:
        for v in per.values():
            if v["ours"]["domain"] == domain:
                return f"{v['ours']['tokens_per_char']:.3f} (DeepSeek-V3 {v['deepseek_v3']['tokens_per_char']:.3f})"
        return "n/a"

    reached = "" if te["reached_target"] else " (the sample has no more merges with frequency >= 2; stated in the report)"
    rows.append(("stage 3", f"{train_docs:,} training docs ({train_chars / 1e6:.2f} M chars), {held:,} held out; vocab "
                 f"{te['vocab_size_final']:,} of the {te['vocab_size_target']:,} target{reached}; {_s(s3['wall_s'])}; "
                 f"round trip {rt['ok']:,}/{rt['docs']:,}; held-out tokens/char: Chinese {tpc('chinese')}, "
                 f"code {tpc('code')}"))
    pk = r.doc(PACKING_REPORT)
    t4 = r.get(PACKING_REPORT, "timing")
    tail = (f"dropped tail {pk['dropped_tail_tokens']:,} tokens" if r.get(PACKING_REPORT, "tail") == "drop"
            else f"{pk['pad_tokens']:,} pad tokens")
    shares = " / ".join(f"{_pct(v['token_share'])}" for v in r.get(PACKING_REPORT, "per_source").values())
    rows.append(("stage 4", f"{pk['blocks']:,} blocks x {pk['seq_len']:,} = {pk['tokens_in_blocks']:,} tokens, efficiency "
                 f"{_pct(pk['packing_efficiency'], 2)}, {tail}; EOT {r.get(PACKING_REPORT, 'eot', 'produced'):,} = "
                 f"{r.get(PACKING_REPORT, 'eot', 'documents'):,} documents; "
                 f"{_pct(r.get(PACKING_REPORT, 'split_docs', 'share'))} of documents split across blocks; "
                 f"{r.get(PACKING_REPORT, 'shards', 'count')} shards; {_s(s4['wall_s'])}, "
                 f"{t4['tokens_per_s'] / 1e3:,.0f}K tokens/s, {s4['peak_rss_mb']:,.0f} MB peak RSS; our-token shares "
                 f"{shares} (recipe order)"))
    st = r.doc(SMOKE_TRAIN_REPORT)
    params = r.get(SMOKE_TRAIN_REPORT, "model", "params")
    bench = r.get(SMOKE_TRAIN_REPORT, "throughput", "mask_bench")
    bench_s = (f" (document mask on {bench['with_mask']:,.0f} vs off {bench['without_mask']:,.0f} tokens/s)"
               if bench else "")
    rows.append(("stage 5", f"{params['total'] / 1e6:.1f} M parameters ({st['model']['n_layer']} layers, d_model "
                 f"{st['model']['d_model']}, {params['embedding'] / 1e6:.1f} M of them the tied "
                 f"{st[pipeline.TOKENIZER]['vocab_size'] / 1e3:.0f}K-vocab embedding), {st['steps']['last']} steps x "
                 f"{st['batch']['global_tokens']:,} tokens on {st['device']}: loss {st['loss']['first']:.2f} -> "
                 f"{st['loss']['last']:.2f}, validation {st['val']['first']:.2f} -> {st['val']['last']:.2f}, "
                 f"{len(st['loss']['spikes'])} spikes, {st['throughput']['median_tokens_per_s']:,.0f} tokens/s median"
                 f"{bench_s}; {_s(s5['wall_s'])}, {s5['peak_rss_mb']:,.0f} MB peak RSS; "
                 f"{'PASS' if r.get(SMOKE_TRAIN_REPORT, 'criteria', 'passed') else 'FAIL'}"))
    run = r.get("summary", "run")
    out = [f"| run `{run}` (seed {r.get('summary', 'seed')}) | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(out) + "\n"


def headline(r: Reports) -> str:
    """The README's one table: per stage what came out, its wall time and peak RSS (the depth is in
    docs/stages.md's ``demo`` table)."""
    s1, s2, s3, s4, s5 = (r.stage(a) for a in pipeline.artifacts())
    tot = r.get(SOURCE_MIX, "totals")
    dd = r.doc(DEDUP_REPORT)
    te = r.doc(TOKENIZER_EVAL)
    per = r.get(TOKENIZER_EVAL, "per_source")
    zh = next((v for v in per.values() if v["ours"]["domain"] == "chinese"), None)
    pk = r.doc(PACKING_REPORT)
    st = r.doc(SMOKE_TRAIN_REPORT)
    passed = "PASS" if r.get(SMOKE_TRAIN_REPORT, "criteria", "passed") else "FAIL"
    rows = [
        (s1, f"{tot['docs']:,} documents, {tot['tokens'] / 1e6:.1f}M DeepSeek tokens in the recipe's shares (max "
             f"deviation {tot['max_abs_deviation_pp']:.2f} pp); {tot['rejects']:,} invalid records and "
             f"{tot['filtered']:,} filtered documents counted, none lost"),
        (s2, f"{dd['docs_in']:,} -> {dd['docs_out']:,} documents ({_pct(dd['dup_rate'], 2)} duplicates across "
             f"sources), {r.get(CONTAMINATION_REPORT, 'hits'):,} benchmark hit(s) removed"),
        (s3, f"{te['vocab_size_final']:,}-token BPE; lossless on {r.get(TOKENIZER_EVAL, 'round_trip', 'ours', 'ok'):,} "
             "held-out documents" + (f"; Chinese {zh['ours']['tokens_per_char']:.3f} tokens/char vs DeepSeek-V3's "
                                     f"{zh['deepseek_v3']['tokens_per_char']:.3f}" if zh else "")),
        (s4, f"{pk['blocks']:,} blocks of {pk['seq_len']:,} tokens, {_pct(pk['packing_efficiency'], 2)} packed, "
             f"{r.get(PACKING_REPORT, 'shards', 'count')} `.arrow` shards"),
        (s5, f"{st['steps']['last']} steps on {st['device']}: loss {st['loss']['first']:.2f} -> {st['loss']['last']:.2f}, "
             f"validation {st['val']['first']:.2f} -> {st['val']['last']:.2f}; {passed}"),
    ]
    out = [f"| stage | run `{r.get('summary', 'run')}` (seed {r.get('summary', 'seed')}) | wall | peak RSS |",
           "|---|---|---:|---:|"]
    out += [f"| `{s['script']}` | {text} | {_s(s['wall_s'])} | {s['peak_rss_mb'] / 1024:.1f} GB |" for s, text in rows]
    total = sum(s["wall_s"] for s in (s1, s2, s3, s4, s5))
    out.append(f"| all five | | {_s(total)} | |")
    return "\n".join(out) + "\n"


def stage_times(r: Reports) -> str:
    """One line: each stage's wall time from the run's manifests (via summary.json)."""
    parts = [f"{s['script']} {_s(s['wall_s'])}" for s in r.get("summary", "stages") if s.get("wall_s") is not None]
    total = sum(s["wall_s"] for s in r.get("summary", "stages") if s.get("wall_s") is not None)
    return f"Stage wall times of this run: {', '.join(parts)} (stages only: {_s(total)}).\n"


def withdrawal(r: Reports) -> str:
    """The withdrawal example: every ticket's impact note (``withdrawals/<ticket>.json``) of its own run."""
    notes = sorted(r.dir.glob("withdrawals/*.json"))
    if not notes:
        return (f"No withdrawal example is committed in this checkout (`{shown(r.dir)}/withdrawals/` is empty): "
                f"`scripts/regen_examples.sh` produces it.\n")
    out = []
    for path in notes:
        w = r.get(f"withdrawals/{path.stem}")
        b, a, rp = w["before"], w["after"], w["repack"]
        blocks = w["location"]["packed_blocks"]
        shards = w["shards"][pipeline.PACKED]
        same = sum(1 for x in shards if x["sha256_before"] == x["sha256_after"])
        tk = w[pipeline.TOKENIZER]
        v = w["verification"]
        checked = v["checked"]
        raw_b, raw_a, pk_b, pk_a = b[pipeline.MIXED_RAW], a[pipeline.MIXED_RAW], b[pipeline.PACKED], a[pipeline.PACKED]
        rows_raw, rows_dedup = checked[f"{pipeline.MIXED_RAW}_rows"], checked[f"{pipeline.MIXED_DEDUP}_rows"]
        out.append(
            f"Ticket `{w['ticket']}` (`{shown(r.dir)}/release_note.md`): {len(w['docs'])} documents -> "
            f"{rp['touched_blocks']} blocks touched in {len(blocks)} of the {len(shards)} shards, the other {same} "
            f"shards byte-identical; {rp['removed_tokens']:,} tokens removed, {rp['moved_tokens']:,} tokens of other "
            f"documents re-packed into {rp['new_blocks']} blocks with {rp['pad_tokens']:,} pad tokens "
            f"({pk_b['blocks']:,} -> {pk_a['blocks']:,} blocks); {pipeline.MIXED_RAW} {raw_b['docs']:,} -> "
            f"{raw_a['docs']:,} documents, mix max deviation {raw_b['max_abs_deviation_pp']:.3f} -> "
            f"{raw_a['max_abs_deviation_pp']:.3f} pp; tokenizer "
            f"{'retrained' if tk['retrained'] else 'kept'} ({tk['train_docs_withdrawn_total']} of "
            f"{tk['train_docs']:,} training documents, {_pct(tk['share'], 2)}, threshold {_pct(tk['threshold'], 0)}); "
            f"verification {'PASS' if v['pass'] else 'TRACES FOUND'} over {rows_raw:,} + "
            f"{rows_dedup:,} rows, {checked['packed_blocks']:,} blocks and {checked['text_files']} "
            f"text files." + _trained(w.get("training")))
    return "\n\n".join(out) + "\n"


def _trained(training: dict[str, Any] | None) -> str:
    """The withdrawn documents' place in the smoke train (the step ledger), for the withdrawal figure."""
    if not training:
        return ""
    hit = [t for t in training.values() if t["steps"]]
    if not hit:
        return f" None of the {len(training)} documents had been trained by the smoke train."
    steps = sorted({s for t in hit for s in t["steps"]})
    return (f" The smoke train had read {len(hit)} of the {len(training)} documents in {len(steps)} of its "
            f"{hit[0]['last_step']} steps ({sum(t['exposures'] for t in hit)} exposures, "
            f"{sum(t['tokens'] for t in hit):,} tokens; checkpoints from step {min(t['first_checkpoint'] for t in hit)} "
            "contain them).")


def certificate(r: Reports) -> str:
    """The run's recall certificate (``certificate.json``, stage 2 with ``canaries.enabled``)."""
    if not r.path(CERTIFICATE).is_file():
        return f"No certificate in `{shown(r.dir)}/` (the run had `canaries.enabled: false`).\n"
    steps = r.get(CERTIFICATE, "steps")
    rows = ["| step | verdict | must catch | caught | recall (95% CI) | controls | false removals |",
            "|---|---|---:|---:|---|---:|---:|"]
    for step, s in steps.items():
        rec = "—" if s["recall"] is None else f"{s['recall']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]"
        rows.append(f"| {step} | {s['verdict']} | {s['should_catch']} | {s['caught']} | {rec} | {s['controls']} | "
                    f"{s['false_removals']} |")
    return (f"Recall certificate of the demo run (`{shown(r.dir)}/{CERTIFICATE_MD}`): "
            f"**{'PASS' if r.get(CERTIFICATE, 'passed') else 'FAIL'}**, "
            f"{r.get(CERTIFICATE, 'canaries'):,} canaries checked in {r.get(CERTIFICATE, 'wall_s')} s.\n\n"
            + "\n".join(rows) + "\n")


def blame(r: Reports) -> str:
    """The step ledger's example queries (``report.py blame``, saved under ``blame/`` by regen_examples.sh)."""
    steps, docs = sorted(r.dir.glob("blame/step-*.json")), sorted(r.dir.glob("blame/doc-*.json"))
    if not steps and not docs:
        return (f"No `report.py blame` example is committed in this checkout (`{shown(r.dir)}/blame/` is empty): "
                f"`scripts/regen_examples.sh` produces it.\n")
    out = []
    for path in steps:
        s = r.get(f"blame/{path.stem}")
        by_src = Counter(dict((d["id"], d["source"]) for rk in s["ranks"] for sq in rk["sequences"]
                              for d in sq["documents"]).values())
        verdict = ("verified (the rebuilt batches match the recorded sample ids and token digests)" if s["verified"]
                   else "not verified (trained before the ledger)" if s["unrecorded"] else "**MISMATCH**")
        out.append(f"Step {s['step']} of {s['steps']} (`{shown(r.dir)}/blame/{path.stem}.md`): {s['world']} rank(s) x "
                   f"{s['grad_accum']} micro-batch(es) x {s['micro_batch']} sequences of {s['seq_len']} tokens held "
                   f"{s['documents']} documents ("
                   + ", ".join(f"{n} {src}" for src, n in sorted(by_src.items(), key=lambda x: (-x[1], x[0])))
                   + f"); {verdict}.")
    for path in docs:
        d = r.get(f"blame/{path.stem}")
        reasons = Counter(n["reason"].split(":")[0] for n in d["not_trained"])
        untrained = "; ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "none"
        steps_txt = (f"trained in {len(d['steps'])} step(s) (first {d['steps'][0]}, last {d['steps'][-1]}), "
                     f"{d['exposures']} exposure(s), {d['tokens_trained']:,} tokens; the first checkpoint holding it "
                     f"is step {d['first_checkpoint']}" if d["steps"] else "never trained")
        out.append(f"Document `{d['id']}` ({d['source']}, `{shown(r.dir)}/blame/{path.stem}.md`): {len(d['pieces'])} "
                   f"packed piece(s); {steps_txt}; windows not trained: {untrained}.")
    return "\n\n".join(out) + "\n"


def dashboard(r: Reports) -> str:
    """The committed dashboard's comparison (``reports/examples/dashboard.json``, written by ``report.py compare``):
    which runs, and every drift flag it raised."""
    d = Reports(r.dir.parent)
    runs = [x["name"] for x in d.get("dashboard", "runs")]
    flags = d.get("dashboard", "flags")
    if len(runs) != 2 or flags is None:
        return f"`{shown(d.dir)}/dashboard.json` shows one run ({', '.join(runs)}): no comparison to report.\n"
    files = [f"`{shown(d.dir)}/dashboard.{x}`" for x in ("md", "png") if (d.dir / f"dashboard.{x}").is_file()]
    head = (f"Measured ({', '.join(files)}): `{runs[0]}` vs `{runs[1]}`, "
            f"{len(flags)} drift flag(s) at the thresholds recorded there:\n")
    return head + "".join(f"- {f['where']}: {f['detail']} (`{f['rule']}`)\n" for f in flags)


GOAL_WALL_H, GOAL_RSS_GB = 2.0, 16.0  # issue 20's goals for stages 1-4 at 1B tokens on 2 cores / 24 GiB


def scale(r: Reports) -> str:
    """The scale bench's sizes (``reports/examples/scale/results.json`` and ``fit.json``, written by
    ``bench/bench_scale.py``): per size and stage wall, CPU, peak RSS, bytes written and tokens per
    CPU-second; the growth fit; the largest size against the goals."""
    d = Reports(r.dir.parent / "scale")
    results, fits = d.doc("results"), d.get("fit", "fit")
    names = {a: pipeline.producer(a).script.removesuffix(".py") for a in fits}
    lines = ["| target DeepSeek tokens | sampled | packed (ours) | stage | wall s | CPU s | peak RSS MB (tree) "
             "| written MB | tokens per CPU-s | commit |", "|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for res in results:
        for a, st in res["stages"].items():
            lines.append(f"| {res['target_tokens']:,.0f} | {res['sampled_tokens']:,.0f} | {res['packed_tokens']:,.0f} "
                         f"| {names[a]} | {_ge(st)}{st['wall_s']:,.1f} | {st['cpu_s']:,.1f} | {st['peak_rss_tree_mb']:,.0f} "
                         f"| {st['bytes_written'] / 2**20:,.1f} | {_per_cpu_s(st)} "
                         f"| {(st.get('git_commit') or '?')[:7]} |")
    sizes = ", ".join(f"{x['packed_tokens'] / 1e6:,.1f}M" for x in results)
    lines += ["", f"Growth over the {len(results)} sizes ({sizes} packed tokens): exponents of a least-squares line "
              "in log-log against packed tokens, and CPU-s / RSS as fixed + marginal per 1M work units (`report.py bill`'s: "
              "DeepSeek tokens read by stage 1, sampled tokens for stage 2, sample tokens for stage 3, packed tokens "
              "for stage 4):", "",
              "| stage | wall exp. | CPU-s exp. | RSS exp. | CPU-s fixed + per 1M | RSS MB fixed + per 1M |",
              "|---|---:|---:|---:|---:|---:|"]
    for a, f in fits.items():
        cl, rl = f.get("cpu_linear"), f.get("rss_linear")
        cpu = f"{cl[0]:.1f} + {cl[1] * 1e6:.2f}" if cl else ""
        mem = f"{rl[0]:.0f} + {rl[1] * 1e6:.1f}" if rl else ""
        lines.append(f"| {names[a]} | {f['wall_exponent']} | {f['time_exponent']} | {f['rss_exponent']} | {cpu} | {mem} |")
    lines += ["", "At the largest size " + goal_sentence(results[-1], names)]
    note = continued_note(results[-1], names)
    if note:
        lines += ["", note]
    cross = projection_sentence(results, names)
    if cross:
        lines += ["", cross]
    return "\n".join(lines) + "\n"


def _per_cpu_s(st: dict) -> str:
    """Tokens per CPU-second, or why there is none (a continued stage has the continued part's CPU-s only)."""
    v = st["throughput"]["tokens_per_cpu_s"]
    return "n/a (continued)" if v is None else f"{v:,}"


def _ge(st: dict[str, Any]) -> str:
    """'≥ ' before a stage's wall when it is a lower bound (continued after a kill)."""
    return "≥ " if st.get("wall_is_lower_bound") else ""


def continued_note(top: dict[str, Any], names: dict[str, str]) -> str:
    """The stages of ``top`` that an earlier call left killed and ``bench_scale.py --continue-killed``
    finished from their units: their wall is a lower bound, their CPU and peak RSS the continued part's
    ('' when none)."""
    parts = [f"{names[a]} ran at least {k['wall_s_at_least'] / 60:,.1f} min ({k['started_utc']} to its last "
             f"finished unit at {k['last_unit_utc']}, {k['units_finished']:,} units) before it was killed, and was "
             f"finished from those units in {k['continued_wall_s'] / 60:,.1f} min"
             for a, st in top["stages"].items() if (k := st.get("continued_killed_run"))]
    if not parts:
        return ""
    return ("≥: " + "; ".join(parts) + ". Its wall is the sum of the two parts, a lower bound (the killed part's "
            "last minutes after its last unit are not counted); its CPU and peak RSS are the continued part's only.")


def goal_sentence(top: dict[str, Any], names: dict[str, str]) -> str:
    """The size ``top`` against the goals: stages 1-4 wall (scaled to 1B sampled tokens when its sources ran
    dry; "at least" when a stage was continued after a kill) and peak RSS."""
    wall = sum(st["wall_s"] for st in top["stages"].values())
    at_least = "at least " if any(st.get("wall_is_lower_bound") for st in top["stages"].values()) else ""
    rss = max(st["peak_rss_tree_mb"] for st in top["stages"].values())
    disk = sum(st["bytes_written"] for st in top["stages"].values())
    worst = max(top["stages"], key=lambda a: top["stages"][a]["peak_rss_tree_mb"])
    at_goal = top["target_tokens"] >= 1e9  # the goals are stated for the seed's 1B tokens
    # a corpus that ran short sampled less than its target: the time goal is judged on the wall scaled
    # linearly to 1B sampled tokens (memory is stated as measured)
    k = max(1.0, 1e9 / top["sampled_tokens"]) if at_goal else 1.0

    def verdict(ok: bool) -> str:
        return ("met" if ok else "**not met**") if at_goal else "the goal is for 1B"

    scaled = f" = **{wall * k / 3600:.2f} h** scaled linearly to 1B sampled tokens" if k > 1.0 else ""
    # settings a call added to the demo config's (bench_scale.py --set) are part of what was measured
    extra = "".join(f", `--set {x}`" for x in top.get("extra_sets", []))
    return (f"({top['target_tokens']:,.0f} target DeepSeek tokens, {top['sampled_tokens']:,.0f} sampled, "
            f"{top['packed_tokens']:,.0f} packed{extra}): stages 1-4 took {at_least}**{wall / 3600:.2f} h** wall{scaled} "
            f"(goal <= {GOAL_WALL_H:g} h: {verdict(wall * k <= GOAL_WALL_H * 3600)}), peak RSS **{rss / 1024:.1f} GB** as "
            f"measured ({names[worst]}; goal <= {GOAL_RSS_GB:g} GB: {verdict(rss <= GOAL_RSS_GB * 1024)}), "
            f"**{disk / 2**30:.1f} GiB** written by the four artifacts.{_beside(top)}")


def _beside(top: dict[str, Any]) -> str:
    """What the machine did besides the stages (bench_scale records it from /proc/stat since 2026-12-07):
    a slow row on a busy or oversubscribed machine says so; rows measured before say nothing."""
    st = list(top["stages"].values())
    if not all("other_cpu_s" in x for x in st):
        return ""
    cpu = sum(x["cpu_s"] for x in st)
    other, steal = sum(x["other_cpu_s"] for x in st), sum(x["steal_s"] for x in st)
    return (f" Meanwhile the machine's other processes (the bench's own monitor included) used {other:,.0f} "
            f"CPU-seconds beside the stages' {cpu:,.0f}, and the hypervisor took {steal:,.0f} s of CPU (steal).")


def projection_sentence(results: list[dict], names: dict[str, str]) -> str:
    """1B projected from the two largest sizes below it that sampled the recipe's mix ('' without two)."""
    proj = project_wall(results)
    if proj is None:
        return ""
    lo, hi, per = proj
    total = sum(per.values())
    run = next((r for r in results if r["target_tokens"] >= 1e9 and r["sampled_tokens"] >= FULL_SAMPLE * r["target_tokens"]),
               None)
    # with a measured 1B run, the run is the verdict: say how far the straight line is from it
    gap = ""
    if run is not None:
        wall = sum(st["wall_s"] for st in run["stages"].values())
        at_least = "at least " if any(st.get("wall_is_lower_bound") for st in run["stages"].values()) else ""
        gap = (f" The measured run took {at_least}{wall / 3600:.2f} h, {at_least}{wall / total:.1f}x this line: the "
               "run, not the line, is the verdict (the sizes' commits differ; see the table).")
    return (("Cross-check against the measured 1B run: projected" if run is not None else "Projected")
            + f" to 1B sampled tokens from the two largest sizes that sampled their whole target "
            f"({lo['sampled_tokens']:,.0f} and {hi['sampled_tokens']:,.0f}: the recipe's mix), each stage's wall "
            "extended linearly by its marginal seconds per sampled token between them: "
            + ", ".join(f"{names[a]} {w / 60:,.0f} min" for a, w in per.items())
            + f" = **{total / 3600:.2f} h** (goal <= {GOAL_WALL_H:g} h: "
            f"{'met' if total <= GOAL_WALL_H * 3600 else '**not met**'}; train_tokenizer's BPE sample is "
            "capped by `tokenizer.max_train_chars`, so its linear share is an upper bound)." + gap)


def scale_goals(r: Reports) -> str:
    """The README's scale section: the largest size per stage against the goals, the projection as a
    cross-check, and the kill-and-resume figures at scale (``bench/bench_resume.py``)."""
    d = Reports(r.dir.parent / "scale")
    results = d.doc("results")
    top = results[-1]
    names = {a: pipeline.producer(a).script.removesuffix(".py") for a in top["stages"]}
    lines = ["| stage | wall min | CPU min | peak RSS GB (process tree) | written GiB | commit |",
             "|---|---:|---:|---:|---:|---|"]
    for a, st in top["stages"].items():
        lines.append(f"| {names[a]} | {_ge(st)}{st['wall_s'] / 60:,.1f} | {st['cpu_s'] / 60:,.1f} "
                     f"| {st['peak_rss_tree_mb'] / 1024:,.2f} | {st['bytes_written'] / 2**30:,.2f} "
                     f"| {(st.get('git_commit') or '?')[:7]} |")
    lines += ["", "At this size " + goal_sentence(top, names)]
    note = continued_note(top, names)
    if note:
        lines += ["", note]
    mix = top.get("mix")
    if mix:
        short = ", ".join(mix["short_sources"]) or "none"
        lines.append(f"The recipe's mix: {'met' if mix['recipe_met'] else '**missed**'} (every source within "
                     f"{mix['max_abs_deviation_pp']:.3f} pp of its token share, tolerance ±{mix['tolerance_pp']:g} pp; "
                     f"sources that ran dry: {short}).")
    cross = projection_sentence(results, names)
    if cross:
        lines += ["", cross]
    for name, label in RESUME_RUNS:
        rows = [x for x in Reports(r.dir.parent).get(name, "stages") if "skipped" not in x]
        lines += ["", f"Kill and resume ({label}): " + "; ".join(
            f"{names.get(x['stage'], x['stage'])} killed after {x['killed_after_unit']:,} of {x['units']:,} units "
            f"({x['killed_s']:,.1f} s in), resumed in {x['resumed_s']:,.1f} s against {x['uninterrupted_s']:,.1f} s "
            f"uninterrupted (redone: **{x['redone_s']:,.1f} s**; without resume {x['redone_without_resume_s']:,.1f} s), "
            f"{'same fingerprint' if x['identical'] else '**fingerprint differs**'}" for x in rows) + "."]
        if any(x["redone_s"] < 0 for x in rows):
            lines.append("A negative redone figure: the uninterrupted run was slower than the killed run and its "
                         "resume together (sequential runs on a shared 2-core machine vary by ±30%).")
    sets = "".join(f" --set {x}" for x in top.get("extra_sets", []))  # what the row was measured with
    lines += ["", f"Reproduce: `.venv/bin/python bench/bench_scale.py --sizes 1e9 --resume --publish{sets}` (corpus build "
              "excluded from the figures; `--resume` continues a size stage by stage after a kill, measuring a "
              "killed stage again whole; add `--continue-killed` to finish it from its units instead, its wall "
              "then a lower bound), then "
              "`.venv/bin/python -m minideepseek.readme_figures`; the kill test: docs/scale.md, \"Kill and resume at "
              "scale\"."]
    return "\n".join(lines) + "\n"


def warc_bench(r: Reports) -> str:
    """``bench/bench_warc.py``'s one run (``reports/examples/bench_warc.json``): per side records and MB of WARC
    per CPU-second, the ratio, text agreement and LaTeX kept."""
    d = Reports(r.dir.parent)
    b = d.doc("bench_warc")
    inp = d.get("bench_warc", "input")
    lines = ["| pipeline (one process) | HTML records | kept by the filters | CPU s | records per CPU-s "
             "| WARC MB per CPU-s |", "|---|---:|---:|---:|---:|---:|"]
    sides = [("ours", "FastWARC + resiliparse")]
    if d.get("bench_warc", "datatrove", "available"):
        sides.append(("datatrove", f"datatrove {b['datatrove']['versions']['datatrove']}: WarcReader (warcio) + "
                                   f"Trafilatura {b['datatrove']['versions']['trafilatura']}"))
    for key, label in sides:
        x = d.get("bench_warc", key)
        lines.append(f"| {label} | {x['records']:,} | {x['kept']:,} | {x['cpu_s']:,.2f} | {x['records_per_cpu_s']:,.1f} "
                     f"| {x['warc_mb_per_cpu_s']:,.3f} |")
    lines.append("")
    if len(sides) == 1:
        lines.append(f"datatrove was not run: {d.get('bench_warc', 'datatrove', 'why')}.")
    else:
        ag, lx = d.get("bench_warc", "agreement"), d.get("bench_warc", "latex")
        lines.append(f"Ours is **{b['ratio_records_per_cpu_s']:g}x** datatrove's records per CPU-second (goal: 2x) on "
                     f"{inp['files']} WARC files ({inp['warc_mb']:g} MB). Extracted text on the "
                     f"{ag['pages_both_extracted']} pages both extracted: word F1 {ag['word_f1_mean']:.2f} mean, "
                     f"{ag['word_f1_median']:.2f} median ({ag['chars_ours']:,} vs {ag['chars_datatrove']:,} chars). On "
                     f"the {lx['ours']['pages']} pages with math in their HTML, ours keeps LaTeX on "
                     f"{lx['ours']['pages_with_latex']} ({lx['ours']['latex_tokens']:,} LaTeX tokens), datatrove on "
                     f"{lx['datatrove']['pages_with_latex']} ({lx['datatrove']['latex_tokens']:,}).")
    lines += ["", f"Command: `{b['command']}` ({b['machine']['cpus']} CPUs, Python {b['machine']['python']}, "
              f"commit {b.get('git_commit') or '?'}; CPU-seconds, not wall: the machine was shared)."]
    return "\n".join(lines) + "\n"


RESUME_RUNS = (("scale/resume_100m", "scale corpus, 100M DeepSeek tokens"),)  # the demo's: docs/operations.md


def resume_bench(r: Reports) -> str:
    """``bench/bench_resume.py``'s runs (``reports/examples/scale/resume_100m.json``, the scale corpus): per
    stage an uninterrupted build, one SIGKILLed after the unit at 60% of its units, the resume; the redone
    seconds and the fingerprint check."""
    d = Reports(r.dir.parent)
    lines = ["| corpus | stage | units | killed after unit | uninterrupted s | killed at s | resume s | redone s "
             "| without resume s | same fingerprint |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    notes = []
    for name, label in RESUME_RUNS:
        b = d.doc(name)
        for row in d.get(name, "stages"):
            if "skipped" in row:
                continue
            lines.append(f"| {label} | {row['stage']} | {row['units']:,} | {row['killed_after_unit']:,} "
                         f"| {row['uninterrupted_s']:,.1f} | {row['killed_s']:,.1f} | {row['resumed_s']:,.1f} "
                         f"| **{row['redone_s']:,.1f}** | {row['redone_without_resume_s']:,.1f} "
                         f"| {'yes' if row['identical'] else '**no**'} |")
        # a value with quotes in it (train='') reads better in double quotes than in shlex's escaping
        sets = " ".join(f"--set {shlex.quote(o) if chr(39) not in o else chr(34) + o + chr(34)}" for o in b["overrides"])
        env = ("MINIDEEPSEEK_CACHE=<bench/out/scale/N/cache> MINIDEEPSEEK_ALLOW_DERIVED_CORPUS=1 "
               if "scale" in name else "")
        notes.append(f"{label}: `{env}.venv/bin/python bench/bench_resume.py --config {b['config']} "
                     f"--stages {' '.join(x['stage'] for x in b['stages'])} --at {b['at']:g} {sets}`"
                     f" ({b['cpu_count']} CPUs, commit "
                     + ", ".join(sorted({(x.get('git_commit') or b.get('git_commit') or '?')[:7] for x in b['stages']}))
                     + ")")
    lines += ["", "Redone = killed + resume - uninterrupted: what the kill cost beyond one uninterrupted run "
              "(start-up, reading the sources or the upstream again, the unfinished unit); without resume a "
              "kill would cost the killed run's whole wall. Walls on a shared 2-core machine vary by ±30%.", ""]
    lines += [f"- {n}" for n in notes]
    if any(row.get("redone_s", 0) < 0 for name, _ in RESUME_RUNS for row in d.get(name, "stages")):
        lines += ["", "A negative redone figure means the uninterrupted build ran on a busier machine than the "
                  "killed run and its resume did (the three runs are sequential, not concurrent): compare the "
                  "resume's wall with the killed run's instead."]
    return "\n".join(lines) + "\n"


FULL_SAMPLE = 0.98  # a size "sampled its target" when stage 1 reached this share of it


def project_wall(results: list[dict]) -> tuple[dict, dict, dict[str, float]] | None:
    """Each stage's wall at 1B sampled tokens, linear through the two largest sizes below 1B that sampled
    their whole target (a size whose sources ran dry sampled another mix than the recipe's): the fixed
    cost stays fixed and the marginal cost per token holds. None with fewer than two such sizes."""
    full = sorted((r for r in results if r["sampled_tokens"] >= FULL_SAMPLE * r["target_tokens"]
                   and r["sampled_tokens"] < 1e9), key=lambda r: r["sampled_tokens"])
    if len(full) < 2:
        return None
    lo, hi = full[-2], full[-1]
    span = hi["sampled_tokens"] - lo["sampled_tokens"]
    per = {}
    for a, st in hi["stages"].items():
        slope = max(0.0, (st["wall_s"] - lo["stages"][a]["wall_s"]) / span)
        per[a] = st["wall_s"] + slope * (1e9 - hi["sampled_tokens"])
    return lo, hi, per


BLOCKS: dict[str, Callable[[Reports], str]] = {"demo": demo_table, "demo.times": stage_times, "withdraw": withdrawal,
                                               "headline": headline,
                                               "dashboard": dashboard, "scale": scale, "scale.goals": scale_goals,
                                               "blame": blame,
                                               "certificate": certificate,
                                               "warc_bench": warc_bench, "resume_bench": resume_bench,
                                               # the stage table comes from the registry, not from a run
                                               "stages": lambda r: pipeline.layout_table()}


def render(readme: str, reports: Reports) -> str:
    """``readme`` with every marked region regenerated. Unknown region names are errors."""
    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        kind, _, run = name.partition("@")  # NAME@RUN: the figures of another run (the withdrawal example)
        if kind not in BLOCKS:
            raise FiguresError(f"README region figures:{name} has no generator; known: {sorted(BLOCKS)}")
        r = Reports(reports.dir.parent / run) if run else reports
        return f"<!-- figures:{name} -->\n{BLOCKS[kind](r)}<!-- /figures:{name} -->"

    return MARKER.sub(sub, readme)


EXAMPLES = Path("reports") / "examples"  # committed example reports: no run writes here (RunConfig refuses the name)
ROOT = Path(__file__).resolve().parents[1]


def shown(path: Path) -> str:
    """A path as the pages show it: relative to the checkout when inside it (the same text from any cwd)."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def pages(root: Path = Path(".")) -> list[Path]:
    """The files with generated regions: README.md and every docs/*.md that has one."""
    out = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    return [p for p in out if p.is_file() and MARKER.search(p.read_text(encoding="utf-8"))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=".venv/bin/python -m minideepseek.readme_figures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="demo", help="the run whose reports fill the pages (default: demo)")
    ap.add_argument("--reports-dir", default=str(EXAMPLES), help=f"default: {EXAMPLES}")
    ap.add_argument("--readme", action="append", default=None, metavar="FILE",
                    help="a page to regenerate (repeatable; default: README.md and docs/*.md)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff if a page differs")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.readme] if args.readme else pages()
    src = f"{args.reports_dir}/{args.run}"
    rc = 0
    for path in paths:
        old = path.read_text(encoding="utf-8")
        if not MARKER.search(old):
            print(f"error: {path} has no <!-- figures:NAME --> regions", file=sys.stderr)
            return 2
        try:
            new = render(old, Reports(Path(args.reports_dir) / args.run))
        except FiguresError as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
        if args.check:
            if new != old:
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path),
                                                           f"{path} (from {src})"))
                print(f"{path}: figures differ from {src}; run `{venv_python()} -m minideepseek.readme_figures`",
                      file=sys.stderr)
                rc = 1
            else:
                print(f"{path}: figures match {src}")
            continue
        if new != old:
            path.write_text(new, encoding="utf-8")
        print(f"{path}: {len(MARKER.findall(new))} region(s) regenerated from {src}"
              + ("" if new != old else " (unchanged)"))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
