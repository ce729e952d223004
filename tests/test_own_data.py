"""The README's "Use your own data" in one command: a folder of 200 of a user's JSONL notes (real text:
English stdlib docstrings, Chinese from 三国演义) through all five stages with configs/local_example.yaml
(only the path changed), every automatic sizing decision in summary.md, the user's ids in every artifact
and accepted by withdraw.py --id; --dry-run writes nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from own_data import write_notes

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _ids(artifact: Path, column: str = "id") -> list[str]:
    out: list[str] = []
    for f in sorted(artifact.glob("data-*.arrow")):
        with pa.memory_map(str(f)) as mm:
            t = pa.ipc.open_stream(mm).read_all()
        col = t.column(column).to_pylist()
        out += [x for v in col for x in (v if isinstance(v, list) else [v])]
    return out


def test_own_folder_runs_all_five_stages_with_its_ids(tmp_path: Path) -> None:
    notes = tmp_path / "my_notes"
    counts = write_notes(notes)
    assert counts == {"en.jsonl": 110, "zh.jsonl": 90}
    sets = [f"sources.my_docs.path={notes}", f"run.data_dir={tmp_path / 'data'}",
            f"run.reports_dir={tmp_path / 'reports'}",
            # CI time: a shorter tail of the report; max_epochs low enough that the step cap fires
            "train.bench_steps=0", "train.generate_tokens=8", "train.max_epochs=1"]
    args = [x for s in sets for x in ("--set", s)]
    run = subprocess.run(["bash", "run_pipeline.sh", "--config", "configs/local_example.yaml", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rep, data = tmp_path / "reports" / "my_run", tmp_path / "data" / "my_run"
    summary = (rep / "summary.md").read_text()
    assert "recipe met" in summary and "## Automatic sizing" in summary
    for setting in ("tokenizer.vocab_size", "pack.seq_len", "train.val_blocks", "train.max_steps"):
        assert f"`{setting}`" in summary, (setting, summary)
    smoke = json.loads((rep / "smoke_train.json").read_text())
    assert smoke["criteria"]["passed"]
    # the user's ids, in every artifact down to the packed blocks' document spans
    raw = _ids(data / "mixed_raw")
    assert len(raw) >= 180 and all(i.startswith(("my_docs/en-", "my_docs/zh-")) for i in raw), raw[:5]
    assert set(_ids(data / "mixed_dedup")) <= set(raw)
    packed = set(_ids(data / "packed", "doc_ids"))
    assert packed and all(i.startswith(("my_docs/en-", "my_docs/zh-")) for i in packed)
    target = next(i for i in sorted(packed) if i.startswith("my_docs/en-"))
    own = target.split("/", 1)[1]

    log = data / "deletion_requests.jsonl"
    wd = ["--config", "configs/local_example.yaml", *args]
    dry = subprocess.run([".venv/bin/python", "withdraw.py", *wd, "--id", "no-such-note", "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True)
    assert dry.returncode == 3 and "dry run: nothing written" in dry.stdout and not log.exists()
    dry = subprocess.run([".venv/bin/python", "withdraw.py", *wd, "--id", own, "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True)
    assert dry.returncode == 0 and target in dry.stdout and not log.exists()
    # the user's own id, without the source prefix: withdrawn from every artifact, then stage 5 retrained
    real = subprocess.run(["bash", "run_pipeline.sh", "withdraw", *wd, "--id", own, "--why", "test"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)
    assert real.returncode == 0, real.stdout[-3000:] + real.stderr[-3000:]
    assert target not in set(_ids(data / "packed", "doc_ids")) and target not in set(_ids(data / "mixed_raw"))
    assert log.is_file()
