"""``reports/<run>/summary.md``: one page that links every report and states the pipeline's figures,
read from the stage manifests (never from the raw data).

    .venv/bin/python -m minideepseek.summary configs/demo.yaml [--set run.name=...]
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from typing import Any

from . import pipeline
from .artifact import read_manifest
from .bill import BillAssumptions
from .bill_cli import DEFAULT_FIT, load_fit, write_bill
from .config import apply_overrides, build
from .fsio import write_json_atomic, write_text_atomic
from .invocation import venv_python
from .provenance import git_commit, package_versions
from .runconfig import RunConfig, load_yaml
from .sampling.report import verdict_line
from .sizing import markdown_lines as sizing_lines

CERTIFICATE_MD, MIXTURE_MD = pipeline.report("certificate.md"), pipeline.report("mixture.md")


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def figures(run: RunConfig) -> dict[str, Any]:
    rd, rep = run.run_dir, run.report_dir
    out: dict[str, Any] = {"run": run.name, "seed": run.seed, "stages": [], "sizing": []}
    for spec in pipeline.STAGES:
        man = read_manifest(rd / spec.artifact)
        out["sizing"] += (man or {}).get("sizing") or []
        reports = spec.md_reports()
        out["stages"].append({
            "artifact": spec.artifact, "script": spec.script, "present": man is not None,
            "wall_s": man.wall_s if man else None, "peak_rss_mb": man.peak_rss_mb if man else None,
            "finished_at": man.finished_at if man else None, "fingerprint": man.fingerprint if man else None,
            "reports": [r for r in reports if (rep / r).is_file()]})
    mix = _load(rep / pipeline.report("source_mix.json"))
    if mix:
        out["docs_sampled"] = mix["totals"]["docs"]
        out["tokens_sampled_deepseek"] = mix["totals"]["tokens"]
        out["mix_max_deviation_pp"] = mix["totals"]["max_abs_deviation_pp"]
        out["filtered"] = mix["totals"].get("filtered")
        out["recipe"] = {"line": verdict_line(mix), **(mix.get("recipe") or {})}
    dd = _load(rep / pipeline.report("dedup_report.json"))
    if dd:
        out["dedup"] = {"docs_in": dd["docs_in"], "docs_out": dd["docs_out"], "removed": dd["removed"],
                        "dup_rate": dd["dup_rate"]}
    cert = _load(rep / pipeline.report("certificate.json"))
    if cert and (read_manifest(rd / pipeline.MIXED_DEDUP) or {}).get("certificate"):  # not one left by an earlier run
        out["certificate"] = {"passed": cert["passed"], "line": cert["line"], "canaries": cert["canaries"],
                              "steps": {s: {k: v[k] for k in ("verdict", "should_catch", "caught", "recall", "ci95",
                                                              "controls", "false_removals", "floor")}
                                        for s, v in cert["steps"].items()}}
    tk = _load(rep / pipeline.report("tokenizer_eval.json"))
    if tk:
        out[pipeline.TOKENIZER] = {"vocab": tk["vocab_size_final"], "target": tk["vocab_size_target"],
                            "round_trip": tk["round_trip"].get("ours")}
    pk = _load(rep / pipeline.report("packing_report.json"))
    if pk:
        out["packing"] = {k: pk.get(k) for k in ("blocks", "tokens_in_blocks", "packing_efficiency", "seq_len")}
    st = _load(rep / pipeline.report("smoke_train.json"))
    if st:
        out[pipeline.SMOKE_TRAIN] = smoke_train_figures(st)
    mx = _load(rep / pipeline.report("mixture.json"))  # the per-source mixture sampler's report (pack.by_source data)
    if mx:
        out["mixture"] = {"max_phase_deviation_pp": mx["max_phase_deviation_pp"], "phases": len(mx["phases"]),
                          "window_max_pp": mx["window"]["max_deviation_pp"], "window_bound_pp": mx["window"]["bound_pp"],
                          "epochs": {n: {k: e[k] for k in ("unique_tokens", "epochs", "consumed", "over_warning")}
                                     for n, e in mx["epochs"].items()}}
    # from the artifact, not the report folder: a committed example release note must not be claimed by
    # a fresh run that withdrew nothing
    raw = read_manifest(rd / pipeline.MIXED_RAW) or {}
    tickets = [w["ticket"] for w in raw.get("withdrawals", [])]
    demo_warnings = demo_corpus_warnings(raw)
    if demo_warnings:
        out["demo_corpus_warnings"] = demo_warnings
    if tickets:
        out["withdrawals"] = tickets
    out["environment"] = {"python": platform.python_version(), "packages": package_versions(), "git_commit": git_commit()}
    return out


def demo_corpus_warnings(raw_manifest: dict[str, Any]) -> list[str]:
    """Drift / unpinned demo-corpus packages (demo_corpus/pins.py) recorded in stage 1's inputs."""
    found = (w for inp in raw_manifest.get("inputs", []) for c in (inp.get("detail") or {}).get("components", [])
             for w in c.get("warnings") or [])
    return list(dict.fromkeys(found))


def smoke_train_figures(st: dict[str, Any]) -> dict[str, Any]:
    """The figures a reader checks first, from ``smoke_train.json`` (its nested layout: loss/val/throughput/
    criteria). A missing section is None, never a guess."""
    loss, val = st.get("loss") or {}, st.get("val") or {}
    thr, crit = st.get("throughput") or {}, st.get("criteria") or {}
    return {"steps": (st.get("steps") or {}).get("last"), "loss_first": loss.get("first"), "loss_last": loss.get("last"),
            "val_first": val.get("first"), "val_last": val.get("last"),
            "median_tokens_per_s": thr.get("median_tokens_per_s"), "passed": crit.get("passed"),
            "failed_criteria": [k for k, v in crit.items() if isinstance(v, dict) and v.get("ok") is False],
            "params": ((st.get("model") or {}).get("params") or {}).get("total")}


def _num(v: Any, fmt: str = ",") -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown(f: dict[str, Any]) -> str:
    lines = [f"# Pipeline summary — run `{f['run']}` (seed {f['seed']})", "",
             "| stage | artifact | wall (s) | peak RSS (MB) | reports |", "|---|---|---:|---:|---|"]
    for s in f["stages"]:
        links = ", ".join(f"[{r}]({r})" for r in s["reports"]) or "—"
        wall = "not run" if not s["present"] else f"{s['wall_s']}"
        lines.append(f"| `{s['script']}` | `{s['artifact']}` | {wall} | {s['peak_rss_mb'] or ''} | {links} |")
    lines += ["", "## Figures", ""]
    if "docs_sampled" in f:
        lines.append(f"- sampled: {f['docs_sampled']:,} docs, {f['tokens_sampled_deepseek']:,} DeepSeek tokens; "
                     f"max mix deviation {f['mix_max_deviation_pp']} pp; filtered {f.get('filtered') or 0:,} docs")
        if f.get("recipe"):
            met = f["recipe"].get("met", True)
            lines.append(f"- {'' if met else '**'}{f['recipe']['line']}{'' if met else '**'}")
    if "dedup" in f:
        d = f["dedup"]
        removed = ", ".join(f"{k} {v:,}" for k, v in d["removed"].items()) or "none"
        lines.append(f"- dedup: {d['docs_in']:,} -> {d['docs_out']:,} docs (removed: {removed}), duplicate rate "
                     f"{100 * d['dup_rate']:.2f}%")
    if "certificate" in f:
        c = f["certificate"]
        lines.append(f"- recall certificate ([{CERTIFICATE_MD}]({CERTIFICATE_MD})): {'' if c['passed'] else '**'}"
                     f"{c['line']}{'' if c['passed'] else '**'} ({c['canaries']:,} canaries, none written)")
    if pipeline.TOKENIZER in f:
        t = f[pipeline.TOKENIZER]
        rt = t.get("round_trip") or {}
        rt_s = f"{rt['ok']:,}/{rt['docs']:,} held-out docs" if "ok" in rt and "docs" in rt else "n/a"
        lines.append(f"- tokenizer: vocab {t['vocab']:,} (target {t['target']:,}); round trip {rt_s}")
    if "packing" in f:
        pk = f["packing"]
        eff = "n/a" if pk.get("packing_efficiency") is None else f"{100 * pk['packing_efficiency']:.2f}%"
        lines.append(f"- packing: {_num(pk.get('blocks'))} blocks of {_num(pk.get('seq_len'))} tokens = "
                     f"{_num(pk.get('tokens_in_blocks'))} tokens, efficiency {eff}")
    if pipeline.SMOKE_TRAIN in f:
        t = f[pipeline.SMOKE_TRAIN]
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[t["passed"]]
        failed = f" (failed: {', '.join(t['failed_criteria'])})" if t["failed_criteria"] else ""
        lines.append(f"- smoke train: {_num(t['steps'])} steps, loss {_num(t['loss_first'], '.3f')} -> "
                     f"{_num(t['loss_last'], '.3f')}, validation {_num(t['val_first'], '.3f')} -> "
                     f"{_num(t['val_last'], '.3f')}, {_num(t['median_tokens_per_s'], ',.0f')} tokens/s (median); "
                     f"{verdict}{failed}")
    if "mixture" in f:
        m = f["mixture"]
        lines.append(f"- training mixture ([{MIXTURE_MD}]({MIXTURE_MD})): {m['phases']} phase(s), realized share within "
                     f"{m['max_phase_deviation_pp']} pp of the schedule per phase, {m['window_max_pp']} pp per window "
                     f"(bound {m['window_bound_pp']} pp)")
        lines += ["", "| source | unique tokens U | planned epochs w·D/U | consumed epochs | > 4 epochs |",
                  "|---|---:|---:|---:|---|"]
        for n, e in m["epochs"].items():
            lines.append(f"| {n} | {e['unique_tokens']:,} | {e['epochs']:.3f} | {e['consumed']:.3f} | "
                         f"{'WARNING' if e['over_warning'] else ''} |")
        lines.append("")
    if "certificate" in f:
        lines += ["", "### Recall certificate (stage 2, seeded canaries)", "",
                  "| step | verdict | caught / must catch | recall | 95% CI | floor | false removals / controls |",
                  "|---|---|---:|---:|---|---:|---:|"]
        for step, s in f["certificate"]["steps"].items():
            ci = f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s["ci95"] else "—"
            lines.append(f"| {step} | {s['verdict']} | {s['caught']} / {s['should_catch']} | {_num(s['recall'], '.3f')} | "
                         f"{ci} | {s['floor']} | {s['false_removals']} / {s['controls']} |")
        lines.append("")
    if f.get("withdrawals"):
        lines.append(f"- withdrawals: {len(f['withdrawals'])} ticket(s) applied, see [release_note.md](release_note.md)")
    for w in f.get("demo_corpus_warnings", []):
        lines.append(f"- WARNING demo corpus {w}")
    lines += sizing_lines(f.get("sizing") or [])
    env = f["environment"]
    lines += ["", "## Environment", "", f"- Python {env['python']}; git commit `{env['git_commit']}`",
              "- " + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if k != "python"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    run = build(RunConfig, apply_overrides(load_yaml(args.config), args.overrides).get("run") or {}, "run")
    f = figures(run)
    write_json_atomic(run.report_dir / "summary.json", f)
    write_text_atomic(run.report_dir / "summary.md", markdown(f))
    print(f"artifacts: {run.run_dir}/   reports: {run.report_dir}/   summary: {run.report_dir / 'summary.md'}")
    try:  # the data bill with its default assumptions (`report.py bill RUN` takes others)
        fit, measured, fit_path = load_fit(str(DEFAULT_FIT) if DEFAULT_FIT.is_file() else None, run.name)
        cost = write_bill(run.name, run.report_dir, run.run_dir, BillAssumptions(), run.report_dir, fit, measured,
                          fit_path)
        print(f"data bill (projected to 1B / 70B / 15T tokens): {cost}")
    except Exception as exc:  # noqa: BLE001 - best effort: a partial run (--only) lacks what the bill reads
        print(f"data bill not written ({type(exc).__name__}: {exc}); run `{venv_python()} report.py bill {run.name}` "
              f"once stages 1-4 have reports")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
