"""Finite sources spool their records to disk: same records, same seeded order as holding them in memory,
and the spool is gone after stage 1 (also when it fails)."""

import base64
import gc
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import yaml

import mix_sampler
from minideepseek.records import RawDoc, Reject
from minideepseek.rng import permuted
from minideepseek.runconfig import load_stage_config
from minideepseek.sampling import stage as stage_mod
from minideepseek.sampling.config import MixSamplerConfig
from minideepseek.sampling.stage import run_mix_sampler
from minideepseek.sources import demo as demo_mod
from minideepseek.sources import spool as spool_mod
from minideepseek.sources.config import SourceConfig
from minideepseek.sources.demo import DemoSource
from minideepseek.sources.local import FileReport, LocalSource
from minideepseek.sources.spool import RecordSpool

ODD = [
    RawDoc(source_id="a", text="plain text"),
    RawDoc(source_id="b", text="lone \ud800 surrogate and \x00 NUL", fmt="html", meta={"component": "x", "z": [1]}),
    RawDoc(source_id="c", text=None, raw_bytes=b"\xff\xfe bad", error="invalid_utf8: x", url="u", line=3, offset=9),
    RawDoc(source_id="d", text="中文 " * 1000, lang="zh", checked=True, file="f.jsonl"),
    RawDoc(source_id="e", text=""),
]


def test_spool_round_trips_records_in_any_order(tmp_path):
    sp: RecordSpool[RawDoc] = RecordSpool(tmp_path, "t")
    sp.extend(ODD)
    with pytest.raises(RuntimeError, match="not sealed"):
        sp[0]
    sp.seal()
    assert list(sp) == ODD and len(sp) == 5
    assert sp[-1] == ODD[-1] and sp[1:3] == ODD[1:3]
    order = permuted(5, 1, "s", 2)
    assert list(sp.iter_order(order)) == [ODD[i] for i in order]
    with pytest.raises(IndexError):
        sp[5]
    assert sp.path.is_file() and sp.path.parent == tmp_path
    sp.close()
    assert not sp.path.exists() and sp.closed
    with pytest.raises(RuntimeError, match="closed"):
        sp[0]


@pytest.mark.stage
def test_private_spool_dir_removed_on_close_and_on_garbage_collection():
    sp: RecordSpool[int] = RecordSpool(None, "t")
    sp.extend(range(3))
    d = sp.path.parent
    assert list(sp.seal()) == [0, 1, 2] and d.name.startswith("minideepseek-spool-")
    sp.close()
    assert not d.exists()
    sp2: RecordSpool[int] = RecordSpool(None, "t")
    sp2.append(1)
    d2 = sp2.path.parent
    del sp2
    gc.collect()
    assert not d2.exists()


def test_a_full_disk_is_a_spool_error_not_an_unreadable_input(tmp_path, monkeypatch):
    sp: RecordSpool[bytes] = RecordSpool(tmp_path, "t")

    class Full:
        def write(self, data):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    sp._out = Full()
    with pytest.raises(spool_mod.SpoolError, match="No space left"):
        sp.append(b"x")
    assert not isinstance(spool_mod.SpoolError("x"), OSError)
    sp.close()


# ---- demo source -----------------------------------------------------------------------------------


class _FakeCorpus:
    """The demo corpus interface DemoSource uses, over records held here (incl. an invalid-UTF-8 one)."""

    def __init__(self, root: Path, recs: list[dict]) -> None:
        self.root = root
        self.manifest = {"components": []}
        self.path = root / "web_en.jsonl.gz"
        with gzip.open(self.path, "wt", encoding="utf-8") as fh:
            for r in recs:
                fh.write(json.dumps(r) + "\n")

    def domain_path(self, domain):
        return self.path

    def iter_domain(self, domain):
        with gzip.open(self.path, "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)


def _demo_records() -> list[dict]:
    recs = []
    for i in range(60):
        r = {"doc_key": f"k{i}", "component": "wiki" if i % 3 else "docs", "format": "html" if i % 2 else "text",
             "url": f"https://ex.org/{i}", "license": "CC-BY-SA", "raw": f"document {i} " * (i + 1)}
        if i % 7 == 0:
            r["raw"] = None
            r["raw_b64"] = base64.b64encode(b"\xc3\x28 invalid " + bytes([i])).decode()
        recs.append(r)
    return recs


@pytest.mark.parametrize("components", [(), ("wiki",)])
def test_demo_source_spooled_order_equals_in_memory_order(tmp_path, monkeypatch, components):
    recs = _demo_records()
    monkeypatch.setattr(demo_mod, "_corpus", lambda cache, tiers: _FakeCorpus(tmp_path, recs))
    cfg = SourceConfig(name="web", type="demo", weight=1.0, domain="web_en", lang="en", components=components)
    src = DemoSource(cfg, 11, tmp_path, ("portable",))
    src.spool_dir = tmp_path / "spool"
    # the in-memory path of before: every record as a RawDoc list, permuted per epoch
    held = [src._to_raw(r) for r in recs if not components or r["component"] in components]
    assert any(r.raw_bytes is not None and r.text is None for r in held), "an invalid-UTF-8 record is included"
    for epoch in (1, 2, 3):  # max_epochs > 1: each epoch has its own permutation of the same records
        want = [held[i] for i in permuted(len(held), 11, "web", epoch)]
        assert list(src.iter_raw(epoch)) == want
    assert [r.source_id for r in src.iter_raw(1)] != [r.source_id for r in src.iter_raw(2)]
    (spooled,) = (tmp_path / "spool").glob("*.spool")
    src.close()
    assert not spooled.exists()
    assert [r.source_id for r in src.iter_raw(1)] == [held[i].source_id for i in permuted(len(held), 11, "web", 1)]
    src.close()


# ---- local source ----------------------------------------------------------------------------------

ROWS = [{"id": f"r{i}", "text": f"row {i} " * (i + 1), "url": f"https://ex.org/{i}"} for i in range(50)]


def _local_dir(root: Path) -> Path:
    root.mkdir()
    with (root / "a.jsonl").open("w", encoding="utf-8") as fh:
        for r in ROWS[:15]:
            fh.write(json.dumps(r) + "\n")
        fh.write("{broken\n\n")
        fh.write(json.dumps({"id": "nul", "text": "a\x00b"}) + "\n")
    with gzip.open(root / "b.jsonl.gz", "wt", encoding="utf-8") as fh:
        for r in ROWS[15:25]:
            fh.write(json.dumps(r) + "\n")
    pq.write_table(pa.Table.from_pylist(ROWS[25:35]), root / "c.parquet")
    feather.write_feather(pa.Table.from_pylist(ROWS[35:45]), str(root / "d.arrow"))
    with pa.OSFile(str(root / "e.arrow"), "wb") as sink:  # IPC stream format (datasets.save_to_disk)
        t = pa.Table.from_pylist(ROWS[45:])
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
    (root / "f.txt").write_text("a plain text document\n", encoding="utf-8")
    (root / "g.txt").write_bytes(b"\xff\xfe not utf-8")
    return root


def _in_memory(src: LocalSource) -> tuple[list[RawDoc], list[Reject]]:
    """What load() held in memory before the spool: every item of every file, in file and line order."""
    recs, rejects = [], []
    for path, kind in src.files:
        for item in src._read_file(path, kind, FileReport(src._rel(path), kind)):
            (rejects if isinstance(item, Reject) else recs).append(item)
    return recs, rejects


def test_local_source_spooled_order_equals_in_memory_order(tmp_path):
    root = _local_dir(tmp_path / "src")
    cfg = SourceConfig(name="loc", type="local", weight=1.0, path=str(root), id_field="id")
    held, held_rejects = _in_memory(LocalSource(cfg, 5))
    assert {Path(r.file).suffix for r in held} == {".jsonl", ".gz", ".parquet", ".arrow", ".txt"}
    src = LocalSource(cfg, 5)
    src.spool_dir = tmp_path / "spool"
    assert list(src.load()) == held and len(src.load()) == len(held)
    assert list(src.rejects) == held_rejects and {r.reason for r in src.rejects} == {
        "invalid_json", "binary_control_chars", "invalid_utf8"}
    for epoch in (1, 2, 3):
        assert list(src.iter_raw(epoch)) == [held[i] for i in permuted(len(held), 5, "loc", epoch)]
    files = sorted((tmp_path / "spool").glob("*.spool"))
    assert len(files) == 2  # records + rejects
    reports = [r.to_dict() for r in src.file_reports]
    src.close()
    assert not any(f.exists() for f in files) and not src.rejects
    # loading again reads the files again, with the same reports (not doubled)
    assert list(src.load()) == held and [r.to_dict() for r in src.file_reports] == reports
    src.close()


# ---- stage 1 removes the spool -------------------------------------------------------------------


def _stage_config(tmp_path: Path, root: Path, **sampler) -> Path:
    cfg = {"run": {"name": "t", "seed": 3, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep")},
           "sources": [{"name": "loc", "type": "local", "path": str(root), "id_field": "id", "weight": 1.0}],
           "sampler": {"target_docs": 30, "num_proc": 1, "min_chars": 5, **sampler}}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.fixture
def spools(monkeypatch):
    """Paths of every spool created (and whether it was inside a stage tmp dir)."""
    made: list[Path] = []
    real = RecordSpool.__init__

    def init(self, directory, stem):
        real(self, directory, stem)
        made.append(self.path)

    monkeypatch.setattr(RecordSpool, "__init__", init)
    return made


@pytest.mark.stage
def test_stage1_spools_inside_its_tmp_dir_and_removes_it(tmp_path, spools):
    root = _local_dir(tmp_path / "src")
    killed = tmp_path / "data" / "t" / "mixed_raw.tmp-99999" / "_spool"  # what a SIGKILLed run leaves
    killed.mkdir(parents=True)
    (killed / "local-loc.x.spool").write_bytes(b"\x80" * 1000)
    assert mix_sampler.main(["--config", str(_stage_config(tmp_path, root))]) == 0
    assert not killed.parent.exists(), "the next run removes a dead run's tmp dir, spool included"
    assert spools and all(p.parent.name == "_spool" and ".tmp-" in p.parent.parent.name for p in spools)
    assert not any(p.exists() or p.parent.exists() for p in spools)
    run = tmp_path / "data" / "t"
    assert not list(run.rglob("*.spool")) and not list(run.glob("*.tmp-*"))
    man = json.loads((run / "mixed_raw" / "manifest.json").read_text())
    assert not [f for f in man["outputs"]["files"] if "_spool" in f["path"]]


@pytest.mark.stage
def test_stage1_removes_the_spool_when_it_fails(tmp_path, spools, monkeypatch):
    root = _local_dir(tmp_path / "src")
    cfg = _stage_config(tmp_path, root, min_chars=100_000, max_chars=200_000)  # every record too short
    assert mix_sampler.main(["--config", str(cfg)]) == 2  # "source loc yields no documents"
    assert len(spools) == 2 and not any(p.exists() or p.parent.exists() for p in spools)
    assert not list((tmp_path / "data" / "t").glob("*.tmp-*"))
    # a crash in the middle of sampling (the source's iterator still open)

    def crash(args):
        raise RuntimeError("extractor crashed")

    monkeypatch.setattr(stage_mod, "process_batch", crash)
    with pytest.raises(RuntimeError, match="extractor crashed"):
        run_mix_sampler(load_stage_config(MixSamplerConfig, _stage_config(tmp_path, root), []))
    assert len(spools) == 4 and not any(p.exists() or p.parent.exists() for p in spools)
    assert not list((tmp_path / "data" / "t").glob("*.tmp-*"))


class _HeldSpool(list):
    """The in-memory path of before, behind the spool's interface: records held in a list."""

    nbytes = 0

    def __init__(self, directory, stem):
        super().__init__()

    def seal(self):
        return self

    def iter_order(self, order):
        return (self[i] for i in order)

    def close(self):
        self.clear()


@pytest.mark.stage
def test_stage1_artifact_identical_to_the_in_memory_path(tmp_path, monkeypatch):
    root = _local_dir(tmp_path / "src")
    # 50 records, 3 passes allowed, a target beyond one pass: epochs 2-3 re-permute the spooled records
    cfg = {"run": {"name": "t", "seed": 3, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep")},
           "sources": [{"name": "loc", "type": "local", "path": str(root), "id_field": "id", "weight": 0.5,
                        "max_epochs": 3},
                       {"name": "more", "type": "local", "path": str(root), "weight": 0.5, "max_epochs": 3}],
           "sampler": {"target_docs": 220, "num_proc": 1, "min_chars": 5}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    argv = ["--config", str(tmp_path / "cfg.yaml"), "--force"]
    assert mix_sampler.main(argv) == 0
    man = json.loads((tmp_path / "data" / "t" / "mixed_raw" / "manifest.json").read_text())
    assert man["counters"]["per_source"]["loc"].get("epoch_3", 0) > 0, "the run reached a third pass"
    from minideepseek.sources import local as local_mod

    monkeypatch.setattr(local_mod, "RecordSpool", _HeldSpool)
    monkeypatch.setattr(demo_mod, "RecordSpool", _HeldSpool)
    assert mix_sampler.main(argv) == 0
    held = json.loads((tmp_path / "data" / "t" / "mixed_raw" / "manifest.json").read_text())
    assert [(f["path"], f["sha256"]) for f in held["outputs"]["files"]] == \
        [(f["path"], f["sha256"]) for f in man["outputs"]["files"]]
    assert held["fingerprint"] == man["fingerprint"]
