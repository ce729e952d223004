"""``pack.by_source``: single-source blocks in contiguous per-source ranges, the same document token
sequences as the mixed stream, per-source counters in the manifest, determinism, withdrawal
(re-packed per source), and the Ray partitioned path."""

import os
import shutil
from collections import defaultdict
from pathlib import Path

import datasets
import numpy as np
import pytest

import pack_shuffle
from minideepseek.artifact import read_manifest
from tests.chain import build_chain


def _doc_tokens(ds: datasets.Dataset) -> dict[str, list[int]]:
    """Every document's token sequence (+ EOT), put together from its parts in the blocks."""
    parts: dict[str, list[tuple[int, list[int]]]] = defaultdict(list)
    for row in ds:
        for d, s, e, t in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
            parts[d].append((t, row["input_ids"][s:e]))
    return {d: [x for _, p in sorted(ps) for x in p] for d, ps in parts.items()}


def _pack(root: Path, *extra: str) -> int:
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return pack_shuffle.main(["--config", "t.yaml", "--set", "pack.by_source=true", *extra])
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bysrc")
    root = build_chain(tmp)  # mixed mode
    mixed = datasets.load_from_disk(str(root / "data/t/packed"))
    mixed_tokens = _doc_tokens(mixed)
    sources = {r["id"]: r["source"] for r in datasets.load_from_disk(str(root / "data/t/mixed_dedup"))}
    assert _pack(root) == 0
    return root, mixed_tokens, sources


def test_single_source_blocks_in_manifest_ranges(runs):
    root, mixed_tokens, sources = runs
    man = read_manifest(root / "data/t/packed")
    table = man["by_source"]
    assert set(table) == {"fineweb_edu", "the_stack_v2"}
    ds = datasets.load_from_disk(str(root / "data/t/packed"))
    assert sum(t["blocks"] for t in table.values()) == len(ds) == man["counters"]["blocks"]
    lo = 0
    for name in sorted(table):  # contiguous, in name order, covering every row
        t = table[name]
        assert t["block_range"][0] == lo and t["block_range"][1] - lo == t["blocks"] > 0
        lo = t["block_range"][1]
        for row in range(*t["block_range"]):
            assert {sources[d] for d in ds[row]["doc_ids"]} == {name}, f"block {row} mixes sources"
        assert t["docs"] == sum(1 for s in sources.values() if s == name)
        # tail rule per source: what is not in the blocks is that source's dropped tail
        assert t["tokens_in_blocks"] + t["dropped_tail_tokens"] == t["tokens_produced"]
        assert t["tokens_in_blocks"] == t["blocks"] * 64
    assert lo == len(ds)
    # the same tokenizer output per document as the mixed stream (documents whole in both runs)
    by_src = _doc_tokens(ds)
    whole = [d for d in by_src if d in mixed_tokens and by_src[d][-1:] == [0] and mixed_tokens[d][-1:] == [0]]
    assert len(whole) > 0.8 * len(sources)
    for d in whole:
        assert by_src[d] == mixed_tokens[d], d
    rep = (root / "reports/t/packing_report.md").read_text()
    assert "## Per-source blocks" in rep


def test_by_source_deterministic_and_pad_tail(runs, tmp_path):
    root, _, _ = runs
    copy = tmp_path / "run"
    shutil.copytree(root, copy)
    ref = {p.name: p.read_bytes() for p in sorted((root / "data/t/packed").glob("*.arrow"))}
    assert _pack(copy, "--force") == 0
    assert {p.name: p.read_bytes() for p in sorted((copy / "data/t/packed").glob("*.arrow"))} == ref
    assert _pack(copy, "--set", "pack.tail=pad") == 0
    table = read_manifest(copy / "data/t/packed")["by_source"]
    ds = datasets.load_from_disk(str(copy / "data/t/packed"))
    for t in table.values():  # each source pads its own last block: the padded block is single-source
        assert t["dropped_tail_tokens"] == 0
        assert t["tokens_in_blocks"] == t["tokens_produced"]
        pads = sum(int(np.count_nonzero(np.asarray(ds[r]["input_ids"]) == 1)) for r in range(*t["block_range"]))
        assert pads == t["pad_tokens"] < 64


def test_withdraw_on_by_source_data(runs, tmp_path, monkeypatch):
    """A withdrawal re-packs per source: every block stays single-source, every source one contiguous
    range (the manifest's table follows), no other document loses a token, verification passes."""
    import withdraw

    root, _, sources = runs
    copy = tmp_path / "run"
    shutil.copytree(root, copy)
    monkeypatch.chdir(copy)
    before = datasets.load_from_disk("data/t/packed")
    tokens_before = _doc_tokens(before)
    old = read_manifest(copy / "data/t/packed")["by_source"]
    # one document of each source that has tokens in the middle of its source's range
    victims = []
    for name in sorted(old):
        lo, hi = old[name]["block_range"]
        victims.append(before[(lo + hi) // 2]["doc_ids"][0])
    args = [x for v in victims for x in ("--id", v)]
    assert withdraw.main(["--config", "t.yaml", *args, "--who", "test", "--why", "by_source"]) == 0
    man = read_manifest(copy / "data/t/packed")
    table = man["by_source"]
    ds = datasets.load_from_disk("data/t/packed")
    assert sum(t["blocks"] for t in table.values()) == len(ds) == man["counters"]["blocks"]
    lo = 0
    for name in sorted(table):
        t = table[name]
        assert t["block_range"][0] == lo and t["block_range"][1] - lo == t["blocks"]
        lo = t["block_range"][1]
        for row in range(*t["block_range"]):
            assert {sources[d] for d in ds[row]["doc_ids"]} == {name}, f"block {row} mixes sources"
        pads = sum(int(np.count_nonzero(np.asarray(ds[r]["input_ids"]) == 1)) for r in range(*t["block_range"]))
        assert pads == t["pad_tokens"] and t["tokens_in_blocks"] == t["blocks"] * 64 - pads
        assert t["tokens_in_blocks"] + t["dropped_tail_tokens"] == t["tokens_produced"]
        assert t["docs"] == old[name]["docs"] - sum(1 for v in victims if sources[v] == name)
    assert lo == len(ds)
    after = _doc_tokens(ds)
    assert not set(victims) & set(after)
    assert all(after[d] == tokens_before[d] for d in tokens_before if d not in victims)
    rep = (copy / "reports/t/packing_report.json").read_text()
    assert '"by_source"' in rep


def test_partitioned_by_source_writes_the_same_blocks(runs, tmp_path):
    """The --executor ray path (partition tasks per source, here run in-process by a stand-in
    executor with Ray's interface) writes byte-identical shards and the same per-source table."""
    from types import SimpleNamespace

    from minideepseek.packing.stage import run_pack
    from minideepseek.pipeline import Plan

    root, _, _ = runs
    copy = tmp_path / "run"
    shutil.copytree(root, copy)
    ref = {p.name: p.read_bytes() for p in sorted((root / "data/t/packed").glob("*.arrow"))}
    ref_table = read_manifest(root / "data/t/packed")["by_source"]
    cwd = os.getcwd()
    os.chdir(copy)
    try:
        sets = ["pack.by_source=true"]
        plan = Plan("t.yaml", sets)
        ex = SimpleNamespace(kind="ray", map=lambda fn, it: [fn(x) for x in it])
        run_pack(plan.config("pack_shuffle"), plan.upstream_hashes("pack_shuffle"), "t.yaml", force=True, executor=ex)
    finally:
        os.chdir(cwd)
    assert {p.name: p.read_bytes() for p in sorted((copy / "data/t/packed").glob("*.arrow"))} == ref
    assert read_manifest(copy / "data/t/packed")["by_source"] == ref_table


def test_dashboard_reads_by_source_run(runs):
    import report

    root, _, _ = runs
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert report.main(["show", "reports/t"]) == 0
    finally:
        os.chdir(cwd)
    assert "the_stack_v2" in (root / "reports/dashboard.md").read_text()
