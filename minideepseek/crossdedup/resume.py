"""Stage 2's units of work (resume inside a stage, minideepseek/units.py): the pure, costly parts of the
stage, each kept as a result file in the stage's temp dir once it is finished.

Stage 2's steps depend on each other through a lot of order-dependent state (the removals, the keep
policy, the line counts per bucket, the paragraph Bloom filter, the canaries' indexes). Saving and
restoring all of it at a kill point would be fragile, so the units are the *pure* parts instead -- a
function of the stage's config and input only -- and the cheap glue around them simply runs again:

- ``minhash.bs=B.k=K``: the MinHash signatures of the K-th batch of ``dedup.batch_size`` documents
  (``ray.minhash.docs=N.block=K``, ``ray.band=I``: the Ray engine's signature/band-key and pair-code
  files; the unit's record says the files are complete);
- ``verify.n=N.k=K`` (``ray.verify...``): the Jaccard of the K-th chunk of candidate pairs;
- ``lines.count...``, ``lines.clean...``: the line/paragraph steps' per-chunk results (pass 1, pass 2);
- ``substrings``: the suffix-array result; ``rewrite.tokens...``: token counts of the rewritten rows;
- ``decontam...``: the benchmark hits of a block of documents.

A result is pickled into ``_units/data/<name>.pkl`` (written atomically, then ``Units.finish``), so it
goes with the unit records: never into the artifact. A resumed run loads it instead of computing it, and
everything that is not a unit result is rebuilt from scratch (``clear_leftovers``): the artifact's bytes
cannot depend on where the kill happened. In a process pool (or Ray) a result is recorded as soon as
its task completes, not in submission order, so a kill loses at most the tasks running at that moment.
"""

from __future__ import annotations

import concurrent.futures as cf
import pickle
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..fsio import atomic_writer
from ..units import UNITS_DIR, Units

DATA_DIR = "data"  # inside _units/: the unit results


def clear_leftovers(tmp: Path, keep: Iterable[str] = ()) -> list[str]:
    """Remove what a killed run left in ``tmp`` besides its unit records (``_units``) and the ``keep``
    names (the Ray engine's block files): half-written shards, reports, work directories. Returns the
    names removed."""
    gone = []
    for p in sorted(tmp.iterdir()):
        if p.name == UNITS_DIR or p.name in keep:
            continue
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        gone.append(p.name)
    return gone


class Memo:
    """Unit results of one stage-2 run. ``units`` None: nothing is recorded (every result computed)."""

    def __init__(self, units: Units | None) -> None:
        self.units = units
        self.dir = units.dir / DATA_DIR if units is not None else None
        self.computed = 0  # results computed by this run (the rest were loaded)

    def _file(self, name: str) -> Path:
        assert self.dir is not None
        return self.dir / f"{name}.pkl"

    def load(self, name: str) -> tuple[bool, Any]:
        """(True, result) when unit ``name`` was finished (by this run or the killed one), else (False, None)."""
        if self.units is None or not self.units.done(name):
            return False, None
        try:
            with open(self._file(name), "rb") as fh:
                return True, pickle.load(fh)  # our own temp dir's file, written by save()
        except (OSError, EOFError, pickle.UnpicklingError):
            return False, None  # a record without its result: computed again

    def save(self, name: str, result: Any, state: dict[str, Any] | None = None) -> Any:
        """Record ``result`` as unit ``name``: its file first (atomic), then the unit record."""
        self.computed += 1
        if self.units is not None:
            with atomic_writer(self._file(name)) as fh:
                pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
            self.units.finish(name, state)
        return result

    def one(self, name: str, fn: Callable[[], Any]) -> Any:
        ok, got = self.load(name)
        return got if ok else self.save(name, fn())

    def imap(self, names: list[str], fn: Callable[[Any], Any], make_arg: Callable[[int], Any],
             pool: Any = None, window: int = 0) -> Iterator[Any]:
        """``fn(make_arg(k))`` for every k, yielded in order; finished units are loaded (their argument
        never built). ``pool`` (a ``ProcessPoolExecutor`` or ``RayPool``): at most ``window`` tasks in
        flight, each recorded as soon as it completes."""
        if pool is None:
            for k, name in enumerate(names):
                ok, got = self.load(name)
                yield got if ok else self.save(name, fn(make_arg(k)))
            return
        window = window or 2 * max(1, getattr(pool, "_max_workers", 1))
        ready: dict[int, Any] = {}
        pending: dict[Any, int] = {}
        nxt = 0
        for k, name in enumerate(names):
            ok, got = self.load(name)
            if ok:
                ready[k] = got
            else:
                pending[pool.submit(fn, make_arg(k))] = k
                while len(pending) >= window:
                    self._collect(pending, ready, names)
            while nxt in ready:
                yield ready.pop(nxt)
                nxt += 1
        while pending or nxt in ready:
            if nxt not in ready:
                self._collect(pending, ready, names)
                continue
            yield ready.pop(nxt)
            nxt += 1

    def _collect(self, pending: dict[Any, int], ready: dict[int, Any], names: list[str]) -> None:
        """Wait for one task at least; record every completed one."""
        for fut in _wait_any(list(pending)):
            k = pending.pop(fut)
            ready[k] = self.save(names[k], fut.result())


def _wait_any(futs: list[Any]) -> list[Any]:
    if hasattr(futs[0], "ref"):  # a RayPool future
        import ray

        done, _ = ray.wait([f.ref for f in futs], num_returns=1)
        return [f for f in futs if f.ref in done]
    done, _ = cf.wait(futs, return_when=cf.FIRST_COMPLETED)
    return sorted(done, key=futs.index)
