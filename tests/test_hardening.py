"""Issue 29 on a real small run (stages 1-4 of tests/chain.py): each test performs the attack or the fault
and checks the outcome. Verify before use (a corrupted shard refused by withdraw, export and the
dashboard), the run lock (a second process on the run exits 2 naming the holder; a live temp dir is
never removed), paths confined to their artifact, writes never through a symlink, validated names and
ticket ids, redacted and escaped report snippets."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pack_shuffle
import withdraw
from minideepseek import runlock
from minideepseek.arrow_io import shard_paths
from minideepseek.artifact import CorruptArtifactError, read_manifest, verify_artifact
from minideepseek.config import ConfigError
from minideepseek.dashboard.collect import collect
from minideepseek.export.__main__ import main as export_main
from minideepseek.fsio import UnsafePathError, inside, printable, write_text_atomic
from minideepseek.sampling.filter_report import filter_report_markdown
from minideepseek.tickets import TicketLog
from tests.chain import build_chain

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_chain(tmp_path_factory.mktemp("hard"))


@pytest.fixture
def run(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the built run (tests damage it), as the working directory."""
    root = tmp_path / "run"
    shutil.copytree(built, root)
    monkeypatch.chdir(root)
    return root


def _one_error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))


# ---- verify before use --------------------------------------------------------------------------

def test_corrupted_shard_refused_by_withdraw_and_export(run, capsys):
    shard = shard_paths(run / "data/t/packed")[1]
    _flip_a_byte(shard)
    before = {p.name: p.read_bytes() for p in (run / "data/t/packed").iterdir() if p.is_file()}
    assert withdraw.main(["--config", "t.yaml", "--source", "fineweb_edu"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert shard.name in line and "pack_shuffle.py" in line and "--config t.yaml" in line
    assert {p.name: p.read_bytes() for p in (run / "data/t/packed").iterdir() if p.is_file()} == before  # untouched
    assert not (run / "data/t/deletion_requests.jsonl").exists()  # nothing accepted
    assert export_main(["megatron", "--config", "t.yaml", "--out", "exp"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert shard.name in line and "pack_shuffle.py" in line and not (run / "exp").exists()
    assert pack_shuffle.main(["--config", "t.yaml"]) == 0  # the named command repairs it
    assert export_main(["megatron", "--config", "t.yaml", "--out", "exp"]) == 0


def test_dashboard_refuses_a_report_that_differs_from_its_artifact(run):
    rep = run / "reports/t/packing_report.json"
    assert collect(run / "reports/t", run / "data/t")["reports_verified"] >= 4
    rep.write_text(rep.read_text().replace('"blocks"', '"blocks" ', 1))
    with pytest.raises(CorruptArtifactError, match="packing_report.json.*pack_shuffle.py"):
        collect(run / "reports/t", run / "data/t")
    rep.unlink()
    rep.symlink_to(run / "data/t/packed/packing_report.json")
    with pytest.raises(CorruptArtifactError, match="symbolic link"):
        collect(run / "reports/t", run / "data/t")
    assert collect(run / "reports/t")["reports_verified"] == 0  # no artifacts: nothing to check against


def test_manifest_and_state_paths_outside_the_artifact_are_refused(run, tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x" * 10)
    adir = run / "data/t/tokenizer"
    man = read_manifest(adir)
    for bad in ("../packed/state.json", str(outside), "a/../../x"):
        forged = {**man, "outputs": {"files": [{"path": bad, "bytes": 10, "sha256": "0" * 64}]}}
        with pytest.raises(CorruptArtifactError, match="outside the artifact"):
            verify_artifact(adir, forged)
    (adir / "link.json").symlink_to(outside)
    forged = {**man, "outputs": {"files": [{"path": "link.json", "bytes": 10, "sha256": "0" * 64}]}}
    with pytest.raises(CorruptArtifactError, match="outside the artifact"):
        verify_artifact(adir, forged)
    state = run / "data/t/packed/state.json"
    data = json.loads(state.read_text())
    data["_data_files"][0]["filename"] = "../mixed_raw/state.json"
    state.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="outside the dataset"):
        shard_paths(run / "data/t/packed")


# ---- the run lock --------------------------------------------------------------------------------

def _holder(run_dir: Path) -> subprocess.Popen:
    """Another process that holds the run's lock until its stdin closes."""
    code = ("import sys; from minideepseek import runlock; runlock.acquire(sys.argv[1], 'python withdraw.py --id x');"
            "print('held', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], cwd=ROOT, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_process_on_the_run_exits_2_naming_the_holder(run, capsys):
    holder = _holder(run / "data/t")
    try:
        for main, argv in ((pack_shuffle.main, ["--config", "t.yaml", "--force"]),
                           (withdraw.main, ["--config", "t.yaml", "--source", "fineweb_edu"])):
            assert main(argv) == 2
            line = _one_error_line(capsys.readouterr().err)
            assert f"pid {holder.pid}" in line and "python withdraw.py --id x" in line and "in use" in line
        assert read_manifest(run / "data/t/packed")["fingerprint"]  # nothing was rebuilt or removed
    finally:
        holder.stdin.close()
        holder.wait()
    assert pack_shuffle.main(["--config", "t.yaml"]) == 0  # the lock went with its process
    assert not runlock.held(run / "data/t")  # and this command released its own


def test_a_linked_lock_file_is_refused(run, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = run / "data/t/.lock"
    lock.unlink(missing_ok=True)  # the copied run has the lock file its stages left (no lock: just a file)
    lock.symlink_to(victim)
    assert pack_shuffle.main(["--config", "t.yaml"]) == 2
    assert "symbolic link" in _one_error_line(capsys.readouterr().err) and victim.read_text() == "precious\n"


def test_live_temp_dirs_survive_a_withdrawal(run, capsys):
    holder = _holder(run / "elsewhere")  # a live process (its own run): its pid names a temp dir here
    try:
        live = run / f"data/t/packed.tmp-{holder.pid}"
        live.mkdir()
        (live / "part").write_text("being written")
        assert withdraw.main(["--config", "t.yaml", "--id", "fineweb_edu/" + "0" * 16]) == 3  # matches nothing
        assert withdraw.main(["--config", "t.yaml", "--source", "fineweb_edu"]) in (0, 4)
        assert (live / "part").read_text() == "being written"
    finally:
        holder.stdin.close()
        holder.wait()


def test_launcher_ranks_share_its_lock_and_a_failing_rank_stops_the_others(tmp_path):
    from minideepseek.train.launch import launch

    script = tmp_path / "rank.py"
    script.write_text(
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from minideepseek import runlock\n"
        f"runlock.acquire({str(tmp_path / 'r')!r})\n"  # the launcher's lock, inherited
        "assert not os.environ.get('MASTER_ADDR') and os.environ['MINIDEEPSEEK_DIST_INIT'].startswith('file://')\n"
        "store = os.path.dirname(os.environ['MINIDEEPSEEK_DIST_INIT'][7:])\n"
        "assert os.stat(store).st_mode & 0o077 == 0\n"  # private: mode 0700
        "if os.environ['RANK'] == '1':\n    sys.exit(3)\n"
        "time.sleep(60)\n")
    import time

    t0 = time.monotonic()
    assert launch(str(script), [], 2, tmp_path / "r") == 3
    assert time.monotonic() - t0 < 30  # rank 0 was stopped, not waited for
    runlock.release(tmp_path / "r")


# ---- names, ids, writes --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["..", ".", "...", "a/b", "a\\b", ""])
def test_run_names_that_are_not_one_directory_exit_2(run, capsys, name):
    assert pack_shuffle.main(["--config", "t.yaml", "--set", f"run.name={name}"]) == 2
    assert "run.name" in _one_error_line(capsys.readouterr().err)
    assert not (run / "data" / "packed").exists() and not (run / "packed").exists()


def test_forged_ticket_ids_and_a_linked_log_are_refused(run, tmp_path, capsys):
    log = run / "data/t/deletion_requests.jsonl"
    log.write_text(json.dumps({"event": "accepted", "ticket": "../../../../tmp/pwn", "selectors": [],
                               "docs": []}) + "\n")
    assert withdraw.main(["--config", "t.yaml", "--resume"]) == 2
    assert "line 1" in _one_error_line(capsys.readouterr().err)
    target = tmp_path / "not_the_log.txt"
    target.write_text("keep me\n")
    log.unlink()
    log.symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        TicketLog(log).append({"event": "not_found", "ticket": "wd-0123456789ab"})
    assert target.read_text() == "keep me\n"


def test_reports_are_replaced_not_written_through_a_symlink(run, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    rep = run / "reports/t/packing_report.md"
    rep.unlink()
    rep.symlink_to(victim)
    (run / "reports/t/.packing_report.md.tmp-999999").symlink_to(victim)  # a planted temp name too
    assert pack_shuffle.main(["--config", "t.yaml"]) == 0  # up to date: republishes its reports
    assert victim.read_text() == "precious\n" and not rep.is_symlink() and "Packing" in rep.read_text()
    link = tmp_path / "note.md"
    link.symlink_to(victim)
    write_text_atomic(link, "new")
    assert victim.read_text() == "precious\n" and link.read_text() == "new" and not link.is_symlink()


def test_inside_and_printable():
    base = Path("/srv/a")
    assert inside(base, "x/y.arrow") == base / "x/y.arrow"
    for bad in ("../b", "/etc/passwd", "x/../../b", "", "a\x00b"):
        with pytest.raises(UnsafePathError):
            inside(base, bad)
    assert printable("ok\x1b[2J\nnext\u2028\x9b") == "ok\\x1b[2J\\x0anext\\u2028\\x9b"


def test_filter_report_snippets_are_redacted_and_inert_markdown():
    ex = {"id": "web/1`|x", "url": "mailto:jane.doe@gmail.com",
          "text": "Contact jane.doe@gmail.com or +1 415-555-0132 | <img src=x onerror=alert(1)> [click](http://evil)"}
    rep = {"run": "r", "sources": [{"source": "web", "chain": ["pii"], "evaluated": 1, "dropped": 1, "drop_rate": 1.0,
                                    "filters": {"gopher": {"reasons": {"x": 1}, "examples": {"x": [ex]}}},
                                    "modifications_in_written_docs": {}}]}
    md = filter_report_markdown(rep)
    example = md.split("## Dropped examples", 1)[1]
    assert "jane.doe" not in md and "415-555" not in md and "[email redacted]" in example.replace("\\", "")
    assert not re.search(r"(?<!\\)<img", md) and "\\<img" in example  # no HTML tag: the < is escaped
    assert "[click](" not in md and "\\|" in example
    assert "``web/1`\\|x``" in example  # the id is a code span nothing inside can close
