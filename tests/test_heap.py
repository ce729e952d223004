"""The CPU heap guard (train/heap.py): freed blocks kept for speed, but a heap that drifts above the first
step's resident memory is handed back to the OS. Run in a child process: mallopt changes the whole process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json
    from minideepseek.train.heap import HeapGuard, keep_heap, rss_mb
    assert keep_heap()
    guard = HeapGuard(enabled=True, ratio=1.5, slack_mb=128)
    guard.after_step()                                    # baseline: the process as it starts
    base = rss_mb()
    blocks = [bytearray(b"x" * (1 << 20)) for _ in range(400)]   # 400 MB touched, from the heap (no mmap)
    keep = bytearray(b"y" * 4096)                         # a live block above them: nothing trims by itself
    del blocks
    held = rss_mb()
    guard.after_step()
    print(json.dumps({"base": base, "held": held, "after": rss_mb(), **guard.to_json()}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt/malloc_trim and /proc are Linux-only")
@pytest.mark.stage
def test_guard_returns_a_drifted_heap_and_stays_quiet_otherwise() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["held"] - r["base"] > 300, r  # keep_heap: the freed blocks stayed resident
    assert r["trims"] == 1 and r["released_mb"] > 300, r
    assert r["after"] < r["base"] + 100, r
    # a second call with nothing freed does nothing
    quiet = CHILD.replace("range(400)", "range(0)")
    out = subprocess.run([sys.executable, "-c", quiet], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1])["trims"] == 0


def test_disabled_guard_is_inert() -> None:
    from minideepseek.train.heap import HeapGuard

    g = HeapGuard(enabled=False)
    g.after_step()
    g.after_step()
    assert g.to_json() == {"baseline_rss_mb": None, "limit_rss_mb": None, "trims": 0, "released_mb": 0.0}
