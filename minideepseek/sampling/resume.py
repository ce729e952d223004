"""Stage 1's units of work (issue 33, "resume inside a stage"): each source's fetched batches.

What costs time in stage 1 is the fetch: extraction, the filter chain and token counting of a batch of
``sampler.batch_size`` records (a process pool or Ray does the first two; the driver counts tokens).
Everything after it (quota arithmetic, duplicate-id renaming, the spills, rejects.jsonl, the signal
store, the report counters) is cheap and deterministic given the fetched batches in order. So the unit
is one fetched batch: ``source=<name>.size=<batch_size>.batch=<k>`` (the k-th batch that source's
Taker submitted, in its deterministic submission order; the quality pilot is
``pilot.source=<name>.size=<batch_size>``). When a batch is collected, its processed items (rows with
their token counts, rejects, signal-store rows) are pickled to ``<tmp>/_units/<unit>.pkl`` and then the
unit is finished (``Units.finish``, written after the payload). ``_units/`` is removed by the commit,
so none of this reaches the artifact.

A resumed run (the killed run's temp dir adopted by ``StageRun.begin``) first removes every file the
killed run wrote outside ``_units/`` (spills, rejects.jsonl, the signal store, spools, shards: whatever
half-written state the kill left), then runs stage 1 from the start: the same control flow, the same
reads, but every batch whose unit is finished is read back from its payload instead of being fetched.
Quotas, renamed ids, spills and reports are rebuilt from the same items in the same order, so the
artifact is byte-identical to an uninterrupted run's, wherever the kill happened; only the batches
in flight at the kill (the one being collected and the one read ahead) are fetched again.

What a resume still redoes: reading the sources (the demo corpus into its spool, a local source's
ingestion, a stream's records up to where the killed run was) and the cheap work after the fetch.
Measured on the demo config: see docs/operations.md ("Resume inside a stage").
"""

from __future__ import annotations

import logging
import pickle
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..fsio import atomic_writer
from ..units import UNITS_DIR, Units

log = logging.getLogger(__name__)

PAYLOAD = ".pkl"
T = TypeVar("T")


def clear_leftovers(tmp: Path) -> int:
    """Remove what a killed run wrote into the adopted temp dir besides its unit records: a resumed
    stage 1 rebuilds all of it from the recorded batches. Returns how many entries went."""
    n = 0
    for p in sorted(tmp.iterdir()):
        if p.name == UNITS_DIR:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
        n += 1
    return n


class BatchLog:
    """The finished batches of one stage-1 run: numbered per source in submission order, their
    processed items recorded as payloads beside the unit records and read back on resume."""

    def __init__(self, units: Units | None, batch_size: int) -> None:
        self.units = units
        # sampler.batch_size is an execution setting (not in the config hash: the sample does not depend on
        # it), but a batch's records do: the size is part of the unit's name, so other sizes never match
        self.batch_size = batch_size
        self._next: dict[str, int] = {}
        self.reused = 0  # batches read back instead of fetched (this run)
        self.fetched = 0
        self.payload_bytes = 0  # what recording cost this run (payload bytes written, seconds spent)
        self.payload_s = 0.0

    def next_name(self, source: str) -> str:
        k = self._next.get(source, 0)
        self._next[source] = k + 1
        return f"source={source}.size={self.batch_size}.batch={k:06d}"

    def _payload(self, name: str) -> Path:
        assert self.units is not None
        return self.units.dir / f"{name}{PAYLOAD}"

    def recorded(self, name: str) -> Any | None:
        """The payload of a finished unit, or None (not finished, or no payload to trust: redo it)."""
        if self.units is None:
            return None
        p = self._payload(name)
        if not p.is_file() or self.units.get(name) is None:
            return None
        try:
            with p.open("rb") as fh:
                data = pickle.load(fh)  # noqa: S301 - our own file, written by record() in this temp dir
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError) as exc:
            log.warning("stage 1: unit %s: payload unreadable (%s); fetching it again", name, exc)
            return None
        self.units.done(name)  # counted as reused (the manifest's resumed.units_reused)
        return data

    def record(self, name: str, payload: Any, state: dict[str, Any] | None = None) -> None:
        """Write the payload (atomically), then finish the unit: a unit is never finished without it."""
        if self.units is None:
            return
        t0 = time.perf_counter()
        with atomic_writer(self._payload(name)) as fh:
            pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
            self.payload_bytes += fh.tell()
        self.payload_s += time.perf_counter() - t0
        self.units.finish(name, state)

    def batch(self, source: str, submit: Callable[[], Callable[[], list[Any]]]) -> Callable[[], list[Any]]:
        """The collect call of a source's next batch: its recorded items when the unit is finished, else
        ``submit()``'s, recorded when collected (before anything consumes them: the Taker and the signal
        store mutate rows)."""
        name = self.next_name(source)
        items = self.recorded(name)
        if items is not None:
            self.reused += 1
            return lambda: items
        collect = submit()

        def collect_and_record() -> list[Any]:
            got = collect()
            self.record(name, got, {"items": len(got)})
            self.fetched += 1
            return got

        return collect_and_record

    def once(self, name: str, compute: Callable[[], T]) -> T:
        """A unit that is one computation (the quality pilot): its recorded result, or computed and recorded."""
        got = self.recorded(name)
        if got is not None:
            return got[0]
        value = compute()
        self.record(name, (value,))
        return value

    def summary(self) -> str:
        return (f"{self.reused:,} batch(es) read back from the killed run, {self.fetched:,} fetched (their payloads: "
                f"{self.payload_bytes / 1e6:,.1f} MB written in {self.payload_s:.2f} s)")

