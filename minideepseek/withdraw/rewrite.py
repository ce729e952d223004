"""Rewrite artifacts without the withdrawn documents, touching only the shards that hold them.

Every function writes a complete new artifact directory (``dst``); untouched files are hard-linked
(or copied) from the old one, so they stay byte-identical and the checksums prove it. The caller
swaps the directory into place atomically.

Packed shards: a block that holds any token of a withdrawn document is *touched*. The remaining
parts of all touched blocks (other documents' tokens, spans and ``doc_token_start`` kept) are
concatenated in their old order and re-cut into ``seq_len`` blocks; only the very last re-cut block
can be partial, and it is padded with ``<|pad|>`` (id 1, never a training target) rather than
dropped, so no other document loses a token. The new blocks go back into the touched shards, in
shard order, at the positions of the first touched rows; every untouched shard keeps its bytes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow_io import _file_sha256
from ..stage import MANIFEST
from ..tokenizer.config import PAD_ID
from .locate import iter_batches, shard_paths


def link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def copy_artifact(src: Path, dst: Path, skip: set[str]) -> None:
    """Link every file of ``src`` into ``dst`` except ``skip`` (relative paths) and the manifest."""
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src).as_posix()
        if p.is_file() and rel not in skip and rel != MANIFEST:
            link_or_copy(p, dst / rel)


def write_state(ds_dir: Path, names: list[str]) -> None:
    """state.json the way arrow_io.DatasetWriter writes it (fingerprint derived from the shards)."""
    import hashlib

    digest = hashlib.sha256()
    for name in names:
        digest.update(_file_sha256(ds_dir / name).encode())
    state = json.loads((ds_dir / "state.json").read_text()) if (ds_dir / "state.json").is_file() else {}
    state.update({"_data_files": [{"filename": n} for n in names], "_fingerprint": digest.hexdigest()[:16]})
    tmp = ds_dir / ".state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, ds_dir / "state.json")


def _shard_record(name: str, before: Path, after: Path, rows_before: int, rows_after: int) -> dict[str, Any]:
    sb, sa = _file_sha256(before), _file_sha256(after)
    return {"file": name, "rows_before": rows_before, "rows_after": rows_after, "sha256_before": sb,
            "sha256_after": sa, "changed": sb != sa}


def filter_dataset(src: Path, dst: Path, drop: set[str], skip: set[str] = frozenset()) -> list[dict[str, Any]]:
    """Copy a documents dataset without the rows whose ``id`` is in ``drop``; shards holding none of
    them are linked unchanged. ``skip`` names other files the caller rewrites itself."""
    shards = shard_paths(src)
    names = [p.name for p in shards]
    copy_artifact(src, dst, skip | set(names) | {"state.json"})
    shutil.copyfile(src / "state.json", dst / "state.json")
    out = []
    drop_arr = pa.array(sorted(drop), pa.string())
    for path in shards:
        with pa.memory_map(str(path)) as mm:
            reader = pa.ipc.open_stream(mm)
            schema = reader.schema
            batches = list(reader)
            masks = [pa.compute.is_in(b.column("id"), value_set=drop_arr) for b in batches]
            n_drop = sum(pa.compute.sum(m).as_py() or 0 for m in masks)
            rows = sum(b.num_rows for b in batches)
            if n_drop == 0:
                link_or_copy(path, dst / path.name)
            else:
                with pa.OSFile(str(dst / path.name), "wb") as sink, pa.ipc.new_stream(sink, schema) as w:
                    for b, m in zip(batches, masks):
                        kept = b.filter(pa.compute.invert(m))
                        if kept.num_rows:
                            w.write_batch(kept)
        out.append(_shard_record(path.name, path, dst / path.name, rows, rows - n_drop))
    write_state(dst, names)
    return out


def filter_jsonl(src: Path, dst: Path, drop: set[str], keys: tuple[str, ...]) -> int:
    """Copy a JSONL file without the lines whose ``keys`` name a dropped id; return lines removed."""
    removed = 0
    with src.open(encoding="utf-8") as fin, dst.open("w", encoding="utf-8") as fout:
        for line in fin:
            rec = json.loads(line)
            if any(rec.get(k) in drop for k in keys):
                removed += 1
                continue
            fout.write(line)
    return removed


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
    tables: dict[str, pa.Table] = {}
    touched: dict[str, list[int]] = {}
    first_row: dict[str, int] = {}  # shard -> global index of its first row
    offset = 0
    for path in shards:
        with pa.memory_map(str(path)) as mm:
            t = pa.ipc.open_stream(mm).read_all()
        first_row[path.name] = offset
        offset += t.num_rows
        rows = [r for r, docs in enumerate(t.column("doc_ids").to_pylist()) if any(d in drop for d in docs)]
        if rows:
            tables[path.name] = t
            touched[path.name] = rows
    order_of = sorted(ranges, key=lambda n: ranges[n][0]) if ranges else [""]

    def group(name: str, r: int) -> str:  # the source whose range holds the row ("" = one mixed stream)
        if not ranges:
            return ""
        g = first_row[name] + r
        return next(n for n in order_of if ranges[n][0] <= g < ranges[n][1])

    # 1. the surviving parts of every touched block, per group, in shard then row order
    streams: dict[str, list[np.ndarray]] = {g: [] for g in order_of}
    parts: dict[str, list[tuple[str, int, int]]] = {g: [] for g in order_of}  # (doc id, length, doc_token_start)
    removed = dict.fromkeys(order_of, 0)
    removed_parts = 0
    for name, rows in touched.items():
        t = tables[name]
        ids = t.column("input_ids").combine_chunks()
        tok = ids.values.to_numpy().reshape(-1, seq_len)
        for r in rows:
            g = group(name, r)
            row = {c: t.column(c)[r].as_py() for c in ("doc_ids", "starts", "ends", "doc_token_start")}
            for d, s, e, dts in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
                if d in drop:
                    removed[g] += e - s
                    removed_parts += 1
                    continue
                streams[g].append(tok[r, s:e])
                parts[g].append((d, e - s, dts))
    queues, moved, pads = {}, {}, {}
    for g in order_of:
        flat = np.concatenate(streams[g]).astype(np.uint32) if streams[g] else np.empty(0, np.uint32)
        queues[g] = _cut_blocks(flat, parts[g], seq_len)
        moved[g] = len(flat)
        pads[g] = (len(queues[g]) * seq_len - len(flat)) if queues[g] else 0
    new_blocks = {g: len(q) for g, q in queues.items()}
    touched_in = {g: 0 for g in order_of}
    last_shard: dict[str, str] = {}
    for name, rows in touched.items():
        for r in rows:
            g = group(name, r)
            touched_in[g] += 1
            last_shard[g] = name
    # 2. hand each group's new blocks back to its touched rows, shard by shard, each shard up to its number
    # of touched rows of the group (the group's last touched shard takes any remainder: never more rows
    # than before), inserted where the group's first touched row of that shard was
    out = []
    for path in shards:
        name = path.name
        if name not in touched:
            link_or_copy(path, dst / name)
            n = _rows(path)
            out.append(_shard_record(name, path, dst / name, n, n))
            continue
        t, rows = tables[name], touched[name]
        mine: dict[str, list[Any]] = {}
        for g in order_of:
            k = sum(1 for r in rows if group(name, r) == g)
            if not k:
                continue
            mine[g], queues[g] = queues[g][:k], queues[g][k:]
            if last_shard[g] == name:
                mine[g], queues[g] = mine[g] + queues[g], []
        row_set = set(rows)
        order: list[Any] = []
        inserted: set[str] = set()
        for r in range(t.num_rows):
            if r in row_set:
                g = group(name, r)
                if g not in inserted:
                    order.extend(mine[g])
                    inserted.add(g)
                continue
            order.append(r)
        _write_rows(dst / name, t, order, seq_len)
        out.append(_shard_record(name, path, dst / name, t.num_rows, len(order)))
    write_state(dst, names)
    info: dict[str, Any] = {"touched_blocks": sum(len(v) for v in touched.values()),
                            "new_blocks": sum(new_blocks.values()), "removed_tokens": int(sum(removed.values())),
                            "removed_parts": removed_parts, "moved_tokens": int(sum(moved.values())),
                            "pad_tokens": int(sum(pads.values()))}
    if ranges:
        lo, new_ranges = 0, {}
        for g in order_of:
            n = ranges[g][1] - ranges[g][0] - touched_in[g] + new_blocks[g]
            new_ranges[g] = {"block_range": [lo, lo + n], "touched_blocks": touched_in[g],
                             "new_blocks": new_blocks[g], "removed_tokens": int(removed[g]), "pad_tokens": int(pads[g])}
            lo += n
        info["ranges"] = new_ranges
    return out, info


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
