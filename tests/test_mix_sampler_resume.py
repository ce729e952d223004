"""Stage 1 resumes inside the stage (issue 33, minideepseek/sampling/resume.py): killed after several of its
batches (the fault-injection hook, and a plain external SIGKILL at a time this test picks), the reruns reuse
the finished batches and the committed artifact is byte-identical to an uninterrupted run's: the same
fingerprint and the same sha256 for every file (shards, rejects.jsonl, the signal store, the reports)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_mix_sampler import _clean_corpus, _config, _corpus

import mix_sampler
from minideepseek.sampling.resume import BatchLog
from minideepseek.stage import read_manifest
from minideepseek.units import KILL_ENV, UNITS_DIR, Units

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.stage


def _cfg(tmp: Path) -> Path:
    """The stage-1 test recipe (two local sources, one streamed that reuses ids) with filters, the full
    signal store and small batches: about 40 units."""
    path = _config(tmp, _clean_corpus(tmp, _corpus(tmp / "corpus")))
    cfg = yaml.safe_load(path.read_text())
    cfg["sampler"].update({"signals": "full", "batch_size": 16})
    for s in cfg["sources"]:
        s["filters"] = {"code": [{"type": "code"}], "prose": [{"type": "gopher_repetition"}], "web": []}[s["name"]]
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(cfg: Path, kill_after: int = 0, *extra: str) -> subprocess.Popen:
    env = {**os.environ, KILL_ENV: f"mix_sampler:{kill_after}"}
    return subprocess.Popen([sys.executable, "mix_sampler.py", "--config", str(cfg), *extra], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _run(cfg: Path, kill_after: int = 0, *extra: str) -> tuple[int, str]:
    p = _start(cfg, kill_after, *extra)
    out, _ = p.communicate(timeout=300)
    try:  # a pool worker the kill orphaned goes with the session
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return p.returncode, out


def _finished(run_dir: Path) -> int:
    """Finished units in the (one) temp dir a killed run left."""
    tmps = list(run_dir.glob("mixed_raw.tmp-*"))
    assert len(tmps) <= 1, tmps
    return sum(1 for p in (tmps[0] / UNITS_DIR).glob("source=*.json")) if tmps else 0


def test_killed_stage1_resumes_to_identical_artifact(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    run_dir = tmp_path / "data" / "t"
    art = run_dir / "mixed_raw"
    assert mix_sampler.main(["--config", str(cfg)]) == 0  # the uninterrupted reference
    ref = read_manifest(art)
    total = ref["units"]["units_finished_here"]
    assert total >= 20, ref["units"]
    art.rename(run_dir / "reference")

    # 1. the hook kills it right after its 3rd batch
    rc, out = _run(cfg, 3)
    assert rc == -signal.SIGKILL, out
    assert _finished(run_dir) == 3 and not art.exists()

    # 2. a plain SIGKILL (the whole process group: the pool's workers too) once 5 more batches are done; this
    # run has two workers (num_proc is an execution setting: the units of a one-worker run are reused)
    p = _start(cfg, 0, "--set", "sampler.num_proc=2")
    deadline = time.monotonic() + 120
    while _finished(run_dir) < 8 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL, out
    assert "resuming the killed run" in out and "3 finished unit(s) are reused" in out
    done = _finished(run_dir)
    assert 8 <= done < total, done

    # 3. killed again right after the last batch (sampling over, nothing assembled yet); on Ray:
    # test_ray_executor.py::test_stage1_interrupted_on_ray_resumes_to_the_local_artifact
    rc, out = _run(cfg, total - done)
    assert rc == -signal.SIGKILL, out
    assert _finished(run_dir) == total

    # 4. the last rerun fetches nothing: every batch is read back, the artifact rebuilt from them
    rc, out = _run(cfg)
    assert rc == 0, out
    assert f"units: {total} batch(es) read back from the killed run, 0 fetched" in out
    man = read_manifest(art)
    assert man["resumed"]["units_reused"] == total and man["resumed"]["units_finished_here"] == 0
    assert man["fingerprint"] == ref["fingerprint"]
    assert [(f["path"], f["sha256"]) for f in man["outputs"]["files"]] == \
           [(f["path"], f["sha256"]) for f in ref["outputs"]["files"]]
    paths = {f["path"] for f in man["outputs"]["files"]}
    assert {"rejects.jsonl", "signals/code.parquet", "signals/meta.json", "source_mix.json"} <= paths
    assert not any(p.startswith(("_units", "_spill", "_spool")) for p in paths)
    assert not list(run_dir.glob("mixed_raw.tmp-*"))


def test_batch_log_reads_back_only_what_it_can_trust(tmp_path: Path) -> None:
    """A batch is read back only when its unit is finished with a readable payload of the same batch size;
    otherwise it is fetched again."""
    calls: list[int] = []

    def submit(k: int):  # noqa: ANN202
        def go():  # noqa: ANN202
            calls.append(k)
            return lambda: [{"k": k}]
        return go

    log1 = BatchLog(Units(tmp_path, "mix_sampler", "key"), 16)
    assert [log1.batch("web", submit(k))() for k in range(3)] == [[{"k": 0}], [{"k": 1}], [{"k": 2}]]
    assert log1.once("pilot.source=web.size=16", lambda: ("threshold", 0.25)) == ("threshold", 0.25)
    (tmp_path / UNITS_DIR / "source=web.size=16.batch=000001.pkl").write_bytes(b"torn")
    (tmp_path / UNITS_DIR / "source=web.size=16.batch=000002.pkl").unlink()
    calls.clear()
    log2 = BatchLog(Units(tmp_path, "mix_sampler", "key"), 16)
    assert [log2.batch("web", submit(k))() for k in range(4)] == [[{"k": k}] for k in range(4)]
    assert calls == [1, 2, 3] and log2.reused == 1
    assert log2.once("pilot.source=web.size=16", lambda: ("other", 1.0)) == ("threshold", 0.25)
    calls.clear()
    log3 = BatchLog(Units(tmp_path, "mix_sampler", "key"), 32)  # another batch size: other batches
    log3.batch("web", submit(0))()
    assert calls == [0]
