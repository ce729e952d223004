"""withdraw.py on a small real chain (stages 1-4: stdlib code + stdlib docstrings with a planted
near-duplicate): every selector kind, a document cut across blocks of two shards, untouched shards
byte-identical, no other document losing a token, absent and repeated requests, a kill at every
swap point, stage 1 honouring the log on a rebuild, the retrain threshold, and a verification that
fails when a near-copy is left behind."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pytest

import cross_source_dedup
import mix_sampler
import pack_shuffle
import train_tokenizer
import withdraw
from minideepseek.arrow_io import read_columns
from minideepseek.artifact import read_manifest
from minideepseek.tokenizer.io import encode_docs, load_tokenizer
from tests.chain import build_chain

ROOT = Path(__file__).resolve().parents[1]
ARTS = ("mixed_raw", "mixed_dedup", "tokenizer", "packed")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A finished stages 1-4 run with relative data/report dirs, so a test can copy it and chdir."""
    return build_chain(tmp_path_factory.mktemp("wd"))


@pytest.fixture
def run(pristine, tmp_path, monkeypatch):
    """A private copy of the finished run, as the current directory."""
    root = tmp_path / "run"
    shutil.copytree(pristine, root)
    monkeypatch.chdir(root)
    return root


def _wd(*args: str) -> int:
    return withdraw.main(["--config", "t.yaml", *args])


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _shards(art: str) -> dict[str, str]:
    d = Path("data/t") / art
    return {p.name: _sha(p) for p in sorted(d.glob("data-*.arrow"))}


def _parts() -> dict[str, list[tuple[int, list[int], str]]]:
    """doc id -> [(doc_token_start, tokens, shard)] over every packed block."""
    out = defaultdict(list)
    for p in sorted(Path("data/t/packed").glob("data-*.arrow")):
        t = pa.ipc.open_stream(pa.memory_map(str(p))).read_all()
        for row in t.to_pylist():
            for d, s, e, k in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
                out[d].append((k, row["input_ids"][s:e], p.name))
    return out


def _assert_no_token_lost(withdrawn: set[str]) -> int:
    """Every remaining document's packed parts reassemble to its exact encoding (+EOT)."""
    tok = load_tokenizer(Path("data/t/tokenizer/tokenizer.json"))
    rep = json.loads(Path("data/t/packed/packing_report.json").read_text())
    tail = set(rep["tail_docs"]["dropped_entirely"]) | set(rep["tail_docs"]["truncated"])
    parts = _parts()
    c = read_columns(Path("data/t/mixed_dedup"), ["id", "text"])
    n = 0
    for i, text in zip(c["id"], c["text"]):
        assert i not in withdrawn
        if i in tail:
            continue
        flat, _ = encode_docs(tok, [text])
        seq = [x for _, ch, _ in sorted(parts[i], key=lambda p: p[0]) for x in ch]
        assert seq == flat.tolist(), i
        n += 1
    assert not withdrawn & set(parts)
    assert rep["tokens_in_blocks"] + rep["dropped_tail_tokens"] == rep["tokens_produced"]
    return n


def _split_doc() -> str:
    """A document cut across blocks of two different shards."""
    for d, ps in sorted(_parts().items()):
        if len({s for _, _, s in ps}) >= 2:
            return d
    raise AssertionError("no document spans two shards; lower pack.max_shard_bytes")


def test_withdraw_split_document_rewrites_only_its_shards(run):
    doc = _split_doc()
    holding = {s for _, _, s in _parts()[doc]}
    before = _shards("packed")
    fps = {a: read_manifest(Path("data/t") / a)["fingerprint"] for a in ARTS}
    assert len(before) >= 4
    assert _wd("--id", doc, "--who", "test", "--why", "takedown") == 0
    after = _shards("packed")
    assert set(before) == set(after)
    for name in before:
        assert (before[name] != after[name]) == (name in holding), name  # only the holding shards changed
    _assert_no_token_lost({doc})
    ticket = json.loads(Path("data/t/deletion_requests.jsonl").read_text().splitlines()[0])["ticket"]
    rec = json.loads(Path(f"reports/t/withdrawals/{ticket}.json").read_text())
    touched = [r for rows in rec["location"]["packed_blocks"].values() for r in rows]
    assert rec["verification"]["pass"] and rec["repack"]["touched_blocks"] == len(touched) >= 2
    note = Path("reports/t/release_note.md").read_text()
    assert doc in note and "takedown" in note
    # the refreshed manifests chain up: every stage is up to date, nothing is rebuilt
    for a in ARTS:
        assert read_manifest(Path("data/t") / a)["fingerprint"] != fps[a]
    new = {a: read_manifest(Path("data/t") / a)["fingerprint"] for a in ARTS}
    for stage in (mix_sampler, cross_source_dedup, train_tokenizer, pack_shuffle):
        assert stage.main(["--config", "t.yaml"]) == 0
    assert {a: read_manifest(Path("data/t") / a)["fingerprint"] for a in ARTS} == new
    # reports: recomputed, no withdrawn id left in them
    mix = json.loads(Path("reports/t/source_mix.json").read_text())
    assert mix["totals"]["docs"] == read_manifest(Path("data/t/mixed_raw"))["counters"]["docs"]
    assert datasets.load_from_disk("data/t/packed").num_rows == json.loads(
        Path("reports/t/packing_report.json").read_text())["blocks"]


@pytest.mark.parametrize("kind", ["url", "hash", "text"])
def test_selector_kinds(run, kind):
    c = read_columns(Path("data/t/mixed_raw"), ["id", "url", "hash", "text", "source"])
    k = next(i for i, (s, t) in enumerate(zip(c["source"], c["text"])) if s == "the_stack_v2" and len(t) > 2000)
    value = {"url": c["url"][k], "hash": c["hash"][k], "text": " ".join(c["text"][k][500:700].split())}[kind]
    assert _wd(f"--{kind}", value) == 0
    left = set(read_columns(Path("data/t/mixed_raw"), ["id"])["id"])
    assert c["id"][k] not in left and len(left) == len(c["id"]) - 1
    _assert_no_token_lost({c["id"][k]})


def test_url_prefix_and_source(run):
    c = read_columns(Path("data/t/mixed_raw"), ["id", "source"])
    n_code = c["source"].count("the_stack_v2")
    assert _wd("--source", "the_stack_v2") == 0
    left = read_columns(Path("data/t/mixed_raw"), ["source"])["source"]
    assert "the_stack_v2" not in left and len(left) == len(c["id"]) - n_code
    mix = json.loads(Path("reports/t/source_mix.json").read_text())
    assert {r["source"]: r["docs"] for r in mix["sources"]}["the_stack_v2"] == 0
    _assert_no_token_lost(set())
    # a broad prefix matching more than max_docs stops before changing anything
    before = _shards("mixed_raw")
    assert _wd("--url", "https://docs.example.org/*", "--set", "withdraw.max_docs=3") == 2
    assert _shards("mixed_raw") == before


def test_absent_and_repeated_requests(run):
    snap = {a: _sha(Path("data/t") / a / "manifest.json") for a in ARTS}
    assert _wd("--id", "the_stack_v2/0000000000000000") == 3  # nothing matched
    assert {a: _sha(Path("data/t") / a / "manifest.json") for a in ARTS} == snap
    events = [json.loads(x)["event"] for x in Path("data/t/deletion_requests.jsonl").read_text().splitlines()]
    assert events == ["not_found"]
    doc = read_columns(Path("data/t/mixed_raw"), ["id"])["id"][5]
    assert _wd("--id", doc) == 0
    snap = {a: _sha(Path("data/t") / a / "manifest.json") for a in ARTS}
    assert _wd("--id", doc, "--why", "again") == 0  # a no-op, logged
    assert {a: _sha(Path("data/t") / a / "manifest.json") for a in ARTS} == snap
    events = [json.loads(x)["event"] for x in Path("data/t/deletion_requests.jsonl").read_text().splitlines()]
    assert events == ["not_found", "accepted", "applied", "repeat"]
    assert _wd("--text", "too short") == 2  # a fragment that would match too much is refused


def test_duplicate_group_and_failing_verification(run):
    ids = read_columns(Path("data/t/mixed_raw"), ["id"])["id"]
    twin = next(i for i in ids if i.endswith("/planted_twin"))  # the source's own id (id_field), kept
    removed = [json.loads(x) for x in Path("data/t/mixed_dedup/removed.jsonl").read_text().splitlines()]
    pair = next(r for r in removed if twin in (r["id"], r["kept"]))
    kept = pair["kept"] if pair["id"] == twin else pair["id"]
    # without the duplicate group the kept twin stays, and verification says so (exit 4)
    assert _wd("--id", kept, "--set", "withdraw.duplicates=false") == 4
    rec = json.loads(next(Path("reports/t/withdrawals").glob("wd-*.json")).read_text())
    assert any(t["kind"] == "ngram_containment" and t["found_as"] == twin for t in rec["verification"]["traces"])


def test_duplicate_group_follows(run):
    ids = read_columns(Path("data/t/mixed_raw"), ["id"])["id"]
    twin = next(i for i in ids if i.endswith("/planted_twin"))  # the source's own id (id_field), kept
    assert _wd("--id", twin) == 0  # the removed twin; its kept partner (same content) goes too
    left = set(read_columns(Path("data/t/mixed_raw"), ["id"])["id"])
    assert len(left) == len(ids) - 2 and twin not in left
    rep = json.loads(Path("reports/t/dedup_report.json").read_text())
    man = read_manifest(Path("data/t/mixed_dedup"))["counters"]
    removed = rep["removed"]
    assert rep["dup_rate"] == round((removed.get("exact", 0) + removed.get("near", 0)) / rep["docs_in"], 6)
    assert man["near_removed"] == removed.get("near", 0) and man["docs_in"] == len(left)
    assert sum(c["clusters"] for c in rep["cluster_size_histogram"]) == len(rep["largest_clusters"]) or \
        len(rep["largest_clusters"]) == 10


def _subprocess_withdraw(args: list[str], crash: str | None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if crash:
        env["MINIDEEPSEEK_CRASH_AT"] = crash
    return subprocess.run([sys.executable, str(ROOT / "withdraw.py"), "--config", "t.yaml", *args], env=env,
                          capture_output=True, text=True, timeout=300).returncode


@pytest.mark.parametrize("crash", ["accepted", "mixed_dedup:before_swap", "packed:before_swap", "packed:after_swap"])
def test_kill_during_withdrawal_then_rerun(run, tmp_path, crash):
    doc = _split_doc()
    # the reference: an uninterrupted withdrawal in a copy
    ref = tmp_path / "ref"
    shutil.copytree(run, ref)
    os.chdir(ref)
    assert _subprocess_withdraw(["--id", doc], None) == 0
    want = {a: _shards(a) for a in ("mixed_raw", "mixed_dedup", "packed")}
    want_fp = {a: read_manifest(Path("data/t") / a)["fingerprint"] for a in ARTS}
    os.chdir(run)
    fake = Path("data/t/smoke_train")  # a model trained on the blocks: must not survive a resumed run either
    fake.mkdir()
    (fake / "manifest.json").write_text(json.dumps({"artifact": "smoke_train", "inputs": [], "withdrawals": []}))
    assert _subprocess_withdraw(["--id", doc], crash) == -9
    events = [json.loads(x)["event"] for x in Path("data/t/deletion_requests.jsonl").read_text().splitlines()]
    assert events == ["accepted"]  # accepted, never applied: nothing claims to be done
    for a in ARTS:  # every artifact is complete (old or new), never half-written
        assert read_manifest(Path("data/t") / a) is not None or list(Path("data/t").glob(f"{a}.old-*"))
    assert _subprocess_withdraw(["--id", doc], None) == 0  # the rerun completes it
    assert not list(Path("data/t").glob("*.tmp-*")) and not list(Path("data/t").glob("*.old-*"))
    assert {a: _shards(a) for a in ("mixed_raw", "mixed_dedup", "packed")} == want
    # reports too: the fingerprints (data + non-volatile reports) equal the uninterrupted run's
    assert {a: read_manifest(Path("data/t") / a)["fingerprint"] for a in ARTS} == want_fp
    events = [json.loads(x)["event"] for x in Path("data/t/deletion_requests.jsonl").read_text().splitlines()]
    assert events == ["accepted", "applied"]
    assert not fake.exists()
    rec = json.loads(next(Path("reports/t/withdrawals").glob("wd-*.json")).read_text())
    assert rec["repack"]["touched_blocks"] >= 2 and rec["shards"]["packed"]  # known even after a resume
    _assert_no_token_lost({doc})


def test_new_request_waits_for_an_interrupted_one(run):
    ids = read_columns(Path("data/t/mixed_raw"), ["id"])["id"]
    assert _subprocess_withdraw(["--id", ids[1]], "mixed_dedup:before_swap") == -9
    assert _wd("--id", ids[2]) == 2  # refused: its figures would be computed on half-withdrawn artifacts
    assert _wd("--resume") == 0
    assert _wd("--id", ids[2]) == 0
    mix = json.loads(Path("reports/t/source_mix.json").read_text())
    assert mix["totals"]["docs"] == len(ids) - 2 == read_manifest(Path("data/t/mixed_raw"))["counters"]["docs"]


def test_torn_log_line_is_cut_not_sealed(tmp_path):
    from minideepseek.tickets import TicketLog

    log = TicketLog(tmp_path / "log.jsonl")
    log.append({"event": "repeat", "ticket": "wd-00000000000a"})
    with log.path.open("ab") as fh:
        fh.write(b'{"event": "acc')  # a kill in the middle of a write
    assert [e["ticket"] for e in log.events()] == ["wd-00000000000a"]
    log.append({"event": "repeat", "ticket": "wd-00000000000b"})
    assert [e["ticket"] for e in log.events()] == ["wd-00000000000a", "wd-00000000000b"]  # still readable afterwards


def test_verification_finds_short_documents(tmp_path):
    """A withdrawn text shorter than the n-gram length is still found when another row quotes it."""
    from minideepseek.arrow_io import DatasetWriter
    from minideepseek.records import DOC_FEATURES, text_hash
    from minideepseek.withdraw.verify import token_grams, verify, word_grams

    short = "withdraw this very short private note now"  # 7 words < 13
    quote = "An unrelated page that happens to say: withdraw this very short private note now, and more."
    rows = [{"id": "web/0000000000000001", "source": "web", "text": quote, "url": "", "license": "", "lang": "en",
             "lang_score": 1.0, "n_chars": len(quote), "n_tokens": 20, "hash": text_hash(quote),
             "quality_signals": "{}", "stage": "mix_sampler", "audit_trace": []}]
    w = DatasetWriter(tmp_path / "run" / "mixed_raw", DOC_FEATURES)
    w.write_rows(rows)
    w.close()
    g, n = word_grams(short, 13)
    assert n == 7 and len(g) == 1
    tg, tn = token_grams(np.arange(5, 15, dtype=np.uint32), 16)
    assert tn == 10 and len(tg) == 1
    doc = {"id": "web/00000000000000ff", "hash": text_hash(short)}
    res = verify(tmp_path / "run", tmp_path / "reports", [doc], [{"words": g, "word_n": n, "tokens": None,
                                                                   "token_n": 0}], 0.5)
    assert not res["pass"] and res["traces"][0]["found_as"] == "web/0000000000000001"


def test_rebuild_keeps_withdrawn_documents_out(run):
    doc = read_columns(Path("data/t/mixed_raw"), ["id"])["id"][3]
    assert _wd("--id", doc) == 0
    assert mix_sampler.main(["--config", "t.yaml", "--force"]) == 0
    man = read_manifest(Path("data/t/mixed_raw"))
    assert doc not in read_columns(Path("data/t/mixed_raw"), ["id"])["id"]
    assert sum(man["counters"]["withdrawn_at_ingestion"].values()) == 1
    assert doc not in Path("data/t/mixed_raw/rejects.jsonl").read_text()


def test_retrain_threshold(run):
    sample = json.loads(Path("data/t/tokenizer/sample.json").read_text())
    doc = sample["the_stack_v2"]["train"][0]
    tok_sha = _sha(Path("data/t/tokenizer/tokenizer.json"))
    assert _wd("--id", doc, "--set", "withdraw.retrain_share=0.001") == 0
    rec = json.loads(next(Path("reports/t/withdrawals").glob("wd-*.json")).read_text())
    assert rec["tokenizer"]["retrain_required"] and not rec["tokenizer"]["retrained"]
    assert _sha(Path("data/t/tokenizer/tokenizer.json")) == tok_sha  # never retrained silently
    assert "RETRAIN REQUIRED" in Path(f"reports/t/withdrawals/{rec['ticket']}.md").read_text()


def test_retrain_when_asked(run):
    sample = json.loads(Path("data/t/tokenizer/sample.json").read_text())
    doc = sample["fineweb_edu"]["train"][0]
    tok_sha = _sha(Path("data/t/tokenizer/tokenizer.json"))
    assert _wd("--id", doc, "--set", "withdraw.retrain_share=0.001", "--retrain-tokenizer") == 0
    rec = json.loads(next(Path("reports/t/withdrawals").glob("wd-*.json")).read_text())
    assert rec["tokenizer"]["retrained"]
    assert _sha(Path("data/t/tokenizer/tokenizer.json")) != tok_sha
    assert doc not in Path("data/t/tokenizer/sample.json").read_text()
    assert rec["verification"]["pass"] and rec["verification"]["checked"]["packed_mode"] == "decoded words"
    _assert_no_token_lost({doc})
