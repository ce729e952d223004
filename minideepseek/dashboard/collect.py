"""The dashboard's figures of one run, read from its reports (``reports/<run>/*.json``) and, for stage
wall times, its ``summary.json`` or the manifests — never from the raw data, so a run whose data was
deleted (or a committed example run) can still be compared.

Metrics follow the seed's table P11-11: documents and tokens per source, dedup rate, text-length
distribution, language shares, code and math shares, tokenizer compression per domain, packed shard
sizes, contamination hits, stage wall times.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .. import pipeline
from ..artifact import CorruptArtifactError, read_manifest
from ..config import ConfigError
from ..fsio import sha256_file

SOURCE_MIX_JSON = pipeline.report("source_mix.json")  # its absence: not a run's report directory


def _load(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path} is not a readable JSON report ({type(exc).__name__}); regenerate it by rerunning "
                          f"its stage") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a report (a JSON object was expected); regenerate it by rerunning its stage")
    return data


def verify_reports(report_dir: Path, data_dir: Path | None) -> int:
    """Check the published reports against the artifacts that wrote them, before they are read: every
    report a stage's manifest lists must be byte-identical (sha256) to what the manifest recorded. A
    report that differs raises CorruptArtifactError naming the file and the command that rewrites it.
    Returns how many were checked (0 for a run without artifacts, e.g. a committed example)."""
    if data_dir is None:
        return 0
    checked = 0
    for spec in pipeline.STAGES:
        man = read_manifest(Path(data_dir) / spec.artifact)
        if man is None:
            continue
        listed = {f.get("path"): f for f in man.files if isinstance(f, dict)}
        for name in spec.reports:
            rep, want = Path(report_dir) / name, listed.get(name)
            if want is None or not (rep.exists() or rep.is_symlink()):
                continue
            why = ("is a symbolic link" if rep.is_symlink() else None) or (
                None if sha256_file(rep) == want.get("sha256") else "differs from what its stage wrote (sha256)")
            if why:
                name = str((man.config.get("run") or {}).get("name") or Path(report_dir).name)
                cmd = shlex.join(["python", spec.script, "--config", "CONFIG", "--set", f"run.name={name}"])
                raise CorruptArtifactError(f"report {rep} {why}; it cannot be trusted: republish it with `{cmd}` "
                                           f"(the run's own config; an up-to-date stage copies its reports again)")
            checked += 1
    return checked


def collect(report_dir: Path, data_dir: Path | None = None) -> dict[str, Any]:
    """Figures of the run whose reports are in ``report_dir`` (``data_dir``: its artifacts, optional).
    With artifacts, every report is first checked against its stage's manifest (``verify_reports``)."""
    report_dir = Path(report_dir)
    verified = verify_reports(report_dir, data_dir)
    mix = _load(report_dir / SOURCE_MIX_JSON)
    if mix is None:
        raise ConfigError(f"{report_dir / SOURCE_MIX_JSON} not found: not a run's report directory; run "
                          f"`bash run_pipeline.sh` for it first, or pass reports/<run> of a finished run")
    run = {"name": mix.get("run", report_dir.name), "dir": str(report_dir), "seed": mix.get("seed"), "sources": {}}
    for r in mix["sources"]:
        run["sources"][r["source"]] = {"target_share": r["target_share"], "docs": r["docs"], "tokens": r["tokens"],
                                       "share_docs": r["share_docs"], "share_tokens": r["share_tokens"]}
    run["totals"] = {"docs": mix["totals"]["docs"], "tokens": mix["totals"]["tokens"],
                     "max_abs_deviation_pp": mix["totals"]["max_abs_deviation_pp"]}

    dd = _load(report_dir / pipeline.report("dedup_report.json"))
    if dd:
        run["dedup"] = {"rate": dd["dup_rate"], "docs_in": dd["docs_in"], "docs_out": dd["docs_out"],
                        "per_source": {s: v.get("rate", 0.0) for s, v in dd["per_source"].items()}}
    prof = _load(report_dir / pipeline.report("data_profile.json"))
    if prof:
        run["profile"] = {s: _profile_entry(v) for s, v in prof["sources"].items()}
        run["profile_overall"] = _profile_entry(prof["overall"]) if prof["overall"].get("docs") else {}
    tk = _load(report_dir / pipeline.report("tokenizer_eval.json"))
    if tk:
        run[pipeline.TOKENIZER] = {"vocab": tk["vocab_size_final"], "per_source": {
            s: {name: m["tokens_per_char"] for name, m in by.items()} for s, by in tk["per_source"].items()}}
    pk = _load(report_dir / pipeline.report("packing_report.json"))
    if pk:
        sizes = [f["bytes"] for f in pk["shards"]["files"]]
        run["packing"] = {"blocks": pk["blocks"], "efficiency": pk["packing_efficiency"], "pad_tokens": pk["pad_tokens"],
                          "shard_bytes": sizes, "tokens_ours": {s: v["tokens"] for s, v in pk["per_source"].items()},
                          "share_ours": {s: v["token_share"] for s, v in pk["per_source"].items()}}
    con = _load(report_dir / pipeline.report("contamination_report.json"))
    if con:
        run["contamination_hits"] = con.get("hits", 0)
    cert = _load(report_dir / pipeline.report("certificate.json"))  # the recall certificate (canaries.enabled)
    if cert and _certified(data_dir):
        run["certificate"] = {"passed": cert["passed"], "line": cert["line"],
                              "recall": {s: v["recall"] for s, v in cert["steps"].items() if v["recall"] is not None},
                              "false_removals": sum(v["false_removals"] for v in cert["steps"].values())}
        for step in ("near", "decontamination"):
            run["certificate"][f"{step}_recall"] = cert["steps"][step]["recall"]
    st = _load(report_dir / pipeline.report("smoke_train.json"))
    if st:
        run[pipeline.SMOKE_TRAIN] = {"loss_last": st["loss"]["last"], "val_last": st["val"]["last"],
                              "passed": all(c["ok"] for c in st.get("criteria", {}).values() if isinstance(c, dict))}
    run["wall_s"] = _wall_times(report_dir, data_dir)
    run["reports_verified"] = verified  # reports checked against their artifacts' manifests (0: no artifacts)
    return run


def _certified(data_dir: Path | None) -> bool:
    """A published certificate belongs to the run unless its artifact says it was built without canaries
    (a later run without them leaves the earlier certificate in the report folder)."""
    if data_dir is None:
        return True
    man = read_manifest(Path(data_dir) / pipeline.MIXED_DEDUP)
    return man is None or "certificate" in man


def _profile_entry(v: dict[str, Any]) -> dict[str, Any]:
    ln = v["length"]
    return {"docs": v["docs"], "p10": ln.get("p10"), "p50": ln.get("p50"), "p90": ln.get("p90"),
            "histogram": ln.get("histogram_chars", {}), "lang": v["lang_share_docs"],
            "code": v["code_share_docs"], "math": v["math_share_docs"]}


def _wall_times(report_dir: Path, data_dir: Path | None) -> dict[str, float | None]:
    summ = _load(report_dir / "summary.json")
    out: dict[str, float | None] = {}
    if summ:
        for s, name in zip(summ.get("stages", []), pipeline.names()):
            out[name] = s.get("wall_s")
    if data_dir is not None:
        for spec in pipeline.STAGES:
            man = read_manifest(Path(data_dir) / spec.artifact)
            if man is not None:
                out[spec.name] = man.wall_s
    return out
