"""Stage 4 on small real data: fixed-size uint32 blocks, EOT accounting, spans that reconstruct every
document, the tail carried across batches, determinism, padding, staleness, memory mapping."""

import json
import sysconfig
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
from minideepseek.artifact import read_manifest
from minideepseek.packing.config import PackConfig
from minideepseek.packing.packer import DocBatch, pack_documents
from minideepseek.rng import rng_for
from minideepseek.tokenizer.config import EOT_ID, PAD_ID
from minideepseek.tokenizer.io import load_tokenizer
from tests.chain import code_zh_chain, code_zh_rows

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SEQ = 64
SHARD = 64 << 10


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Stages 1-3 on local JSONL (stdlib code + Chinese prose), near dedup and decontam off."""
    tmp = tmp_path_factory.mktemp("pack")
    rows = code_zh_rows(40, 20_000)
    # a document that quotes the EOT string must not forge a document boundary
    rows["zh"][0]["text"] += " 模型在文档之间插入 <|endoftext|> 作为分隔符。"
    p = code_zh_chain(tmp, rows, 7, {
        "sampler": {"target_docs": 80, "num_proc": 1},
        "tokenizer": {"vocab_size": 2000, "heldout_min_docs": 3, "min_chars_per_source": 1000,
                      "eval_reference": False},
        "pack": {"seq_len": SEQ, "max_shard_bytes": SHARD, "batch_docs": 3, "decode_samples": 4},
    }, (mix_sampler, cross_source_dedup, train_tokenizer))
    return tmp, p


def _pack(chain, *sets: str) -> tuple[dict, dict, Path]:
    tmp, cfg = chain
    argv = ["--config", str(cfg), "--force"]
    for s in sets:
        argv += ["--set", s]
    assert pack_shuffle.main(argv) == 0
    out = tmp / "data" / "t" / "packed"
    rep = json.loads((tmp / "reports" / "t" / "packing_report.json").read_text())
    return read_manifest(out), rep, out


def _ids(ds_dir: Path) -> np.ndarray:
    """All blocks as a (rows, seq_len) uint32 array, straight from Arrow (datasets' numpy format
    would upcast to int64)."""
    col = datasets.load_from_disk(str(ds_dir)).data.column("input_ids")
    return np.concatenate([c.flatten().to_numpy() for c in col.chunks]).reshape(-1, SEQ)


def _data_files(man: dict) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in man["outputs"]["files"] if not f["volatile"]}


def test_blocks_spans_and_accounting(chain):
    tmp, _ = chain
    man, rep, out = _pack(chain)
    ds = datasets.load_from_disk(str(out))
    assert ds.data.schema.field("input_ids").type == pa.list_(pa.uint32(), SEQ)  # fixed_size_list<uint32>
    ids = _ids(out)
    assert ids.shape == (rep["blocks"], SEQ) and ids.dtype == np.uint32

    docs = datasets.load_from_disk(str(tmp / "data" / "t" / "mixed_dedup"))
    n = len(docs)
    eot = rep["eot"]
    lost = len(rep["tail_docs"]["dropped_entirely"]) + len(rep["tail_docs"]["truncated"])
    assert rep["docs"] == eot["produced"] == eot["documents"] == n
    assert rep["dropped_tail_tokens"] > 0 and lost >= 1, "this corpus does not fill its last block exactly"
    assert eot["in_blocks"] == int((ids == EOT_ID).sum()) == n - lost
    assert rep["tokens_in_blocks"] + rep["dropped_tail_tokens"] == rep["tokens_produced"] == rep["blocks"] * SEQ \
        + rep["dropped_tail_tokens"]
    assert rep["dropped_tail_tokens"] < SEQ and rep["pad_tokens"] == 0

    # every document's parts, ordered by doc_token_start, are contiguous and decode to the exact text + EOT
    tok = load_tokenizer(tmp / "data" / "t" / "tokenizer" / "tokenizer.json")
    parts: dict[str, list[tuple[int, np.ndarray]]] = defaultdict(list)
    for row, block in zip(ds.select_columns(["doc_ids", "starts", "ends", "doc_token_start"]), ids):
        assert row["starts"][0] == 0 and row["ends"][-1] == SEQ and row["starts"][1:] == row["ends"][:-1]
        for d, s, e, t in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
            parts[d].append((t, block[s:e]))
    tail = set(rep["tail_docs"]["dropped_entirely"]) | set(rep["tail_docs"]["truncated"])
    split = 0
    for d, text in zip(docs["id"], docs["text"]):
        if d in tail:
            continue
        ps = sorted(parts.pop(d), key=lambda p: p[0])
        split += len(ps) > 1
        assert [p[0] for p in ps] == np.cumsum([0] + [len(p[1]) for p in ps[:-1]]).tolist(), d
        seq = np.concatenate([p[1] for p in ps])
        assert seq[-1] == EOT_ID and not (seq[:-1] == EOT_ID).any()
        assert seq[:-1].tolist() == tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(seq[:-1].tolist()) == text
    # a truncated tail document is split too (its last part was in the dropped tail)
    assert split > 0 and split == rep["split_docs"]["count"] - len(rep["tail_docs"]["truncated"])
    assert set(parts) <= set(rep["tail_docs"]["truncated"]), "only a truncated tail doc has leftover parts"
    assert any("<|endoftext|>" in t for t in docs["text"])

    # bounded shards, memory-mappable the way a training loader opens them
    shards = rep["shards"]
    assert shards["count"] > 1 and shards["max_bytes"] <= SHARD * 1.25
    assert sum(s["blocks"] for s in shards["files"]) == rep["blocks"]
    first = out / shards["files"][0]["file"]
    with pa.memory_map(str(first)) as mm:
        batch = next(iter(pa.ipc.open_stream(mm)))
        view = batch.column("input_ids").values.to_numpy(zero_copy_only=True).reshape(-1, SEQ)
        assert (view[:3] == ids[:3]).all()

    # report contents
    assert set(rep["per_source"]) == {"the_stack_v2", "wanjuan_zh"}
    assert rep["per_source"]["the_stack_v2"]["recipe_share"] == 0.8
    assert sum(v["tokens"] for v in rep["per_source"].values()) == rep["content_tokens"]
    assert sum(rep["docs_per_block"]["histogram"].values()) == rep["blocks"]
    assert len(rep["samples"]) == 4 and all("⟦" in s["text"] for s in rep["samples"])
    assert man["orders"]["doc_order_sha256"] and man["orders"]["block_order_sha256"]
    assert {i["name"] for i in man["inputs"]} == {"mixed_dedup", "tokenizer"}
    assert (tmp / "reports" / "t" / "packing_report.md").is_file()


def test_tail_carried_across_batches_and_determinism(chain):
    small, _, _ = _pack(chain, "pack.batch_docs=3")
    large, _, _ = _pack(chain, "pack.batch_docs=100000")
    assert _data_files(small) == _data_files(large), "batch boundaries must not change the blocks"
    assert small["fingerprint"] == large["fingerprint"]
    again, _, _ = _pack(chain)
    assert again["fingerprint"] == small["fingerprint"]


def test_block_seed_changes_order_not_blocks(chain, tmp_path):
    tmp, _ = chain
    docs = datasets.load_from_disk(str(tmp / "data" / "t" / "mixed_dedup"))
    tok = load_tokenizer(tmp / "data" / "t" / "tokenizer" / "tokenizer.json")
    pc = PackConfig(seq_len=SEQ, batch_docs=5)

    def run(seed: int) -> tuple[str, np.ndarray]:
        batches = (DocBatch(docs["id"][i:i + 5], docs["source"][i:i + 5], docs["text"][i:i + 5])
                   for i in range(0, len(docs), 5))
        out = tmp_path / f"s{seed}"
        st = pack_documents(batches, tok, pc, rng_for(seed, "pack", "blocks"), out, tmp_path / f"w{seed}")
        assert not (tmp_path / f"w{seed}").exists(), "the pack-order temp file is removed"
        return st.block_order_sha256, _ids(out)

    (h1, a), (h2, b) = run(1), run(2)
    assert h1 != h2 and not np.array_equal(a, b)
    key = lambda x: x[np.lexsort(x.T[::-1])]  # noqa: E731 - rows sorted: the multiset of blocks
    assert np.array_equal(key(a), key(b))


def test_tail_pad(chain):
    _, rep, out = _pack(chain, "pack.tail=pad")
    ids = _ids(out)
    padded = np.flatnonzero((ids == PAD_ID).any(axis=1))
    assert len(padded) == 1, "only the run's last block is padded"
    row = ids[padded[0]]
    k = rep["pad_tokens"]
    assert 0 < k < SEQ and (row[-k:] == PAD_ID).all() and (row[:-k] != PAD_ID).all()
    assert rep["pad_share"] == round(k / (rep["blocks"] * SEQ), 6)
    assert rep["tokens_in_blocks"] == rep["tokens_produced"] and rep["dropped_tail_tokens"] == 0
    assert rep["eot"]["in_blocks"] == rep["docs"] == int((ids == EOT_ID).sum())


def test_stale_upstream_and_bad_config_refused(chain, capsys):
    tmp, cfg = chain
    _pack(chain)
    before = read_manifest(tmp / "data" / "t" / "packed")
    assert pack_shuffle.main(["--config", str(cfg)]) == 0  # up to date: skipped
    assert read_manifest(tmp / "data" / "t" / "packed")["finished_at"] == before["finished_at"]
    assert pack_shuffle.main(["--config", str(cfg), "--set", "tokenizer.vocab_size=2500"]) == 2
    assert "train_tokenizer.py" in capsys.readouterr().err
    assert pack_shuffle.main(["--config", str(cfg), "--set", "pack.tail=truncate"]) == 2
    assert pack_shuffle.main(["--config", str(cfg), "--set", "pack.seq_len=8"]) == 2
    assert pack_shuffle.main(["--config", str(cfg), "--set", "pack.max_shard_bytes=100"]) == 2


def test_encoder_auto_and_hf_write_identical_blocks(chain):
    """tiktoken (pack.encoder auto) and HF write byte-identical shards; the report counts the check."""
    man_a, rep_a, _ = _pack(chain)
    man_h, rep_h, _ = _pack(chain, "pack.encoder=hf")
    assert rep_a["encoder"]["engine"] == "tiktoken", rep_a["encoder"]
    c = rep_a["encoder"]["check"]
    assert c["docs_encoded"] == rep_a["docs"] and c["docs_checked"] >= 1 and c["mismatches"] == 0
    assert rep_h["encoder"]["engine"] == "hf" and rep_h["encoder"]["check"] is None
    assert _data_files(man_a) == _data_files(man_h)
