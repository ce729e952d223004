"""Re-cut the packed blocks that held a withdrawn document (packing/remove.py).

A block that holds any token of a withdrawn document is *touched*. The remaining
parts of all touched blocks (other documents' tokens, spans and ``doc_token_start`` kept) are
concatenated in their old order and re-cut into ``seq_len`` blocks; only the very last re-cut block
can be partial, and it is padded with ``<|pad|>`` (id 1, never a training target) rather than
dropped, so no other document loses a token. The new blocks go back into the touched shards, in
shard order, at the positions of the first touched rows; every untouched shard keeps its bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow_io import iter_batches, shard_paths
from ..edits import copy_artifact, link_or_copy, shard_record, write_state
from ..tokenizer.config import PAD_ID


def repack_shards(src: Path, dst: Path, drop: set[str], seq_len: int, skip: set[str] = frozenset(),
                  ranges: dict[str, list[int]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Packed dataset without any token of the ``drop`` documents (see the module docstring).

    ``ranges`` (``pack.by_source`` data: source -> its global row range ``[lo, hi)``): the re-pack is
    done per source, so every block stays single-source and every source stays one contiguous range;
    ``info["ranges"]`` gives the new ranges (a source loses the rows its re-cut no longer fills)."""
    shards = shard_paths(src)
    names = [p.name for p in shards]
    copy_artifact(src, dst, skip | set(names) | {"state.json"})
    shutil.copyfile(src / "state.json", dst / "state.json")
    rp = _Repack(shards, drop, seq_len, ranges)
    rp.collect()
    out = rp.write(dst)
    write_state(dst, names)
    return out, rp.info()


class _Repack:
    """One re-pack: the touched rows of each shard, grouped by source range ("" = one mixed stream)."""

    def __init__(self, shards: list[Path], drop: set[str], seq_len: int, ranges: dict[str, list[int]] | None) -> None:
        self.shards, self.drop, self.S, self.ranges = shards, drop, seq_len, ranges
        self.tables: dict[str, pa.Table] = {}
        self.touched: dict[str, list[int]] = {}
        self.first_row: dict[str, int] = {}  # shard -> global index of its first row
        offset = 0
        for path in shards:
            with pa.memory_map(str(path)) as mm:
                t = pa.ipc.open_stream(mm).read_all()
            self.first_row[path.name] = offset
            offset += t.num_rows
            rows = [r for r, docs in enumerate(t.column("doc_ids").to_pylist()) if any(d in drop for d in docs)]
            if rows:
                self.tables[path.name] = t
                self.touched[path.name] = rows
        self.order_of = sorted(ranges, key=lambda n: ranges[n][0]) if ranges else [""]

    def group(self, name: str, r: int) -> str:
        """The source whose range holds row ``r`` of shard ``name`` ("" = one mixed stream)."""
        if not self.ranges:
            return ""
        g = self.first_row[name] + r
        return next(n for n in self.order_of if self.ranges[n][0] <= g < self.ranges[n][1])

    def collect(self) -> None:
        """The surviving parts of every touched block, per group, in shard then row order, re-cut."""
        streams: dict[str, list[np.ndarray]] = {g: [] for g in self.order_of}
        parts: dict[str, list[tuple[str, int, int]]] = {g: [] for g in self.order_of}  # (doc, length, doc_token_start)
        self.removed = dict.fromkeys(self.order_of, 0)
        self.removed_parts = 0
        for name, rows in self.touched.items():
            t = self.tables[name]
            tok = t.column("input_ids").combine_chunks().values.to_numpy().reshape(-1, self.S)
            for r in rows:
                g = self.group(name, r)
                row = {c: t.column(c)[r].as_py() for c in ("doc_ids", "starts", "ends", "doc_token_start")}
                for d, s, e, dts in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
                    if d in self.drop:
                        self.removed[g] += e - s
                        self.removed_parts += 1
                        continue
                    streams[g].append(tok[r, s:e])
                    parts[g].append((d, e - s, dts))
        self.queues, self.moved, self.pads = {}, {}, {}
        for g in self.order_of:
            flat = np.concatenate(streams[g]).astype(np.uint32) if streams[g] else np.empty(0, np.uint32)
            self.queues[g] = _cut_blocks(flat, parts[g], self.S)
            self.moved[g] = len(flat)
            self.pads[g] = (len(self.queues[g]) * self.S - len(flat)) if self.queues[g] else 0
        self.new_blocks = {g: len(q) for g, q in self.queues.items()}
        self.touched_in = {g: 0 for g in self.order_of}
        self.last_shard: dict[str, str] = {}
        for name, rows in self.touched.items():
            for r in rows:
                g = self.group(name, r)
                self.touched_in[g] += 1
                self.last_shard[g] = name

    def write(self, dst: Path) -> list[dict[str, Any]]:
        """Hand each group's new blocks back to its touched rows, shard by shard, each shard up to its
        number of touched rows of the group (the group's last touched shard takes any remainder: never more
        rows than before), inserted where the group's first touched row of that shard was."""
        out = []
        for path in self.shards:
            name = path.name
            if name not in self.touched:
                link_or_copy(path, dst / name)
                n = _rows(path)
                out.append(shard_record(name, path, dst / name, n, n))
                continue
            t, order = self.tables[name], self._rows_of(name)
            _write_rows(dst / name, t, order, self.S)
            out.append(shard_record(name, path, dst / name, t.num_rows, len(order)))
        return out

    def _rows_of(self, name: str) -> list[Any]:
        """Shard ``name``'s new rows: its untouched row numbers and, in place of each group's first touched
        row, that group's share of the new blocks."""
        t, rows = self.tables[name], self.touched[name]
        mine: dict[str, list[Any]] = {}
        for g in self.order_of:
            k = sum(1 for r in rows if self.group(name, r) == g)
            if not k:
                continue
            mine[g], self.queues[g] = self.queues[g][:k], self.queues[g][k:]
            if self.last_shard[g] == name:
                mine[g], self.queues[g] = mine[g] + self.queues[g], []
        row_set = set(rows)
        order: list[Any] = []
        inserted: set[str] = set()
        for r in range(t.num_rows):
            if r in row_set:
                g = self.group(name, r)
                if g not in inserted:
                    order.extend(mine[g])
                    inserted.add(g)
                continue
            order.append(r)
        return order

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"touched_blocks": sum(len(v) for v in self.touched.values()),
                                "new_blocks": sum(self.new_blocks.values()),
                                "removed_tokens": int(sum(self.removed.values())), "removed_parts": self.removed_parts,
                                "moved_tokens": int(sum(self.moved.values())), "pad_tokens": int(sum(self.pads.values()))}
        if self.ranges:
            lo, new_ranges = 0, {}
            for g in self.order_of:
                n = self.ranges[g][1] - self.ranges[g][0] - self.touched_in[g] + self.new_blocks[g]
                new_ranges[g] = {"block_range": [lo, lo + n], "touched_blocks": self.touched_in[g],
                                 "new_blocks": self.new_blocks[g], "removed_tokens": int(self.removed[g]),
                                 "pad_tokens": int(self.pads[g])}
                lo += n
            info["ranges"] = new_ranges
        return info


def _cut_blocks(flat: np.ndarray, parts: list[tuple[str, int, int]], S: int) -> list[dict[str, Any]]:
    """Cut a token stream with its parts into blocks of ``S`` (last one padded), splitting parts."""
    blocks: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for d, ln, dts in parts:
        done = 0
        while done < ln:
            if cur is None or cur["fill"] == S:
                cur = {"doc_ids": [], "starts": [], "ends": [], "doc_token_start": [], "fill": 0}
                blocks.append(cur)
            take = min(ln - done, S - cur["fill"])
            cur["doc_ids"].append(d)
            cur["starts"].append(cur["fill"])
            cur["ends"].append(cur["fill"] + take)
            cur["doc_token_start"].append(dts + done)
            cur["fill"] += take
            done += take
    for k, b in enumerate(blocks):
        ids = flat[k * S:(k + 1) * S]
        b["input_ids"] = np.concatenate([ids, np.full(S - len(ids), PAD_ID, np.uint32)]) if len(ids) < S else ids
        del b["fill"]
    return blocks


def _rows(path: Path) -> int:
    return sum(b.num_rows for b in iter_batches(path, ["doc_ids"]))


def _write_rows(path: Path, t: pa.Table, order: list[Any], S: int) -> None:
    """Write ``order`` (old row numbers or new block dicts) as one stream with ``t``'s schema."""
    old = t.column("input_ids").combine_chunks().values.to_numpy().reshape(-1, S)
    cols: dict[str, list[Any]] = {"doc_ids": [], "starts": [], "ends": [], "doc_token_start": []}
    tokens = []
    for item in order:
        if isinstance(item, dict):
            tokens.append(item["input_ids"])
            for c in cols:
                cols[c].append(item[c])
        else:
            tokens.append(old[item])
            for c in cols:
                cols[c].append(t.column(c)[item].as_py())
    schema = t.schema
    flat = np.concatenate(tokens).astype(np.uint32) if tokens else np.empty(0, np.uint32)
    arrays = [pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.uint32()), S)]
    arrays += [pa.array(cols[c], schema.field(c).type) for c in ("doc_ids", "starts", "ends", "doc_token_start")]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as w:
        if batch.num_rows:
            w.write_batch(batch)
