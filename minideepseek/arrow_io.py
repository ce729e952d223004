"""Write Hugging Face ``datasets`` directories (the ``save_to_disk`` layout) deterministically.

``Dataset.save_to_disk`` stores a random fingerprint in ``state.json`` for in-memory datasets, so
two identical runs would differ by a byte. We write the same layout ourselves with pyarrow: Arrow
IPC stream shards ``data-0000i-of-0000N.arrow``, ``dataset_info.json`` and ``state.json`` whose
fingerprint is derived from the shards' content. ``datasets.load_from_disk`` opens the result and
memory-maps it. Rows are streamed in batches; a shard is closed when it exceeds ``max_shard_bytes``,
so memory stays bounded by one batch.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa

from .config import ConfigError
from .fsio import UnsafePathError, inside

ROW_BATCH = 512  # rows per record batch written by DatasetWriter.append


class DatasetWriter:
    """Stream record batches into a ``save_to_disk``-compatible directory."""

    def __init__(self, out_dir: Path, features: datasets.Features, max_shard_bytes: int = 256 << 20) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.features = features
        self.schema = features.arrow_schema
        self.max_shard_bytes = max_shard_bytes
        self._writer: pa.RecordBatchStreamWriter | None = None
        self._sink: Any = None
        self._shard_bytes = 0
        self._parts: list[Path] = []
        self._rows: list[dict[str, Any]] = []
        self.num_rows = 0

    def _open(self) -> None:
        part = self.out_dir / f".part-{len(self._parts):05d}.arrow"
        self._parts.append(part)
        self._sink = pa.OSFile(str(part), "wb")
        self._writer = pa.ipc.new_stream(self._sink, self.schema)
        self._shard_bytes = 0

    def _close_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = None

    def append(self, row: dict[str, Any]) -> None:
        """Buffer one row; every ROW_BATCH rows become one record batch. The batch boundaries are part
        of the file's bytes, so callers that need them somewhere else call ``flush``."""
        self._rows.append(row)
        if len(self._rows) >= ROW_BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one record batch."""
        if self._rows:
            self.write_rows(self._rows)
            self._rows = []

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.write_batch(pa.Table.from_pylist(rows, schema=self.schema))

    def write_batch(self, table: pa.Table | pa.RecordBatch) -> None:
        if table.num_rows == 0:
            return
        if self._writer is None:
            self._open()
        if isinstance(table, pa.Table):
            table = table.cast(self.schema)
            batches = table.to_batches()
        else:
            batches = [table]
        for b in batches:
            self._writer.write_batch(b)  # type: ignore[union-attr]
            self._shard_bytes += b.nbytes
            self.num_rows += b.num_rows
        if self._shard_bytes >= self.max_shard_bytes:
            self._close_shard()

    def close(self) -> list[str]:
        """Finish shards, name them ``data-i-of-N``, write metadata; return shard file names."""
        self.flush()
        self._close_shard()
        if not self._parts:  # an empty dataset still gets one (empty) shard so it loads
            self._open()
            self._close_shard()
        n = len(self._parts)
        names = []
        digest = hashlib.sha256()
        for i, part in enumerate(self._parts):
            name = f"data-{i:05d}-of-{n:05d}.arrow"
            os.replace(part, self.out_dir / name)
            names.append(name)
            digest.update(_file_sha256(self.out_dir / name).encode())
        info = {"citation": "", "description": "", "features": self.features.to_dict(), "homepage": "", "license": ""}
        state = {
            "_data_files": [{"filename": name} for name in names],
            "_fingerprint": digest.hexdigest()[:16],
            "_format_columns": None,
            "_format_kwargs": {},
            "_format_type": None,
            "_output_all_columns": False,
            "_split": None,
        }
        (self.out_dir / "dataset_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        (self.out_dir / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        return names


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def iter_batches(path: Path, columns: list[str] | None = None) -> Iterator[Any]:
    """The record batches of one Arrow stream shard (memory-mapped), optionally only ``columns``."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        for batch in pa.ipc.open_stream(src):
            yield batch.select(columns) if columns else batch


def shard_paths(ds_dir: Path) -> list[Path]:
    """The data files a ``save_to_disk`` directory lists in its state.json (no globbing). Each name must
    stay inside the directory (``fsio.inside``): a crafted ``../`` or absolute entry is refused, never read."""
    ds_dir = Path(ds_dir)
    try:
        state = json.loads((ds_dir / "state.json").read_text(encoding="utf-8"))
        names = [f["filename"] for f in state["_data_files"]]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"{ds_dir / 'state.json'} is not a dataset state file ({type(exc).__name__}); rebuild the "
                          f"artifact") from None
    try:
        return [inside(ds_dir, n) for n in names]
    except UnsafePathError as exc:
        raise ConfigError(f"{ds_dir / 'state.json'} lists a data file outside the dataset: {exc}; the artifact "
                          f"cannot be trusted, rebuild it") from None


def iter_dataset_rows(ds_dir: Path, columns: list[str] | None = None, batch_size: int = 1000) -> Iterator[dict[str, Any]]:
    """Stream rows of a saved dataset directory without loading it all (memory-mapped shards)."""
    for path in shard_paths(ds_dir):
        with pa.memory_map(str(path)) as src:
            reader = pa.ipc.open_stream(src)
            for batch in reader:
                if columns:
                    batch = batch.select(columns)
                for i in range(0, batch.num_rows, batch_size):
                    yield from batch.slice(i, batch_size).to_pylist()


def read_columns(ds_dir: Path, columns: list[str]) -> dict[str, list[Any]]:
    """Whole columns of a saved dataset as Python lists, read with pyarrow (memory-mapped).

    ``datasets``' ``ds["col"]`` returns a lazy Column whose ``[i]`` re-selects the table on every
    access (measured: hours for 1M rows); a list is what per-document loops need."""
    out: dict[str, list[Any]] = {c: [] for c in columns}
    for path in shard_paths(ds_dir):
        with pa.memory_map(str(path)) as src:
            for batch in pa.ipc.open_stream(src):  # batch by batch: the text column is never copied
                for c in columns:
                    out[c].extend(batch.column(c).to_pylist())
    return out
