"""The signal store: every evaluated document's filter signals and verdicts, beside stage 1's artifact.

With ``sampler.signals: first_drop`` or ``full`` stage 1 writes ``mixed_raw/signals/<source>.parquet``
(one row per document the source's filter chain evaluated, kept *and* dropped, in epoch-1 sampling
order) and ``mixed_raw/signals/meta.json`` (each source's resolved chain, how far it was read, the
sampler settings). Columns:

    position     0-based place in the source's epoch-1 sampling order (among evaluated documents)
    id, source_id, url, file, line, offset      the document (its id before stage 1 makes an id a source
                 reused unique with ``~k``) and the raw record's location
    chain_keep   the chain's decision; filter, reason: the deciding rule when dropped
    verdict_<i>  filter i's own verdict: its drop reason, "" kept, null when it did not run
    signals      every measured value as JSON (keys differ per document, e.g. ``langid_skipped``);
                 exact values where a filter rounds its displayed signals
    post_check   the length check on the chain's final text ("" passes)
    n_chars, n_tokens   of the chain's final text (n_tokens of dropped documents: ``full`` only)

``full`` runs every rule on every document (no early exit), counts the tokens of dropped documents and
reads a finite source (demo, local) to the end of its first pass after its quota is met,
which is what :mod:`.whatif` needs to predict the kept set and the recipe fill of new thresholds;
``first_drop`` stores only what the early-exit chain measured (a cheap audit trail). The kept
documents are the same in all three modes. Documents read but never evaluated (invalid records,
withdrawn ones) are not rows: no parameter of a filter can bring them back. A withdrawal
(withdraw.py) removes the withdrawn documents' rows (:func:`filter_store`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..fsio import write_json_atomic

STORE_DIR = "signals"
META = "meta.json"
_FLUSH_ROWS = 20_000  # rows buffered per source before a Parquet row group is written


def _schema(n_filters: int) -> pa.Schema:
    return pa.schema([
        ("position", pa.int64()), ("id", pa.string()), ("source_id", pa.string()), ("url", pa.string()),
        ("file", pa.string()), ("line", pa.int64()), ("offset", pa.int64()), ("chain_keep", pa.bool_()),
        ("filter", pa.string()), ("reason", pa.string()),
        *[(f"verdict_{i}", pa.string()) for i in range(n_filters)],
        ("signals", pa.string()), ("post_check", pa.string()), ("n_chars", pa.int64()), ("n_tokens", pa.int64()),
    ])


class SignalStore:
    """Collects rows per source in sampling order (the first pass only) and writes them as Parquet."""

    def __init__(self, root: Path, chains: dict[str, tuple[dict[str, Any], ...]]) -> None:
        self.root = root
        self.chains = dict(chains)
        self._seen: dict[str, set[tuple[Any, ...]]] = {n: set() for n in chains}
        self._rows: dict[str, list[dict[str, Any]]] = {n: [] for n in chains}
        self._count: dict[str, int] = {n: 0 for n in chains}
        self._writers: dict[str, pq.ParquetWriter] = {}

    def set_chain(self, source: str, chain: tuple[dict[str, Any], ...]) -> None:
        """The chain as resolved (a top_fraction's pilot threshold filled in)."""
        self.chains[source] = chain

    def add(self, source: str, row: dict[str, Any]) -> None:
        key = (row["file"], row["line"], row["offset"], row["source_id"])
        if key in self._seen[source]:  # an upsampling pass reads the same records again
            return
        self._seen[source].add(key)
        verdicts = row.pop("verdicts")
        row.pop("_text", None)
        row.update({f"verdict_{i}": v for i, v in enumerate(verdicts)})
        row["position"] = self._count[source]
        self._count[source] += 1
        self._rows[source].append(row)
        if len(self._rows[source]) >= _FLUSH_ROWS:
            self._flush(source)

    def _flush(self, source: str) -> None:
        rows = self._rows[source]
        if not rows and source in self._writers:
            return
        schema = _schema(len(self.chains[source]))
        if source not in self._writers:
            self.root.mkdir(parents=True, exist_ok=True)
            # no statistics/dictionary surprises across pyarrow versions: plain zstd pages
            self._writers[source] = pq.ParquetWriter(str(self.root / f"{source}.parquet"), schema, compression="zstd")
        if rows:
            self._writers[source].write_table(pa.Table.from_pylist(rows, schema=schema))
        self._rows[source] = []

    def close(self, meta: dict[str, Any]) -> dict[str, int]:
        """Write the remaining rows and meta.json; returns rows per source."""
        for source in self.chains:
            self._flush(source)
            self._writers[source].close()
        write_json_atomic(self.root / META, {**meta, "chains": {n: list(c) for n, c in self.chains.items()},
                                             "rows": self._count})
        return dict(self._count)


def filter_store(src: Path, dst: Path, ids: set[str]) -> int:
    """A withdrawal's edit of the store (withdraw/hooks.py): ``dst`` (the artifact's new directory, where
    the store's files were hard-linked) gets every source's table without the rows of ``ids`` (documents'
    base ids; a source id stage 1 made unique with ``~k`` matches too) and meta.json's row counts updated.
    Returns the rows removed. The rebuilt stage 1 stores no row for a withdrawn document either, so
    what-ifs on the edited store still equal a rerun."""
    root = src / STORE_DIR
    if not (root / META).is_file():
        return 0
    meta = json.loads((root / META).read_text(encoding="utf-8"))
    drop = pa.array(sorted(ids), pa.string())
    removed = 0
    for name in meta["chains"]:
        table = pq.read_table(str(root / f"{name}.parquet"))
        ids_col = pa.compute.replace_substring_regex(table.column("id"), r"~\d+$", "")
        mask = pa.compute.is_in(ids_col, value_set=drop)
        n = pa.compute.sum(mask).as_py() or 0
        if not n:
            continue
        removed += n
        meta["rows"][name] -= n
        out = dst / STORE_DIR / f"{name}.parquet"
        out.unlink(missing_ok=True)  # a hard link to the old artifact's file: never write through it
        pq.write_table(table.filter(pa.compute.invert(mask)), str(out), compression="zstd")
    if removed:
        (dst / STORE_DIR / META).unlink(missing_ok=True)
        write_json_atomic(dst / STORE_DIR / META, meta)
    return removed


def read_store(artifact: Path) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """(meta, table per source) of a stage-1 artifact's signal store."""
    root = artifact / STORE_DIR
    if not (root / META).is_file():
        from ..config import ConfigError

        raise ConfigError(f"{artifact} has no signal store ({STORE_DIR}/{META}); rerun stage 1 with "
                          "--set sampler.signals=full (once; later what-ifs read the store)")
    meta = json.loads((root / META).read_text(encoding="utf-8"))
    return meta, {n: pq.read_table(str(root / f"{n}.parquet")) for n in meta["chains"]}
