"""The whole pipeline through `run_pipeline.sh` on a small real subset of the demo corpus, and a
SIGKILL in the middle of a stage followed by a rerun that must give byte-identical artifacts."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

SMALL = {  # small enough for CI on 2 cores; every stage still does real work
    "sampler.target_tokens": 300_000,
    "tokenizer.vocab_size": 8_000,
    "dedup.scurve_docs": 20,
}


def _config(tmp: Path, name: str) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    cfg["run"].update({"name": "e2e", "data_dir": str(tmp / name / "data"), "reports_dir": str(tmp / name / "reports")})
    for key, value in SMALL.items():
        section, k = key.split(".")
        cfg.setdefault(section, {})[k] = value
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return p


def _small_train(cfg_path: Path) -> None:
    """Shrink the later stages when they exist in the config (pack, train)."""
    cfg = yaml.safe_load(cfg_path.read_text())
    if "pack" in cfg:
        cfg["pack"]["seq_len"] = 256
    if "train" in cfg:
        cfg["train"].update({"max_steps": 12, "warmup": 2, "eval_interval": 6, "seq_len": 128, "micro_batch": 4,
                             "val_blocks": 4, "fail_on_criteria": False})
    cfg_path.write_text(yaml.safe_dump(cfg, allow_unicode=True))


def _pipeline(cfg: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "MINIDEEPSEEK_LOG": "WARNING"}
    return subprocess.Popen(["bash", str(ROOT / "run_pipeline.sh"), "--config", str(cfg)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _data_files(run_dir: Path) -> dict[str, str]:
    """sha256 of every non-volatile output file of every stage, from the manifests."""
    out = {}
    for man_path in sorted(run_dir.glob("*/manifest.json")):
        man = json.loads(man_path.read_text())
        for f in man["outputs"]["files"]:
            if not f.get("volatile"):
                out[f"{man['artifact']}/{f['path']}"] = f["sha256"]
    return out


@pytest.mark.slow
def test_pipeline_end_to_end_and_kill_rerun(tmp_path):
    a = _config(tmp_path, "a")
    _small_train(a)
    p = _pipeline(a)
    out, _ = p.communicate(timeout=1800)
    assert p.returncode == 0, out
    run_a = tmp_path / "a" / "data" / "e2e"
    summary = (tmp_path / "a" / "reports" / "e2e" / "summary.md").read_text()
    assert "mix_sampler.py" in summary and "not run" not in summary, summary
    cost = json.loads((tmp_path / "a" / "reports" / "e2e" / "cost.json").read_text())  # the run's data bill
    assert "data bill" in out and cost["rows"] and (tmp_path / "a" / "reports" / "e2e" / "cost.md").is_file()
    files_a = _data_files(run_a)
    assert {k.split("/")[0] for k in files_a} >= {"mixed_raw", "mixed_dedup", "tokenizer"}

    # B: kill the pipeline with SIGKILL while stage 2 is writing, then rerun it
    b = _config(tmp_path, "b")
    _small_train(b)
    run_b = tmp_path / "b" / "data" / "e2e"
    p = _pipeline(b, start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline and not list(run_b.glob("mixed_dedup.tmp-*")):
        if p.poll() is not None:
            break
        time.sleep(0.05)
    assert p.poll() is None, "the pipeline finished before stage 2 could be interrupted"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not (run_b / "mixed_dedup" / "manifest.json").exists(), "a killed stage must not look complete"
    p = _pipeline(b)
    out, _ = p.communicate(timeout=1800)
    assert p.returncode == 0, out
    assert not list(run_b.glob("*.tmp-*")), "leftovers of the killed run are cleaned"
    assert _data_files(run_b) == files_a, "rerun after a kill == uninterrupted run, byte for byte"
