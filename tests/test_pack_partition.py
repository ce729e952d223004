"""Per-partition tokenize + pack (stage 4's executor path) writes exactly the local packer's shards:
partitions of 1..7 documents, blocks shorter and longer than a document (so one block can take
pieces from several partitions), tail dropped or padded. Run here with the local executor's
in-process map; tests/test_ray_executor.py runs the same code on Ray."""

import hashlib
from pathlib import Path

import pytest

from minideepseek.arrow_io import shard_paths
from minideepseek.executor import LocalExecutor
from minideepseek.mapped import MappedArrow
from minideepseek.packing import partition
from minideepseek.packing.config import PackConfig
from minideepseek.packing.packer import pack_documents
from minideepseek.packing.stage import doc_batches
from minideepseek.rng import rng_for
from minideepseek.tokenizer.io import load_tokenizer
from tests.chain import build_chain


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return build_chain(tmp_path_factory.mktemp("part"))


def _shas(d: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in shard_paths(d)]


@pytest.mark.parametrize("seq_len,part_docs,tail", [(64, 1, "drop"), (64, 7, "pad"), (4096, 1, "drop"),
                                                    (4096, 3, "pad"), (1024, 5, "drop")])
def test_partitioned_equals_local(chain, tmp_path, monkeypatch, seq_len, part_docs, tail):
    src = chain / "data" / "t" / "mixed_dedup"
    tok_path = chain / "data" / "t" / "tokenizer" / "tokenizer.json"
    tok = load_tokenizer(tok_path)
    pc = PackConfig(seq_len=seq_len, tail=tail, max_shard_bytes=max(16 << 10, 8 * seq_len), batch_docs=4)
    docs = MappedArrow(shard_paths(src), "stream", columns=["id", "source", "text"])
    order = rng_for(3, "pack", "documents").permutation(docs.num_rows)
    local = pack_documents(doc_batches(docs, order, pc.batch_docs), tok, pc, rng_for(3, "pack", "blocks"),
                           tmp_path / "local", tmp_path / "lw")
    docs.close()
    monkeypatch.setattr(partition, "PARTITION_DOCS", part_docs)
    shards = [str(p.resolve()) for p in shard_paths(src)]
    part = partition.pack_partitioned(LocalExecutor(), shards, order, str(tok_path.resolve()), tok.get_vocab_size(),
                                      pc, rng_for(3, "pack", "blocks"), tmp_path / "part", tmp_path / "pw")
    assert _shas(tmp_path / "local") == _shas(tmp_path / "part") and len(_shas(tmp_path / "local")) >= 1
    for f in ("docs", "content_tokens", "tokens_produced", "blocks", "tokens_in_blocks", "dropped_tail_tokens",
              "pad_tokens", "eot_produced", "eot_in_blocks", "split_docs", "max_id", "spans_per_block", "source_docs",
              "source_tokens", "tail_dropped_docs", "tail_truncated_docs", "block_order_sha256"):
        assert getattr(part, f) == getattr(local, f), f
    assert not (tmp_path / "pw").exists()  # work files removed
