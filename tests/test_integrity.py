"""Artifacts prove their integrity and the failure path brings the user back to their own run:
sha256 verification of upstream and own outputs, dead temp files removed, stale-chain refusal,
hints that repeat the user's command, one-line errors for unwritable outputs and bad log levels,
and the whole config validated before any stage runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import cross_source_dedup
import mix_sampler
import pack_shuffle
import train_tokenizer
from minideepseek.fsio import sha256_file
from tests.chain import build_chain

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    return build_chain(tmp_path_factory.mktemp("integrity"))


@pytest.fixture()
def run(chain, tmp_path, monkeypatch) -> Path:
    """A private copy of the 4-stage run, with the working directory inside it."""
    dst = tmp_path / "run"
    shutil.copytree(chain, dst)
    monkeypatch.chdir(dst)
    yield dst


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _shard(run: Path, artifact: str) -> Path:
    return sorted((run / "data" / "t" / artifact).glob("data-*.arrow"))[0]


@pytest.mark.parametrize("where", ["middle", "header"])
def test_flipped_byte_in_upstream_is_refused_with_file_and_command(run, capsys, where):
    shard = _shard(run, "mixed_dedup")
    _flip(shard, shard.stat().st_size // 2 if where == "middle" else 3)  # "header": pyarrow cannot even parse it
    assert train_tokenizer.main(["--config", "t.yaml", "--force", "--set", "tokenizer.min_frequency=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err and "flatbuffers" not in err
    assert "data/t/mixed_dedup" in err and shard.name in err and "sha256" in err
    assert "python cross_source_dedup.py --config t.yaml --set tokenizer.min_frequency=2" in err


def test_corrupted_own_output_is_rebuilt_not_reported_up_to_date(run, capsys):
    shard = _shard(run, "packed")
    good = sha256_file(shard)
    _flip(shard, shard.stat().st_size - 10)
    assert pack_shuffle.main(["--config", "t.yaml"]) == 0
    err = capsys.readouterr().err
    assert "does not match its manifest checksum" in err and "rebuilding" in err and shard.name in err
    assert sha256_file(shard) == good  # same config + seed: the rebuilt shard is byte-identical


def test_dead_tmp_leftovers_removed_even_when_up_to_date(run, capsys):
    dead = 2**22 + 12345  # above pid_max defaults: no such process
    stray_dir = run / "data" / "t" / f"packed.tmp-{dead}"
    stray_dir.mkdir()
    (stray_dir / "data-00000-of-00001.arrow").write_bytes(b"half")
    stray_report = run / "reports" / "t" / f".packing_report.json.tmp-{dead}"
    stray_report.write_text("{")
    live = run / "data" / "t" / f"packed.tmp-{os.getpid()}"  # a live process's temp dir stays
    live.mkdir()
    assert pack_shuffle.main(["--config", "t.yaml"]) == 0
    assert "up to date" in capsys.readouterr().err
    assert not stray_dir.exists() and not stray_report.exists() and live.exists()


def test_tokenizer_refuses_dedup_built_from_another_stage1_config(run, capsys):
    # mixed_dedup is consistent with mixed_raw, but both come from target_docs=80; the user's command
    # now says 70: retraining on them silently would train on the wrong sample
    assert train_tokenizer.main(["--config", "t.yaml", "--force", "--set", "sampler.target_docs=70"]) == 2
    err = capsys.readouterr().err
    assert "different mix_sampler config" in err
    assert "python mix_sampler.py --config t.yaml --set sampler.target_docs=70" in err


def test_stale_hint_repeats_every_set(run, capsys):
    sets = ["--set", "run.name=other", "--set", "dedup.threshold=0.75"]
    assert cross_source_dedup.main(["--config", "t.yaml", *sets]) == 2
    err = capsys.readouterr().err
    assert ("python mix_sampler.py --config t.yaml --set run.name=other --set dedup.threshold=0.75" in err
            and "bash run_pipeline.sh --config t.yaml --set run.name=other --set dedup.threshold=0.75 "
                "--from mix_sampler" in err)


def test_unwritable_output_is_one_line_and_leaves_nothing(run, capsys):
    for key in ("run.data_dir", "run.reports_dir"):  # /sys refuses new entries, even to root
        rc = mix_sampler.main(["--config", "t.yaml", "--force", "--set", f"{key}=/sys/minideepseek-test"])
        err = capsys.readouterr().err
        assert rc == 1 and err.count("error:") == 1 and "/sys/minideepseek-test" in err and "Traceback" not in err
        assert "Operation not permitted" in err or "Permission denied" in err or "Read-only" in err
    assert not list((run / "data" / "t").glob("*.tmp-*")) and not Path("/sys/minideepseek-test").exists()


def test_full_disk_is_one_line(run, capsys, monkeypatch):
    import errno

    real = Path.write_bytes

    def full(self, data):  # the write-probe hits a full disk
        if ".write-probe" in self.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    assert pack_shuffle.main(["--config", "t.yaml", "--force"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "data/t" in err and err.count("error:") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("script", ["mix_sampler.py", "cross_source_dedup.py", "train_tokenizer.py",
                                    "pack_shuffle.py", "smoke_train.py", "withdraw.py", "report.py"])
def test_invalid_log_level_is_one_line(script):
    args = ["--log-level", "LOUD"] + (["show", "demo"] if script == "report.py" else [])
    res = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), script, *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "LOUD" in lines[0] and "DEBUG" in lines[0], res.stderr


def test_mix_sampler_validates_the_whole_file_first(tmp_path, capsys):
    cfg = yaml.safe_load((ROOT / "configs" / "classroom.yaml").read_text())
    cfg.setdefault("run", {}).update({"data_dir": str(tmp_path / "d"), "reports_dir": str(tmp_path / "r")})
    cfg.setdefault("tokenizer", {})["vocab_size"] = -5
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert mix_sampler.main(["--config", str(tmp_path / "c.yaml")]) == 2
    assert "tokenizer.vocab_size=-5" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


@pytest.mark.stage
def test_pipeline_validates_every_stage_and_resume_hint_keeps_the_command(tmp_path):
    cmd = ["bash", "run_pipeline.sh", "--config", "configs/classroom.yaml", "--set", f"run.data_dir={tmp_path}/d",
           "--set", "run.name=x", "--set", "tokenizer.vocab_size=-5"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "tokenizer.vocab_size=-5" in res.stderr and "== mix_sampler" not in res.stdout
    # a stage that fails at run time: the hint keeps --config, every --set and --executor
    cmd = ["bash", "run_pipeline.sh", "--config", "configs/classroom.yaml", "--set", f"run.data_dir={tmp_path}/d",
           "--set", "run.name=x", "--executor", "ray", "--only", "pack_shuffle"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    hint = res.stderr.strip().splitlines()[-1].strip()
    assert hint == (f"bash run_pipeline.sh --config configs/classroom.yaml --set run.data_dir={tmp_path}/d "
                    "--set run.name=x --executor ray --only pack_shuffle")


def test_verification_cost_recorded_in_manifest(run):
    assert pack_shuffle.main(["--config", "t.yaml", "--force"]) == 0
    man = json.loads((run / "data" / "t" / "packed" / "manifest.json").read_text())
    ver = {v["artifact"]: v for v in man["input_verification"]}
    assert set(ver) >= {"mixed_dedup", "tokenizer"} and all(v["mode"] == "sha256" for v in ver.values())
    assert ver["mixed_dedup"]["files"] >= 1 and ver["mixed_dedup"]["bytes"] > 0
