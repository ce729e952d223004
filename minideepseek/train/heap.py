"""The CPU training process's heap: fast steps without unbounded resident memory.

Each step allocates and frees the logits chunk (``loss_chunk`` x vocab floats: 614 MB at 1024 x 150K)
and weight-sized gradient buffers. Above glibc's mmap threshold every such allocation is a fresh mmap
whose pages fault in again (measured on the demo model: 0.47 s of system time and ~7K page faults per
1.1 s step), so ``keep_heap`` raises the thresholds and the freed blocks stay in the heap for the next
step (0 faults, 12% faster).

The cost of keeping freed blocks is that they are kept *per glibc arena*. glibc gives a thread its own
arena when it finds the main one locked, which depends on thread timing, so whether torch's worker
threads allocate in a second arena differs from run to run. Each arena then grows to the step's
high-water mark (~1.8 GB for the demo model) and keeps it: one demo smoke train peaked at 7.7 GB RSS
(in-use memory 0.3-1.7 GB per step; the same run measured 2.2 GB on every other try). Two bounds:

- one arena (``M_ARENA_MAX=1``): every thread reuses the same freed blocks, so the heap holds one
  high-water mark, not one per thread;
- ``HeapGuard``: after each step, if the process's resident memory exceeds the first step's by more than
  ``max(50%, 512 MB)``, ``malloc_trim(0)`` hands every free block back to the OS (counted and reported).
  In the common case it never fires; when it does, the cost is one step's page faults.

All of this is glibc-specific and a no-op elsewhere (logged at DEBUG).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt  # noqa: B018 - glibc only: AttributeError elsewhere
        return libc
    except (OSError, AttributeError):
        return None


def keep_heap() -> bool:
    """Keep freed blocks for the next step (no per-step page faults) in a single arena. Call before the
    first parallel torch op, so worker threads never get an arena of their own. True if applied."""
    libc = _libc()
    if libc is None:
        log.debug("mallopt unavailable; keeping the default allocator behaviour")
        return False
    libc.mallopt(_M_ARENA_MAX, 1)
    libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30)
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 31)
    return True


def rss_mb() -> float:
    """This process's resident memory now (not the peak), from /proc; 0.0 where /proc is missing."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


class HeapGuard:
    """Hand free heap memory back to the OS when resident memory drifts above the first step's."""

    def __init__(self, enabled: bool, ratio: float = 1.5, slack_mb: float = 512.0) -> None:
        self.libc = _libc() if enabled else None
        self.ratio, self.slack_mb = ratio, slack_mb
        self.baseline_mb: float | None = None
        self.trims = 0
        self.released_mb = 0.0

    @property
    def limit_mb(self) -> float | None:
        if self.baseline_mb is None:
            return None
        return max(self.baseline_mb * self.ratio, self.baseline_mb + self.slack_mb)

    def after_step(self) -> None:
        if self.libc is None:
            return
        now = rss_mb()
        if self.baseline_mb is None:
            self.baseline_mb = now
            return
        limit = self.limit_mb
        if limit is not None and now > limit:
            self.libc.malloc_trim(0)
            after = rss_mb()
            self.trims += 1
            self.released_mb += max(0.0, now - after)
            (log.info if self.trims == 1 else log.debug)(
                "heap: resident memory %.0f MB > %.0f MB (first step %.0f MB); returned free heap blocks to the OS "
                "-> %.0f MB", now, limit, self.baseline_mb, after)

    def to_json(self) -> dict[str, float | int | None]:
        return {"baseline_rss_mb": None if self.baseline_mb is None else round(self.baseline_mb, 1),
                "limit_rss_mb": None if self.limit_mb is None else round(self.limit_mb, 1),
                "trims": self.trims, "released_mb": round(self.released_mb, 1)}
