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


def repack_shards(src: Path, dst: Path, drop: set[str], seq_len: int, skip: set[str] = frozenset()
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Packed dataset without any token of the ``drop`` documents (see the module docstring)."""
    shards = shard_paths(src)
    names = [p.name for p in shards]
    copy_artifact(src, dst, skip | set(names) | {"state.json"})
    shutil.copyfile(src / "state.json", dst / "state.json")
    tables: dict[str, pa.Table] = {}
    touched: dict[str, list[int]] = {}
    for path in shards:
        with pa.memory_map(str(path)) as mm:
            t = pa.ipc.open_stream(mm).read_all()
        rows = [r for r, docs in enumerate(t.column("doc_ids").to_pylist()) if any(d in drop for d in docs)]
        if rows:
            tables[path.name] = t
            touched[path.name] = rows
    # 1. the surviving parts of every touched block, in shard then row order
    stream: list[np.ndarray] = []
    parts: list[tuple[str, int, int]] = []  # (doc id, length, doc_token_start)
    removed_tokens = removed_parts = 0
    for name, rows in touched.items():
        t = tables[name]
        ids = t.column("input_ids").combine_chunks()
        tok = ids.values.to_numpy().reshape(-1, seq_len)
        for r in rows:
            row = {c: t.column(c)[r].as_py() for c in ("doc_ids", "starts", "ends", "doc_token_start")}
            for d, s, e, dts in zip(row["doc_ids"], row["starts"], row["ends"], row["doc_token_start"]):
                if d in drop:
                    removed_tokens += e - s
                    removed_parts += 1
                    continue
                stream.append(tok[r, s:e])
                parts.append((d, e - s, dts))
    flat = np.concatenate(stream).astype(np.uint32) if stream else np.empty(0, np.uint32)
    new_rows = _cut_blocks(flat, parts, seq_len)
    pad = (len(new_rows) * seq_len - len(flat)) if new_rows else 0
    # 2. hand the new blocks back to the touched shards, each up to its number of touched rows
    out = []
    queue = list(new_rows)
    for path in shards:
        name = path.name
        if name not in touched:
            link_or_copy(path, dst / name)
            n = _rows(path)
            out.append(_shard_record(name, path, dst / name, n, n))
            continue
        t, rows = tables[name], set(touched[name])
        mine, queue = queue[: len(rows)], queue[len(rows):]
        if name == list(touched)[-1]:  # the last touched shard takes any remainder (never more rows than before)
            mine, queue = mine + queue, []
        order: list[Any] = []
        inserted = False
        for r in range(t.num_rows):
            if r in rows:
                if not inserted:
                    order.extend(mine)
                    inserted = True
                continue
            order.append(r)
        _write_rows(dst / name, t, order, seq_len)
        out.append(_shard_record(name, path, dst / name, t.num_rows, len(order)))
    write_state(dst, names)
    info = {"touched_blocks": sum(len(v) for v in touched.values()), "new_blocks": len(new_rows),
            "removed_tokens": int(removed_tokens), "removed_parts": removed_parts,
            "moved_tokens": int(len(flat)), "pad_tokens": int(pad)}
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
