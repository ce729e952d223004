"""Phase timing for stages: where the wall time went, logged as it happens and kept for the report.

A stage calls ``laps.lap("name")`` at the end of each phase (one line per phase, no re-indented
blocks), so a long phase is visible in the log the moment it ends, and the report can list every
phase with the stage's whole wall time rather than the time up to where the report was built.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Laps:
    """Consecutive phase durations since construction (or the previous lap)."""

    def __init__(self, stage: str, logger: logging.Logger | None = None) -> None:
        self.stage = stage
        self.log = logger or logging.getLogger("minideepseek.progress")
        self.t0 = self._last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def start(self, name: str) -> None:
        """Say a phase begins (for phases that have no progress bar of their own)."""
        self.log.info("%s: %s ...", self.stage, name)

    def lap(self, name: str) -> float:
        """Close phase ``name`` (time since the previous lap); repeated names add up."""
        now = time.perf_counter()
        dt = now - self._last
        self._last = now
        self.phases[name] = round(self.phases.get(name, 0.0) + dt, 2)
        self.log.info("%s: %s done in %.1f s (%.1f s so far)", self.stage, name, dt, now - self.t0)
        return dt

    def total(self) -> float:
        return time.perf_counter() - self.t0

    def as_dict(self) -> dict[str, float]:
        return dict(self.phases)


class RateLog:
    """One log line per tenth (``parts``) of a known total: the rate overall and over the last part, and
    the machine's load average. A run of hours then says whether it slowed down as it went (the load
    stayed where it was: our work got dearer) or the machine was busy with something else (the load rose).
    Marks reached in the first ``min_s`` seconds are not logged: a small run's log stays as it was. No
    total (``sampler.target_docs: all``): no marks."""

    def __init__(self, what: str, total: float | None, unit: str, parts: int = 10,
                 logger: logging.Logger | None = None, min_s: float = 10.0) -> None:
        self.what, self.total, self.unit, self.parts, self.min_s = what, total, unit, parts, min_s
        self.log = logger or logging.getLogger("minideepseek.progress")
        self.done = self.done_last = 0.0
        self.k = 1  # the next mark, in parts
        self.t0 = self.t_last = time.perf_counter()

    def update(self, n: float) -> None:
        self.done += n
        while self.total and self.k <= self.parts and self.done >= self.k * self.total / self.parts:
            now = time.perf_counter()
            self.k += 1
            if now - self.t0 < self.min_s:
                self.t_last, self.done_last = now, self.done
                continue
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            self.log.info("%s: %d%% of %s %s in %.0f s: %.0f %s/s overall, %.0f over the last %d%%; load average %.2f",
                          self.what, 100 * (self.k - 1) // self.parts, f"{self.total:,.0f}", self.unit, now - self.t0,
                          self.done / max(now - self.t0, 1e-9), self.unit,
                          (self.done - self.done_last) / max(now - self.t_last, 1e-9), 100 // self.parts, load)
            self.t_last, self.done_last = now, self.done


def phases_line(phases: dict[str, float]) -> str:
    """``signatures 10.2 s, verify 0.3 s, ...`` for a report."""
    return ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())


class Heartbeat:
    """A periodic log line for a call that reports no progress itself (the ``tokenizers`` BPE trainer:
    its own bars write to the terminal uncontrolled, so they are off). Wrap the call's input iterator
    with :meth:`count` to show how much of it was read; once it is exhausted the line says the call is
    in its second phase (for BPE: computing merges)."""

    def __init__(self, stage: str, what: str, total: int | None = None, unit: str = "docs",
                 after: str = "processing", interval_s: float = 10.0, logger: logging.Logger | None = None) -> None:
        self.stage, self.what, self.total, self.unit, self.after = stage, what, total, unit, after
        self.interval_s = interval_s
        self.log = logger or logging.getLogger("minideepseek.progress")
        self.seen, self.exhausted = 0, False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def count(self, it: Iterable[T], size: Callable[[T], int] = lambda x: 1) -> Iterator[T]:
        """Pass ``it`` through, counting ``size(item)`` units per item (``len`` for batches)."""
        for x in it:
            self.seen += size(x)
            yield x
        self.exhausted = True

    def line(self, elapsed: float) -> str:
        of = f"/{self.total:,}" if self.total is not None else ""
        state = f"{self.after}, input read ({self.seen:,}{of} {self.unit})" if self.exhausted else \
            f"reading input: {self.seen:,}{of} {self.unit}"
        return f"{self.stage}: {self.what}: {elapsed:.0f} s, {state}"

    def _beat(self) -> None:
        t0 = time.perf_counter()
        while not self._stop.wait(self.interval_s):
            self.log.info("%s", self.line(time.perf_counter() - t0))

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.stage}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
