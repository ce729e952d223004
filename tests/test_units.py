"""The resume-inside-a-stage contract (minideepseek/units.py + StageRun): a killed run's finished units
are adopted by the next run with the same config and inputs, discarded (and said so) otherwise, never
reach the artifact; --restart discards them."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minideepseek.artifact import InputRef, remove_dead_tmp
from minideepseek.stage import StageRun
from minideepseek.units import KILL_ENV, UNITS_DIR, Units


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _stage(run_dir: Path, cfg: dict, fp: str = "in-1") -> StageRun:
    return StageRun("toy", "toy_art", run_dir, cfg, [InputRef("up", "x", fp)], schema_version=1, seed=0)


def _killed_run(run_dir: Path, cfg: dict, units: int, fp: str = "in-1") -> Path:
    """What a SIGKILLed run leaves: its temp dir (named by a dead pid) with ``units`` finished units."""
    st = _stage(run_dir, cfg, fp)
    tmp = st.begin()
    for i in range(units):
        (tmp / f"part-{i}.txt").write_text(f"part {i}\n")
        st.units.finish(f"part={i}", {"rows": i})
    dead = run_dir / f"toy_art.tmp-{_dead_pid()}"
    os.rename(tmp, dead)
    return dead


def _build(st: StageRun, n: int) -> list[int]:
    """The toy stage body: writes part-i for every unit not finished yet; returns the units it did."""
    tmp = st.begin()
    did = []
    for i in range(n):
        if st.units.done(f"part={i}"):
            continue
        (tmp / f"part-{i}.txt").write_text(f"part {i}\n")
        st.units.finish(f"part={i}", {"rows": i})
        did.append(i)
    st.commit({"parts": n})
    return did


def test_resume_adopts_units_of_same_key_and_artifact_has_no_unit_records(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    _killed_run(tmp_path, {"a": 1}, 3)
    st = _stage(tmp_path, {"a": 1})
    with caplog.at_level(logging.WARNING):
        did = _build(st, 5)
    assert did == [3, 4]  # only the units the killed run had not finished
    assert "resuming the killed run" in caplog.text
    art = tmp_path / "toy_art"
    assert not (art / UNITS_DIR).exists()
    assert sorted(p.name for p in art.iterdir()) == ["manifest.json"] + [f"part-{i}.txt" for i in range(5)]
    man = st.existing
    assert man["resumed"]["units_reused"] == 3 and man["resumed"]["units_finished_here"] == 2
    # same data files (and fingerprint) as an uninterrupted run
    other = tmp_path / "other"
    st2 = _stage(other, {"a": 1})
    assert _build(st2, 5) == list(range(5))
    assert st2.existing["fingerprint"] == man["fingerprint"]
    assert not list(tmp_path.glob("toy_art.tmp-*"))


@pytest.mark.parametrize("change", ["config", "input"])
def test_units_of_another_config_or_input_are_never_reused(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                           change: str) -> None:
    dead = _killed_run(tmp_path, {"a": 1}, 3)
    st = _stage(tmp_path, {"a": 2} if change == "config" else {"a": 1}, "in-1" if change == "config" else "in-2")
    with caplog.at_level(logging.WARNING):
        assert _build(st, 4) == [0, 1, 2, 3]
    assert "another config or other inputs" in caplog.text and dead.name in caplog.text
    assert not dead.exists()
    assert "resumed" not in st.existing


def test_restart_discards_units(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dead = _killed_run(tmp_path, {"a": 1}, 2)
    st = _stage(tmp_path, {"a": 1})
    with caplog.at_level(logging.WARNING):
        st.begin(restart=True)
    assert "--restart" in caplog.text and not dead.exists()
    assert not st.units.done("part=0")
    st.abort()


def test_killed_twice_keeps_the_dir_with_most_units(tmp_path: Path) -> None:
    _killed_run(tmp_path, {"a": 1}, 1)
    _killed_run(tmp_path, {"a": 1}, 3)
    st = _stage(tmp_path, {"a": 1})
    assert _build(st, 4) == [3]
    assert not list(tmp_path.glob("toy_art.tmp-*"))


def test_other_stages_cleanup_leaves_units_alone(tmp_path: Path) -> None:
    """Another stage's remove_dead_tmp never deletes a killed stage's finished units (only that stage's next
    run adopts or discards them); a dead temp dir without units is still removed."""
    dead = _killed_run(tmp_path, {"a": 1}, 2)
    plain = tmp_path / f"other.tmp-{_dead_pid()}"
    plain.mkdir()
    remove_dead_tmp(tmp_path)
    assert dead.is_dir() and not plain.exists()


def test_ctrl_c_keeps_units_other_errors_do_not(tmp_path: Path) -> None:
    for exc, kept in ((KeyboardInterrupt, True), (RuntimeError, False)):
        run_dir = tmp_path / exc.__name__
        st = _stage(run_dir, {"a": 1})

        def body(tmp: Path, st: StageRun = st, exc: type = exc) -> dict:
            st.units.finish("part=0")
            raise exc("stop")

        with pytest.raises(exc):
            st.execute(body, run_dir / "reports", ())
        assert bool(list(run_dir.glob("toy_art.tmp-*"))) is kept


def test_unit_names_are_checked(tmp_path: Path) -> None:
    u = Units(tmp_path, "toy", "k")
    for bad in ("../x", "a/b", "", "key"):
        with pytest.raises(ValueError):
            u.finish(bad)


def test_kill_after_unit_fault_injection(tmp_path: Path) -> None:
    """The test hook kills the process right after the n-th finished unit (what the stage kill tests use)."""
    code = ("import sys; from pathlib import Path; from minideepseek.units import Units\n"
            "u = Units(Path(sys.argv[1]), 'toy', 'k')\n"
            "for i in range(5): u.finish(f'u={i}')\n")
    env = {**os.environ, KILL_ENV: "toy:2", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, timeout=60)
    assert r.returncode == -9
    assert sorted(p.name for p in (tmp_path / UNITS_DIR).glob("u=*.json")) == ["u=0.json", "u=1.json"]
