"""Stage 1 against a hostile data folder and hostile records (issue 29, items 2 and 5): links out of the
source directory, special and virtual files, non-UTF-8 file names, and records that the JSON parser or
Arrow accepts but Python's conversion refuses. Each test performs the attack and checks the outcome:
nothing outside the source is read, every entry and record is accounted for, no traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import mix_sampler
from minideepseek.sources.config import SourceConfig
from minideepseek.sources.local import LocalSource

SECRET = "SECRET-7f3a9c-token-should-never-be-read"
TEXT = "the quick brown fox jumps over the lazy dog near the river bank today, record number {}."


def _rows(n: int, start: int = 0) -> str:
    return "".join(json.dumps({"id": f"r{i}", "text": TEXT.format(i)}) + "\n" for i in range(start, start + n))


def _src(path: Path, **kw) -> LocalSource:
    src = LocalSource(SourceConfig(name="loc", type="local", weight=1.0, path=str(path), **kw), seed=1)
    src.load()
    return src


def _reports(src: LocalSource) -> dict[str, dict]:
    return {r.file: r.to_dict() for r in src.file_reports}


def _outputs(root: Path) -> bytes:
    """Every byte the run wrote (artifacts and reports)."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A source directory full of traps, and a secret file outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET} " * 20)
    (outside / "more.jsonl").write_text(json.dumps({"text": f"{SECRET} in a record " * 5}) + "\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.jsonl").write_text(_rows(6))
    (src / "leak.txt").symlink_to(outside / "secret.txt")            # a link out of the root
    (src / "env.txt").symlink_to("/proc/self/environ")               # the process environment
    (src / "null.jsonl").symlink_to("/dev/zero")                     # a device: endless bytes
    (src / "dangling.txt").symlink_to(src / "gone.txt")              # broken (inside the root)
    (src / "linked_dir").symlink_to(outside, target_is_directory=True)  # a directory link out
    os.mkfifo(src / "pipe.jsonl")                                    # a FIFO: open() would block forever
    (src / "inner.txt").symlink_to(src / "good.jsonl")               # a link that stays inside: fine
    return src, outside


def test_links_out_special_and_virtual_files_are_never_read(hostile):
    src_dir, _ = hostile
    src = _src(src_dir, glob="**/*", format="auto")
    reps = _reports(src)
    assert reps["good.jsonl"]["status"] == "ok" and reps["good.jsonl"]["records"] == 6
    assert reps["inner.txt"]["status"] == "ok"  # resolves inside the directory: read as any file
    skipped = {f: r["problem"] for f, r in reps.items() if r["status"] == "skipped"}
    assert set(skipped) == {"leak.txt", "env.txt", "null.jsonl", "dangling.txt", "pipe.jsonl"}
    assert "outside the source directory" in skipped["leak.txt"] and "follow_symlinks" in skipped["leak.txt"]
    assert "outside the source directory" in skipped["env.txt"]
    assert "FIFO" in skipped["pipe.jsonl"] and "broken symbolic link" in skipped["dangling.txt"]
    assert all(r["lines"] == 0 and r["records"] == 0 for f, r in reps.items() if f in skipped)
    assert not any("linked_dir" in f for f in reps)  # the glob never descends into a link to a directory
    assert all(SECRET not in (r.snippet + r.detail) for r in src.rejects)
    assert all(SECRET not in (d.text or "") for d in src.load())


def test_follow_symlinks_reads_links_but_never_special_or_virtual_files(hostile):
    src_dir, _ = hostile
    src = _src(src_dir, glob="*", follow_symlinks=True)
    reps = _reports(src)
    assert reps["leak.txt"]["status"] == "ok" and any(SECRET in (d.text or "") for d in src.load())
    assert reps["env.txt"]["status"] == "skipped" and "proc file system" in reps["env.txt"]["problem"]
    assert reps["null.jsonl"]["status"] == "skipped" and "character device" in reps["null.jsonl"]["problem"]
    assert reps["pipe.jsonl"]["status"] == "skipped"


@pytest.mark.stage
def test_stage1_output_holds_nothing_from_outside(hostile, tmp_path):
    """The whole stage: the secret file's and the environment's contents appear nowhere in the run's
    outputs, the skipped entries are file problems of the manifest and the report, exit 0."""
    src_dir, outside = hostile
    (src_dir / "linked_more.jsonl").symlink_to(outside / "more.jsonl")
    environ = Path("/proc/self/environ").read_bytes()
    probe = max(environ.split(b"\0"), key=len)[:60]  # a piece of this process's environment
    cfg = {"run": {"name": "h", "seed": 3, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep")},
           "sources": [{"name": "loc", "type": "local", "path": str(src_dir), "weight": 1.0, "id_field": "id"}],
           "sampler": {"target_docs": 100, "num_proc": 1, "min_chars": 10}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert mix_sampler.main(["--config", str(tmp_path / "c.yaml")]) == 0
    out = _outputs(tmp_path / "data") + _outputs(tmp_path / "rep")
    assert SECRET.encode() not in out and probe not in out
    man = json.loads((tmp_path / "data" / "h" / "mixed_raw" / "manifest.json").read_text())
    problems = {p["file"]: p["status"] for p in man["counters"]["file_problems"]}
    assert {k for k, v in problems.items() if v == "skipped"} == {
        "leak.txt", "env.txt", "null.jsonl", "dangling.txt", "pipe.jsonl", "linked_more.jsonl"}
    assert "outside the source directory" in (tmp_path / "rep" / "h" / "source_mix.md").read_text()


@pytest.mark.stage
def test_non_utf8_file_names_are_read_and_named_escaped(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (Path(os.fsdecode(bytes(d) + b"/caf\xe9.txt"))).write_text("a page whose file name is Latin-1, not UTF-8 at all.")
    (Path(os.fsdecode(bytes(d) + b"/bad\xff\xfe.jsonl"))).write_text(_rows(2) + '{"text": null}\n')
    src = _src(d)
    reps = _reports(src)
    assert set(reps) == {"caf\\xe9.txt", "bad\\xff\\xfe.jsonl"}
    assert reps["caf\\xe9.txt"]["records"] == 1 and reps["bad\\xff\\xfe.jsonl"]["records"] == 2
    (rej,) = src.rejects
    assert rej.file == "bad\\xff\\xfe.jsonl" and rej.line == 3 and rej.reason == "non_string_text"
    json.dumps([r.to_dict() for r in src.file_reports], ensure_ascii=False).encode("utf-8")  # writable as UTF-8
    cfg = {"run": {"name": "u", "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep")},
           "sources": [{"name": "loc", "type": "local", "path": str(d), "weight": 1.0}],
           "sampler": {"target_docs": 10, "num_proc": 1, "min_chars": 10}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert mix_sampler.main(["--config", str(tmp_path / "c.yaml")]) == 0
    rejects = (tmp_path / "data" / "u" / "mixed_raw" / "rejects.jsonl").read_text(encoding="utf-8")
    assert json.loads(rejects)["file"] == "bad\\xff\\xfe.jsonl"


@pytest.mark.stage
def test_hostile_jsonl_records_exact_counts_no_traceback(tmp_path, capsys):
    """Records the parser accepts but Python refuses, and every other shape, each a counted reject with
    its line; the good ones kept; the stage exits 0 without a traceback."""
    lines = [
        json.dumps({"id": "g0", "text": TEXT.format(0)}),                     # 1 kept
        '{"id": "big", "text": "x", "n": 1' + "0" * 5000 + "}",              # 2 int > 4300 digits: invalid_json
        "[" * 200_000 + "]" * 200_000,                                        # 3 nested too deep: invalid_json
        json.dumps({"id": "g1", "text": TEXT.format(1), "url": "\ud800"}),    # 4 lone surrogate in url
        '{"id": "nan", "text": NaN}',                                         # 5 non_string_text
        '{"id": "inf", "text": "' + TEXT.format(2) + '", "x": 1e999}',       # 6 kept (inf is a float)
        json.dumps({"\ud83d": 1, "id": "g3", "text": TEXT.format(3)}),        # 7 kept: the odd key is not read
        json.dumps({"id": ["nested", {"k": [1, 2]}], "text": TEXT.format(4)}),  # 8 kept: id made a string
        '{"id": "z", "text": "nul \\u0000 byte"}',                           # 9 binary_control_chars
        '"just a string"',                                                    # 10 not_an_object
        json.dumps({"id": "g5", "text": TEXT.format(5)}),                     # 11 kept
    ]
    d = tmp_path / "src"
    d.mkdir()
    (d / "h.jsonl").write_text("\n".join(lines) + "\n")
    cfg = {"run": {"name": "j", "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep")},
           "sources": [{"name": "loc", "type": "local", "path": str(d), "weight": 1.0, "id_field": "id"}],
           "sampler": {"target_docs": 100, "num_proc": 1, "min_chars": 10, "max_reject_fraction": 1.0}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert mix_sampler.main(["--config", str(tmp_path / "c.yaml")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    rejects = [json.loads(x) for x in (tmp_path / "data" / "j" / "mixed_raw" / "rejects.jsonl").read_text().splitlines()]
    assert sorted((r["line"], r["reason"]) for r in rejects) == [
        (2, "invalid_json"), (3, "invalid_json"), (4, "lone_surrogate"), (5, "non_string_text"),
        (9, "binary_control_chars"), (10, "not_an_object")]
    assert "4300 digits" in next(r["detail"] for r in rejects if r["line"] == 2)
    mix = json.loads((tmp_path / "rep" / "j" / "source_mix.json").read_text())
    ing = mix["ingestion"]["sources"]["loc"]
    assert (ing["lines"], ing["records"], ing["rejects"]) == (11, 5, 6)
    assert mix["totals"]["docs"] == 5


def test_parquet_value_python_cannot_hold_is_one_rejected_row(tmp_path):
    """A timestamp past year 9999 passes Arrow's validation but not Python's datetime: that row is a
    ``bad_record`` reject with its row number; the other rows of its batch are kept."""
    ts = pa.array([0, 3 * 10**17, 0], pa.timestamp("us"))
    texts = pa.array([TEXT.format(i) for i in range(3)])
    pq.write_table(pa.Table.from_arrays([texts, ts], names=["text", "ts"]), tmp_path / "t.parquet")
    src = _src(tmp_path / "t.parquet")
    assert [d.source_id for d in src.load()] == ["t.parquet#0", "t.parquet#2"]
    (rej,) = src.rejects
    assert rej.reason == "bad_record" and rej.source_id == "t.parquet#1" and "OverflowError" in rej.detail
    rep = _reports(src)["t.parquet"]
    assert rep["status"] == "ok" and rep["lines"] == 3 and rep["records"] == 2
