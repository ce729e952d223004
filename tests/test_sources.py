"""Each source kind through the one interface; hf is driven offline through the real datasets API."""

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from minideepseek.config import ConfigError
from minideepseek.sources.config import SourceConfig
from minideepseek.sources.hf import HFSource
from minideepseek.sources.local import LocalSource

ROOT = Path(__file__).resolve().parents[1]

ROWS = [{"id": f"r{i}", "text": f"document number {i} " * 5, "url": f"https://ex.org/{i}"} for i in range(40)]


def _write_jsonl(path: Path, rows: list[dict], opener=open) -> None:
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def _local(path: Path, **kw) -> LocalSource:
    return LocalSource(SourceConfig(name="loc", type="local", weight=1.0, path=str(path), **kw), seed=3)


def test_local_jsonl_gz_zst_parquet(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", ROWS[:10])
    _write_jsonl(tmp_path / "b.jsonl.gz", ROWS[10:20], opener=gzip.open)
    with zstandard.open(tmp_path / "c.jsonl.zst", "wt", encoding="utf-8") as fh:
        for r in ROWS[20:30]:
            fh.write(json.dumps(r) + "\n")
    pq.write_table(pa.Table.from_pylist(ROWS[30:]), tmp_path / "d.parquet")
    src = _local(tmp_path, id_field="id")
    got = list(src.iter_raw(1))
    assert sorted(r.source_id for r in got) == sorted(r["id"] for r in ROWS)
    assert all(r.text and r.url.startswith("https://") for r in got)
    # an exact permutation, seeded: same order twice, another order for epoch 2
    assert [r.source_id for r in src.iter_raw(1)] == [r.source_id for r in got]
    assert [r.source_id for r in src.iter_raw(2)] != [r.source_id for r in got]
    assert src.input_ref().fingerprint == _local(tmp_path, id_field="id").input_ref().fingerprint


def test_local_bad_rows_become_rejects_not_crashes(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"text": "fine"}\n{"text": broken\n{"body": "no text"}\n[1, 2]\n{"text": "caf\xe9 latin1"}\n')
    src = _local(p)
    assert [r.text for r in src.iter_raw(1)] == ["fine"]
    assert [(r.reason, r.line) for r in src.rejects] == [("invalid_json", 2), ("missing_text", 3),
                                                         ("not_an_object", 4), ("invalid_utf8", 5)]


def test_local_text_and_html_dirs(tmp_path):
    (tmp_path / "a.txt").write_text("plain text file")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.html").write_text("<html><body><p>hello</p></body></html>")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "ignored.bin").write_bytes(b"\x00")
    src = _local(tmp_path)
    recs = {r.source_id: r for r in src.iter_raw(1)}
    assert set(recs) == {"a.txt", "sub/b.html"}
    assert recs["sub/b.html"].fmt == "html" and recs["a.txt"].fmt == "text"
    assert [(r.file, r.reason) for r in src.rejects] == [("bin.txt", "invalid_utf8")]


def test_local_missing_path_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        _local(tmp_path / "nope")


def _hf_cfg(tmp_path: Path, **kw) -> SourceConfig:
    files = []
    for k in range(4):  # several files, so the stream has several shards
        f = tmp_path / f"part{k}.jsonl"
        _write_jsonl(f, ROWS[k * 10:(k + 1) * 10])
        files.append(str(f))
    return SourceConfig(name="hub", type="hf", weight=1.0, path="json", data_files=tuple(files),
                        id_field="id", shuffle_buffer=16, **kw)


def test_hf_streaming_with_seeded_shuffle(tmp_path):
    src = HFSource(_hf_cfg(tmp_path), seed=5)
    ids = [r.source_id for r in src.iter_raw(1)]
    assert sorted(ids) == sorted(r["id"] for r in ROWS)
    assert ids[:10] != [f"r{i}" for i in range(10)], "a shuffle buffer must not return the stream's head"
    assert ids == [r.source_id for r in HFSource(_hf_cfg(tmp_path), seed=5).iter_raw(1)]
    assert ids != [r.source_id for r in HFSource(_hf_cfg(tmp_path), seed=6).iter_raw(1)]


def test_hf_wrong_text_field_names_the_fields(tmp_path):
    src = HFSource(_hf_cfg(tmp_path, text_field="content"), seed=5)
    with pytest.raises(ConfigError, match=r"no field 'content'.*\['id', 'text', 'url'\]"):
        next(src.iter_raw(1))


def test_hf_retries_transient_errors_and_resumes_exactly(tmp_path):
    import datasets

    cfg = _hf_cfg(tmp_path)
    calls = {"n": 0}

    class Flaky:
        """Wraps a real streaming dataset; the first two opens die after a few rows."""

        def __init__(self, ds, fail_after):
            self.ds, self.fail_after = ds, fail_after

        def shuffle(self, **kw):
            return Flaky(self.ds.shuffle(**kw), self.fail_after)

        def skip(self, n):
            return Flaky(self.ds.skip(n), self.fail_after)

        def __iter__(self):
            for i, row in enumerate(self.ds):
                if self.fail_after is not None and i == self.fail_after:
                    raise ConnectionError("connection reset by peer")
                yield row

    def opener(c):
        calls["n"] += 1
        ds = datasets.load_dataset("json", data_files=list(c.data_files), split="train", streaming=True)
        return Flaky(ds, 7 if calls["n"] <= 2 else None)

    sleeps = []
    src = HFSource(cfg, seed=5, opener=opener, sleep=sleeps.append)
    got = [r.source_id for r in src.iter_raw(1)]
    assert got == [r.source_id for r in HFSource(cfg, seed=5).iter_raw(1)]
    assert sleeps == [2.0, 2.0] and src.retries_used == 2  # progress between failures resets backoff

    def always_fail(c):
        return Flaky(datasets.load_dataset("json", data_files=list(c.data_files), split="train", streaming=True), 0)

    src = HFSource(SourceConfig(**{**cfg.__dict__, "max_retries": 2}), seed=5, opener=always_fail,
                   sleep=sleeps.append)
    with pytest.raises(RuntimeError, match="failed 3 times in a row"):
        list(src.iter_raw(1))


# ---- hub sources are read at one commit, and fingerprinted by it -----------------------------------

def _hub_cfg(revision: str | None = None) -> SourceConfig:
    return SourceConfig(name="web", type="hf", weight=1.0, path="someorg/some-dataset", revision=revision)


def test_hub_source_is_read_and_fingerprinted_at_a_commit():
    calls: list[tuple[str, str | None]] = []

    def resolver(repo: str, rev: str | None) -> str:
        calls.append((repo, rev))
        return ("a" if rev is None else "b") * 40

    moving = HFSource(_hub_cfg(), seed=1, resolver=resolver)
    assert moving.cfg.revision == "a" * 40 and calls == [("someorg/some-dataset", None)]  # the stream reads it
    branch = HFSource(_hub_cfg("main"), seed=1, resolver=resolver)
    assert branch.cfg.revision == "b" * 40 and branch.input_ref().detail["requested_revision"] == "main"
    assert moving.input_ref().fingerprint != branch.input_ref().fingerprint  # another commit, another input
    pinned = HFSource(_hub_cfg("c" * 40), seed=1, resolver=lambda *a: pytest.fail("a pinned SHA needs no lookup"))
    assert pinned.input_ref().detail["revision"] == "c" * 40

    def offline(repo: str, rev: str | None) -> str:
        raise OSError("no network")

    with pytest.raises(ConfigError, match="pin sources.web.revision to a commit SHA"):
        HFSource(_hub_cfg(), seed=1, resolver=offline)


def test_hub_pin_writes_one_commit_per_hub_dataset_of_the_recipe(tmp_path):
    import yaml

    from minideepseek.sources.hub_pin import main as pin_main
    from minideepseek.sources.hub_pin import pin_text

    recipe = (ROOT / "configs" / "deepseek_v3_1b.yaml").read_text(encoding="utf-8")
    sources = yaml.safe_load(recipe)["sources"]
    shas = {}

    def resolver(repo: str, rev: str | None) -> str:
        return shas.setdefault(repo, f"{len(shas) + 1:x}" * 40)

    text, notes = pin_text(recipe, sources, resolver)
    pinned = {s["name"]: s for s in yaml.safe_load(text)["sources"]}
    hub = [s for s in sources if s["type"] == "hf" and "/" in s["path"]]
    assert len(hub) >= 4 and len(notes) == len(hub)
    assert all(pinned[s["name"]]["revision"] == shas[s["path"]] for s in hub)
    assert all("revision" not in pinned[s["name"]] for s in sources if s not in hub)  # URL builders: no commit
    assert set(text.splitlines()) - set(recipe.splitlines()) == {f"    revision: \"{v}\"" for v in shas.values()}
    assert pin_text(text, yaml.safe_load(text)["sources"], lambda *a: pytest.fail("already pinned"))[0] == text
    (tmp_path / "r.yaml").write_text(text)
    assert pin_main([str(tmp_path / "r.yaml"), "--check"]) == 0
    (tmp_path / "u.yaml").write_text(recipe)
    assert pin_main([str(tmp_path / "u.yaml"), "--check"]) == (0 if all(
        len(str(s.get("revision", ""))) == 40 for s in hub) else 1)
