"""Quota arithmetic: exact doc quotas, token quotas within half a doc, upsampling, shortfalls."""

import pytest

from minideepseek.config import ConfigError
from minideepseek.records import RawDoc
from minideepseek.sampling.quota import Taker, apportion, run_quotas


def test_apportion_largest_remainder_sums_exactly():
    parts = apportion(1001, {"a": 0.4, "b": 0.25, "c": 0.15, "d": 0.1, "e": 0.1}, integer=True)
    assert sum(parts.values()) == 1001 and parts["a"] == 401 and parts["b"] == 250
    assert apportion(10, {"a": 1, "b": 1}, integer=False) == {"a": 5.0, "b": 5.0}


def _takers(sizes: dict[str, list[int]], unit: str, max_epochs: dict[str, float] | None = None):
    emitted: dict[str, list[dict]] = {k: [] for k in sizes}

    def iter_epoch_for(name):
        def it(epoch):
            for i, n in enumerate(sizes[name]):
                yield RawDoc(source_id=f"{name}{i}", text="x" * n)
        return it

    def fetch(raws):
        return [{"id": r.source_id, "n_tokens": len(r.text), "n_chars": len(r.text), "audit_trace": []} for r in raws]

    takers = {
        k: Taker(k, iter_epoch_for(k), unit, (max_epochs or {}).get(k, 1.0), fetch, emitted[k].append,
                 lambda r: None, batch_size=7, max_reject_fraction=0.5)
        for k in sizes
    }
    return takers, emitted


def test_doc_quotas_are_exact():
    takers, emitted = _takers({"a": [5] * 100, "b": [5] * 100}, "docs")
    out = run_quotas(takers, {"a": 0.7, "b": 0.3}, 50, "docs", "renormalize")
    assert len(emitted["a"]) == 35 and len(emitted["b"]) == 15 and not out["a"]["shortfall"]


def test_token_quotas_within_half_a_document():
    takers, emitted = _takers({"a": [37] * 500, "b": [11] * 500}, "tokens")
    run_quotas(takers, {"a": 0.5, "b": 0.5}, 2000, "tokens", "renormalize")
    assert abs(sum(r["n_tokens"] for r in emitted["a"]) - 1000) <= 37 / 2
    assert abs(sum(r["n_tokens"] for r in emitted["b"]) - 1000) <= 11 / 2


def test_upsampling_up_to_max_epochs_marks_copies():
    takers, emitted = _takers({"a": [1] * 10, "b": [1] * 100}, "docs", {"a": 2.5})
    out = run_quotas(takers, {"a": 0.5, "b": 0.5}, 60, "docs", "renormalize")
    ids = [r["id"] for r in emitted["a"]]
    assert len(ids) == 25, "10 unique docs x max_epochs 2.5"
    assert sum(i.endswith("#e2") for i in ids) == 10 and sum(i.endswith("#e3") for i in ids) == 5
    assert out["a"]["shortfall"] and len(emitted["b"]) == 35, "renormalize gives b the deficit"


def test_shortfall_shrink_and_error():
    takers, _ = _takers({"a": [1] * 10, "b": [1] * 100}, "docs")
    out = run_quotas(takers, {"a": 0.5, "b": 0.5}, 60, "docs", "shrink")
    assert out["a"]["keep"] == 10 and out["b"]["keep"] == 10, "whole mix scaled to the scarce source"
    takers, _ = _takers({"a": [1] * 10, "b": [1] * 100}, "docs")
    with pytest.raises(ConfigError, match="cannot fill their quota"):
        run_quotas(takers, {"a": 0.5, "b": 0.5}, 60, "docs", "error")


def test_read_ahead_fetch_changes_no_output():
    """A fetch with ``submit`` has the next batch started before the current one is taken (the stage's
    pool extracts one batch ahead); what is emitted, in what order, and the counts do not change."""
    sizes = {"a": [3, 9, 4] * 30, "b": [7, 2] * 20}

    def run(read_ahead: bool):
        takers, emitted = _takers(sizes, "tokens", {"b": 2.0})
        started: list[list[str]] = []
        for t in takers.values():
            plain = t._fetch
            if read_ahead:
                class Ahead:
                    def __call__(self, raws, plain=plain):
                        return self.submit(raws)()

                    def submit(self, raws, plain=plain):
                        started.append([r.source_id for r in raws])
                        return lambda: plain(raws)
                t._fetch = Ahead()
        out = run_quotas(takers, {"a": 0.5, "b": 0.5}, 400, "tokens", "renormalize")
        stats = {k: (t.stats.seen, t.stats.accepted, t.epoch, t.taken) for k, t in takers.items()}
        return emitted, out, stats, started

    plain_emitted, plain_out, plain_stats, _ = run(False)
    ahead_emitted, ahead_out, ahead_stats, started = run(True)
    assert ahead_emitted == plain_emitted and ahead_out == plain_out and ahead_stats == plain_stats
    # the read-ahead happened: more batches were started than the taken documents needed
    assert sum(map(len, started)) > sum(len(v) for v in plain_emitted.values())


def test_a_source_error_past_the_quota_is_not_raised_by_the_read_ahead():
    """The batch read ahead is not needed when the current one fills the quota: an error the source
    raises while reading it surfaces only if that batch is needed (as without read-ahead)."""
    def it(epoch):
        yield from (RawDoc(source_id=f"d{i}", text="x") for i in range(4))
        raise RuntimeError("stream failed")

    class Ahead:
        def __call__(self, raws):
            return self.submit(raws)()

        def submit(self, raws):
            return lambda: [{"id": r.source_id, "n_tokens": 1, "n_chars": 1, "audit_trace": []} for r in raws]

    out: list[dict] = []
    t = Taker("s", it, "docs", 1.0, Ahead(), out.append, lambda r: None, batch_size=4, max_reject_fraction=0.5)
    t.take_until(3)
    assert [r["id"] for r in out] == ["d0", "d1", "d2"]
    with pytest.raises(RuntimeError, match="stream failed"):
        t.take_until(10)  # now the failing batch is needed
