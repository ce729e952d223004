"""Phase timing and the heartbeat that long silent calls (BPE training) log with."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from minideepseek.progress import Heartbeat, Laps, RateLog, phases_line


def test_laps_record_each_phase_and_log_it(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.laps")
    with caplog.at_level("INFO", logger="test.laps"):
        laps = Laps("stage_x", log)
        time.sleep(0.02)
        laps.lap("read")
        laps.lap("write")
        time.sleep(0.01)
        laps.lap("read")  # a repeated name adds up
    ph = laps.as_dict()
    assert list(ph) == ["read", "write"] and ph["read"] >= 0.03
    assert sum(ph.values()) <= laps.total() + 0.01
    assert [r.getMessage().split(" done")[0] for r in caplog.records] == ["stage_x: read", "stage_x: write",
                                                                          "stage_x: read"]
    assert phases_line({"a": 1.234, "b": 20.0}) == "a 1.2 s, b 20.0 s"


def test_heartbeat_reports_input_then_second_phase(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.hb")
    release = threading.Event()
    with caplog.at_level("INFO", logger="test.hb"):
        with Heartbeat("stage_y", "training", total=6, after="computing merges", interval_s=0.02, logger=log) as hb:
            assert list(hb.count(iter([[1, 2], [3, 4], [5, 6]]), len)) == [[1, 2], [3, 4], [5, 6]]
            release.wait(0.2)  # the "second phase": the input is read, the call is still busy
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all(x.startswith("stage_y: training: ") for x in lines)
    assert any("computing merges, input read (6/6 docs)" in x for x in lines)
    n = len(lines)
    time.sleep(0.1)
    assert len(caplog.records) == n  # stopped on exit
    assert hb.line(3.0) == "stage_y: training: 3 s, computing merges, input read (6/6 docs)"
    hb2 = Heartbeat("s", "w", total=None, unit="rows")
    assert hb2.line(12.4) == "s: w: 12 s, reading input: 0 rows"


def test_rate_log_says_each_tenth_once_with_its_rate(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.rate")
    with caplog.at_level("INFO", logger="test.rate"):
        quiet = RateLog("sampling", 1000, "tokens", logger=log)  # a run shorter than min_s (10 s) logs nothing
        quiet.update(1000)
        unbounded = RateLog("sampling", None, "docs", logger=log, min_s=0)  # target_docs: all
        unbounded.update(10)
        assert not caplog.records
        rate = RateLog("sampling", 1000, "tokens", logger=log, min_s=0)
        for n in [50, 50, 450, 10]:  # 10%, then a jump over 20-50%, then short of 60%
            rate.update(n)
        msgs = [r.getMessage() for r in caplog.records]
        assert [m.split(" of ")[0] for m in msgs] == [f"sampling: {p}%" for p in (10, 20, 30, 40, 50)]
        rate.update(10_000)  # past the total: the marks stop at 100%
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 10 and msgs[-1].startswith("sampling: 100% of 1,000 tokens in ")
    assert all("tokens/s overall" in m and "load average" in m for m in msgs)
