"""Resume inside stages 3 and 4 (minideepseek/units.py): the stage script is killed at several points inside
the stage (the MINIDEEPSEEK_KILL_AFTER_UNIT hook, and a plain external SIGKILL once some units are recorded),
rerun with the same command, and every data file and the fingerprint equal an uninterrupted run's. With
``--executor ray`` the partition tasks are units recorded by the driver; an interrupted run's are reused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pack_shuffle
from minideepseek.packing import partition
from minideepseek.stage import read_manifest
from minideepseek.units import KILL_ENV, UNITS_DIR, Units
from tests.chain import build_chain, run_in

ROOT = Path(__file__).resolve().parents[1]
UNIT_TOKENS = 3000
# units of <= 3,000 tokens or one batch of 2 documents (both execution only: the data is the same): ~20-40 units
_SMALL = ("--set", f"pack.unit_tokens={UNIT_TOKENS}", "--set", "pack.batch_docs=2")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Stages 1-4 on the small chain (the uninterrupted reference), stage 4 also with pack.by_source; packed in
    small units (``_SMALL``), so the manifests count them."""
    root = build_chain(tmp_path_factory.mktemp("resume"))
    ref = root.parent / "by_source"
    shutil.copytree(root, ref)
    small = ("--config", "t.yaml", "--force", *_SMALL)
    fp = _data(root / "data" / "t" / "packed")
    assert run_in(root, pack_shuffle, *small) == 0
    assert _data(root / "data" / "t" / "packed") == fp
    assert run_in(ref, pack_shuffle, *small, "--set", "pack.by_source=true") == 0
    return root, ref


def _data(art: Path) -> tuple[str, dict[str, str]]:
    man = read_manifest(art)
    return man["fingerprint"], {f["path"]: f["sha256"] for f in man["outputs"]["files"] if not f["volatile"]}


def _copy(src: Path, dst: Path, artifact: str) -> Path:
    """The run without ``artifact`` (so the stage builds it again)."""
    shutil.copytree(src, dst)
    shutil.rmtree(dst / "data" / "t" / artifact)
    return dst


def _script(root: Path, script: str, *sets: str, kill: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(KILL_ENV, None)
    if kill:
        env[KILL_ENV] = kill
    argv = [sys.executable, str(ROOT / f"{script}.py"), "--config", "t.yaml"]
    for s in sets:
        argv += ["--set", s]
    return subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _run(root: Path, script: str, *sets: str, kill: str = "") -> int:
    p = _script(root, script, *sets, kill=kill)
    _, err = p.communicate(timeout=300)
    assert p.returncode in (0, -signal.SIGKILL), err[-3000:]
    return p.returncode


def _units(root: Path, artifact: str) -> list[str]:
    return sorted(p.name for p in (root / "data" / "t").glob(f"{artifact}.tmp-*/{UNITS_DIR}/*.json")
                  if p.name != "key.json")


def test_train_tokenizer_killed_twice_resumes_to_the_same_tokenizer(chain, tmp_path):
    root, _ = chain
    run = _copy(root, tmp_path / "run", "tokenizer")
    assert _run(run, "train_tokenizer", kill="train_tokenizer:1") == -signal.SIGKILL  # right after the training
    assert _units(run, "tokenizer") == ["train.json"]
    # the rerun reuses the training and is killed again after the first evaluation it does itself
    assert _run(run, "train_tokenizer", kill="train_tokenizer:1") == -signal.SIGKILL
    assert _units(run, "tokenizer") == ["eval=component.ours.json", "train.json"]
    assert _run(run, "train_tokenizer") == 0
    assert _data(run / "data" / "t" / "tokenizer") == _data(root / "data" / "t" / "tokenizer")
    man = read_manifest(run / "data" / "t" / "tokenizer")
    assert man["resumed"]["units_reused"] == 2 and man["resumed"]["units_finished_here"] == 1
    assert not list((run / "data" / "t").glob("tokenizer.tmp-*"))


@pytest.mark.parametrize("by_source", [False, True])
def test_pack_shuffle_killed_inside_packing_and_write_resumes_byte_identical(chain, tmp_path, by_source):
    """Killed by the hook inside the packing, then by an external SIGKILL once more units are recorded, then
    right after the shuffle+write: the final shards, index files and fingerprint are the uninterrupted run's."""
    root, ref = chain
    ref = ref if by_source else root
    run = _copy(ref, tmp_path / "run", "packed")
    sets = (*_SMALL[1::2], f"pack.by_source={str(by_source).lower()}")
    assert _run(run, "pack_shuffle", *sets, kill="pack_shuffle:3") == -signal.SIGKILL
    assert len(_units(run, "packed")) == 3
    p = _script(run, "pack_shuffle", *sets)
    t0 = time.time()
    while len(_units(run, "packed")) < 8 and p.poll() is None and time.time() - t0 < 120:
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)  # a plain kill, at whatever point the stage is
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL, "the stage finished before the test killed it"
    done = _units(run, "packed")
    assert len(done) >= 8, done
    # the remaining packing units, then killed right after the write (the last unit), before the commit
    total = read_manifest(ref / "data" / "t" / "packed")["units"]["units_finished_here"]
    assert total >= len(done) + 10, "units too coarse for these kill points"
    n = total - len(done)
    assert _run(run, "pack_shuffle", *sets, kill=f"pack_shuffle:{n}") == -signal.SIGKILL
    assert any(u.endswith("written.json") for u in _units(run, "packed"))
    assert _run(run, "pack_shuffle", *sets) == 0
    assert _data(run / "data" / "t" / "packed") == _data(ref / "data" / "t" / "packed")
    a, b = read_manifest(run / "data" / "t" / "packed"), read_manifest(ref / "data" / "t" / "packed")
    assert a["counters"] == b["counters"] and a["orders"] == b["orders"] and a.get("by_source") == b.get("by_source")
    assert a["resumed"]["units_reused"] == total and a["resumed"]["units_finished_here"] == 0
    assert not list((run / "data" / "t").glob("packed.tmp-*"))


@pytest.fixture(scope="module")
def ray_instance():
    pytest.importorskip("ray")
    from minideepseek.executor import ray_init, ray_shutdown

    ray_init(num_cpus=2)
    yield
    ray_shutdown()


def test_ray_partitions_are_driver_units_and_resume(chain, tmp_path, monkeypatch, ray_instance):
    """--executor ray: the tokenize/pack partition tasks are units recorded by the driver. A run interrupted
    after some of them (Ctrl-C keeps its units; the dir is then left as a dead process's) is resumed by the
    next, which runs only the tasks left and writes the local run's shards."""
    root, ref = chain
    monkeypatch.setattr(partition, "PARTITION_DOCS", 9)  # several partitions per source (set on the driver)
    run = _copy(ref, tmp_path / "run", "packed")
    finish = Units.finish
    calls = {"n": 0}

    def interrupted(self, name, state=None):
        finish(self, name, state)
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(Units, "finish", interrupted)
    argv = ("--config", "t.yaml", "--executor", "ray", "--set", "pack.by_source=true")
    assert run_in(run, pack_shuffle, *argv) != 0  # the CLI reports the interruption
    (tmp,) = (run / "data" / "t").glob("packed.tmp-*")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    os.rename(tmp, tmp.with_name(f"packed.tmp-{dead.pid}"))  # as a killed process leaves it
    monkeypatch.setattr(Units, "finish", finish)
    assert run_in(run, pack_shuffle, *argv) == 0
    assert _data(run / "data" / "t" / "packed") == _data(ref / "data" / "t" / "packed")
    man = read_manifest(run / "data" / "t" / "packed")
    assert man["resumed"]["units_reused"] == 5 and man["units"]["units_finished_here"] > 0
    rep = json.loads((run / "data" / "t" / "packed" / "packing_report.json").read_text())
    assert rep["by_source"] == man["by_source"]


def _interrupt_after(monkeypatch, pred) -> None:
    """Units.finish raises KeyboardInterrupt (the CLI's Ctrl-C, which keeps the units) after a unit ``pred``
    accepts; the run's temp dir is then renamed as a dead process's (what a SIGKILL leaves)."""
    finish = Units.finish

    def interrupted(self, name, state=None):
        finish(self, name, state)
        if pred(name):
            raise KeyboardInterrupt

    monkeypatch.setattr(Units, "finish", interrupted)


def _as_dead(run_dir: Path, artifact: str) -> None:
    (tmp,) = run_dir.glob(f"{artifact}.tmp-*")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    os.rename(tmp, tmp.with_name(f"{artifact}.tmp-{dead.pid}"))


def test_rejected_seq_len_attempt_is_not_packed_again(chain, tmp_path, monkeypatch):
    """pack.auto_seq_len: the attempt found too coarse (4096: too few blocks) is a unit; a run interrupted in
    the next attempt resumes there without packing at 4096 again, and writes the uninterrupted run's shards."""
    root, _ = chain
    sets = ("--config", "t.yaml", "--set", "pack.seq_len=4096", "--set", f"pack.unit_tokens={UNIT_TOKENS}")
    ref = _copy(root, tmp_path / "ref", "packed")
    assert run_in(ref, pack_shuffle, *sets) == 0
    assert read_manifest(ref / "data" / "t" / "packed")["counters"]["seq_len"] < 4096
    run = _copy(root, tmp_path / "run", "packed")
    _interrupt_after(monkeypatch, lambda name: name == "s=2048.part=00001")
    assert run_in(run, pack_shuffle, *sets) != 0
    _as_dead(run / "data" / "t", "packed")
    names: list[str] = []
    _interrupt_after(monkeypatch, lambda name: names.append(name) and False)
    assert run_in(run, pack_shuffle, *sets) == 0
    assert names and not [n for n in names if n.startswith("s=4096.")], names
    assert _data(run / "data" / "t" / "packed") == _data(ref / "data" / "t" / "packed")
    a, b = read_manifest(run / "data" / "t" / "packed"), read_manifest(ref / "data" / "t" / "packed")
    assert a["sizing"] == b["sizing"] and a["counters"] == b["counters"]
