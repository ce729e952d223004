"""``python -m minideepseek.export megatron``: per-source .bin/.idx read back by Megatron-Core's own
``IndexedDataset`` (megatron-core is pinned in requirements.txt; it imports on CPU with our torch),
every document's tokens round-trip, for the mixed and the by_source packing; the blend string."""

import json
import os
import warnings

import numpy as np
import pytest

import pack_shuffle
from minideepseek.export.__main__ import main as export_main
from minideepseek.export.megatron import read_doc_tokens
from tests.chain import build_chain

with warnings.catch_warnings():  # "Transformer Engine and Apex are not installed": irrelevant to the reader
    warnings.simplefilter("ignore")
    from megatron.core.datasets.indexed_dataset import IndexedDataset


@pytest.mark.parametrize("by_source", [False, True])
@pytest.mark.stage
def test_megatron_round_trip(tmp_path, by_source):
    root = build_chain(tmp_path)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        if by_source:
            assert pack_shuffle.main(["--config", "t.yaml", "--set", "pack.by_source=true"]) == 0
        assert export_main(["megatron", "--config", "t.yaml", "--out", "exp"]) == 0
    finally:
        os.chdir(cwd)
    want = read_doc_tokens(root / "data/t")
    blend = json.loads((root / "exp/blend.json").read_text())
    assert set(blend["sources"]) == {"the_stack_v2", "fineweb_edu"}
    seen = 0
    for name, info in blend["sources"].items():
        ds = IndexedDataset(str(root / "exp" / name))  # Megatron's reader, memory-mapped
        ids = sorted(d for d, (s, _) in want.items() if s == name)
        assert len(ds) == info["documents"] == len(ids)
        assert list(ds.document_indices) == list(range(len(ids) + 1))
        for i, d in enumerate(ids):
            assert ds[i].tolist() == want[d][1], d
            seen += 1
        assert int(ds.sequence_lengths.sum()) == info["tokens"]
    assert seen == len(want) > 70
    # whole documents end with <|endoftext|>; the export holds exactly the packed tokens
    assert sum(len(t) for _, t in want.values()) == sum(v["tokens"] for v in blend["sources"].values())
    assert np.isclose(sum(v["weight"] for v in blend["sources"].values()), 1.0)
    path = (root / "exp/data_path.txt").read_text().split()
    assert path == [x for v in blend["sources"].values() for x in (str(v["weight"]), v["prefix"])]
    assert blend["sources"]["the_stack_v2"]["weight"] == pytest.approx(0.55)
