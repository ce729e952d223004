"""Recipe quotas: apportioning a target across sources, taking documents until a quota is met,
upsampling up to ``max_epochs``, and what happens when a source runs out (``shortfall``).

Quotas are in the target's unit (documents or DeepSeek tokens). A document is taken while doing so
brings the source closer to its quota (``quota - taken >= units / 2``), so a token quota is met to
within half a document and a document quota exactly.
"""

from __future__ import annotations

import logging
import math
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..config import ConfigError
from ..records import RawDoc, Reject, copy_id

log = logging.getLogger(__name__)

MAX_SKIPS = 64  # documents set aside in a row before a quota counts as met (bounded look-ahead)


def apportion(total: float, weights: dict[str, float], integer: bool) -> dict[str, float]:
    """Split ``total`` by ``weights``; with ``integer`` use largest remainders so parts sum to total."""
    wsum = sum(weights.values())
    if wsum <= 0:
        return {k: 0.0 for k in weights}
    exact = {k: total * w / wsum for k, w in weights.items()}
    if not integer:
        return exact
    floors = {k: math.floor(v) for k, v in exact.items()}
    left = int(round(total)) - sum(floors.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - floors[k]), k))[: max(0, left)]:
        floors[k] += 1
    return {k: float(v) for k, v in floors.items()}


@dataclass
class TakerStats:
    seen: int = 0
    accepted: int = 0
    rejects: Counter = field(default_factory=Counter)  # invalid records by reason (the error budget)
    evaluated: int = 0  # valid records that reached the filter chain (first pass)
    filtered: Counter = field(default_factory=Counter)  # (filter, reason) -> dropped docs
    withdrawn: int = 0  # excluded by a deletion request (withdraw.py), not charged to the error budget
    epochs_started: int = 1
    unique_units: float | None = None  # units available in one full pass (known once exhausted)


class Taker:
    """Pulls processed documents of one source in sampling order and accepts them against a quota.

    ``fetch(raws)`` turns a batch of RawDoc into rows/Rejects with ``n_tokens`` filled; it is where
    extraction and token counting happen (possibly in a pool). A fetch with a ``submit(raws)`` method
    (returning the call that collects the batch) gets the next batch while the current one is taken:
    the pool extracts one batch ahead instead of waiting while this process counts and writes.
    Results are consumed in reading order either way, so read-ahead changes no output. Accepted rows
    go to ``emit``; rejects to ``on_reject`` (first epoch only: later epochs see the same records again).
    """

    def __init__(self, name: str, iter_epoch: Callable[[int], Iterator[RawDoc]], unit: str, max_epochs: float,
                 fetch: Callable[[list[RawDoc]], list[dict | Reject]], emit: Callable[[dict], None],
                 on_reject: Callable[[Reject], None], batch_size: int, max_reject_fraction: float) -> None:
        self.name = name
        self._iter_epoch = iter_epoch
        self.unit = unit
        self.max_epochs = max_epochs
        self._fetch = fetch
        self._emit = emit
        self._on_reject = on_reject
        self.batch_size = batch_size
        self.max_reject_fraction = max_reject_fraction
        self.stats = TakerStats()
        self.epoch = 1
        self._it = iter_epoch(1)
        self._ahead: Callable[[], list[dict | Reject]] | None = None  # the batch read ahead, being extracted
        self._pending: deque[dict] = deque()
        self._skipped: list[dict] = []  # too large for the rest of the quota; retried if it grows
        self.exhausted = False
        self.taken = 0.0  # units accepted
        # units per accepted doc, in order (for shrink truncation): 8 bytes a document, not a list of ints
        self.units = array("q")
        self.tokens = 0
        self.chars = 0
        self.epoch_docs: Counter = Counter()
        self.first_pass_read = 0  # raw records read in the first pass (the drain's headroom is a multiple)

    def _units(self, row: dict) -> int:
        return 1 if self.unit == "docs" else int(row["n_tokens"])

    def _cap(self) -> float:
        if self.stats.unique_units is None:
            return math.inf
        return self.max_epochs * self.stats.unique_units

    def _read(self) -> list[RawDoc]:
        """The next batch of the current pass's records ([] once the pass is exhausted)."""
        raws: list[RawDoc] = []
        for raw in self._it:
            raws.append(raw)
            if len(raws) >= self.batch_size:
                break
        if self.epoch == 1:
            self.first_pass_read += len(raws)
        return raws

    def _submit(self, raws: list[RawDoc]) -> Callable[[], list[dict | Reject]]:
        submit = getattr(self._fetch, "submit", None)
        return submit(raws) if submit is not None else (lambda: self._fetch(raws))

    def _read_ahead(self) -> None:
        """Start the next batch of this pass (a new pass starts only when this one is used up). A source
        that fails while reading it (a stream out of retries) fails when that batch is needed, as without
        read-ahead: a quota the current batch fills is not lost to an error past it."""
        try:
            ahead = self._read()
        except Exception as exc:  # noqa: BLE001 - re-raised unchanged by the collector, if ever called

            def fail(exc: Exception = exc) -> list[dict | Reject]:
                raise exc

            self._ahead = fail
            return
        if ahead:
            self._ahead = self._submit(ahead)

    def _refill(self) -> bool:
        """Fetch the next batch into the pending queue; False when no more records exist."""
        while not self._pending:
            if self._ahead is not None:
                collect, self._ahead = self._ahead, None
            else:
                raws = self._read()
                if not raws:
                    if self.epoch == 1:
                        self.stats.unique_units = self.taken
                    if self.epoch >= math.ceil(self.max_epochs) or self.taken == 0:
                        self.exhausted = True
                        return False
                    self.epoch += 1
                    self.stats.epochs_started = self.epoch
                    log.info("source %s: pass %d exhausted; upsampling (epoch %d of max %.2f)",
                             self.name, self.epoch - 1, self.epoch, self.max_epochs)
                    self._it = self._iter_epoch(self.epoch)
                    continue
                collect = self._submit(raws)
            self._read_ahead()
            for item in collect():
                if isinstance(item, Reject):
                    if self.epoch == 1:
                        self.stats.seen += 1
                        if item.kind == "filtered":
                            self.stats.evaluated += 1
                            self.stats.filtered[(item.filter, item.reason)] += 1
                        elif item.kind == "withdrawn":
                            self.stats.withdrawn += 1
                        else:
                            self.stats.rejects[item.reason] += 1
                        self._on_reject(item)
                    continue
                if self.epoch == 1:
                    self.stats.seen += 1
                    self.stats.evaluated += 1
                else:
                    item["id"] = copy_id(item["id"], self.epoch)
                    item["audit_trace"] = [*item["audit_trace"], f"sampler:upsample_epoch={self.epoch}"]
                self._pending.append(item)
            self._check_budget()
        return True

    def drain_first_pass(self, headroom: float | None = None) -> bool:
        """Fetch the rest of the first pass without taking anything (``sampler.signals: full`` on a finite
        source): the fetch's signal store then holds every record, so a what-if that needs more documents
        than the quota took can still be answered. With ``headroom`` h, stop once h x the records read so
        far have been read again (whole batches: the same records on every run and resume). Stats, rejects
        and the output do not change. Returns whether the first pass is now read to its end (False once a
        second pass has started, or when the headroom stopped it first)."""
        if self.stats.unique_units is not None:
            return True
        if self.epoch != 1:
            return False
        budget = math.inf if headroom is None else math.ceil(headroom * self.first_pass_read)
        # one batch in the workers while this process counts the previous one's tokens, as sampling does:
        # submitting and collecting each batch in turn left the workers idle during the count and this
        # process idle during the extraction (at 1B the drain was an hour of stage 1). Batches are still
        # collected in reading order, so the store's rows and the recorded units are the same.
        collect, self._ahead = self._ahead, None
        while True:
            raws = self._read() if budget > 0 else []
            budget -= len(raws)
            ahead = self._submit(raws) if raws else None
            if collect is not None:
                collect()
            if ahead is None:  # budget still > 0: the pass ran out before the headroom did
                return budget > 0
            collect = ahead

    def count_ingestion_rejects(self, rejects: list[Reject]) -> None:
        """Records a file-based source rejected while reading (before sampling): seen and charged to the
        error budget like the ones found during sampling (they never reach ``fetch``)."""
        self.stats.seen += len(rejects)
        self.stats.rejects.update(r.reason for r in rejects)
        self._check_budget()

    def _check_budget(self) -> None:
        seen, bad = self.stats.seen, sum(self.stats.rejects.values())
        if seen >= 200 and bad / seen > self.max_reject_fraction:
            top = ", ".join(f"{r}={n:,}" for r, n in self.stats.rejects.most_common(3))
            raise ConfigError(
                f"source {self.name}: {bad:,} of {seen:,} records rejected ({top}), over the error budget "
                f"sampler.max_reject_fraction={self.max_reject_fraction}; check the source's text_field/format "
                f"or raise the budget")

    def take_until(self, quota: float) -> None:
        """Accept documents while that brings ``taken`` closer to ``quota``.

        A document too large for what is left of the quota is set aside (it is reconsidered first if
        the quota grows) and the next ones are tried, up to ``MAX_SKIPS`` in a row: one huge page
        must not end a source's sampling far below its quota. The bias this adds is confined to
        the last half-document of each quota."""
        if self._skipped:
            self._pending.extendleft(reversed(self._skipped))
            self._skipped = []
        skips = 0
        while quota - self.taken >= 0.5 and skips < MAX_SKIPS:
            if not self._pending and (self.exhausted or not self._refill()):
                break
            row = self._pending[0]
            n = self._units(row)
            if self.taken + n > self._cap() + n / 2:
                self.exhausted = True  # max_epochs reached: this source can give no more
                break
            if quota - self.taken < n / 2:
                self._skipped.append(self._pending.popleft())
                skips += 1
                continue
            skips = 0
            self._pending.popleft()
            self.taken += n
            self.units.append(n)
            self.tokens += int(row["n_tokens"])
            self.chars += int(row["n_chars"])
            self.epoch_docs[self.epoch] += 1
            self.stats.accepted += 1
            self._emit(row)

    def short_of(self, quota: float) -> bool:
        """Exhausted with less than the quota (beyond the half-document rounding)."""
        if not self.exhausted:
            return False
        if self._skipped:  # what is left exists but overshoots: not a shortfall
            return False
        return quota - self.taken >= 0.5 if self.unit == "docs" else self.taken < quota * (1 - 1e-3)

    def keep_count(self, quota: float) -> int:
        """How many of the accepted docs a shrunken quota keeps (closest-prefix rule)."""
        total, k = 0.0, 0
        for n in self.units:
            if quota - total < n / 2:
                break
            total += n
            k += 1
        return k


def take_all(takers: dict[str, Taker], weights: dict[str, float], unit: str) -> dict[str, dict]:
    """``target: all``: read every source to the end (up to its max_epochs passes), then keep the largest mix
    in the recipe's proportions, as ``shrink`` does: the scarcest source (relative to its weight) is used
    whole and the others are cut to match. Running out is the plan here, so nothing counts as a shortfall."""
    live = {n: w for n, w in weights.items() if w > 0}
    for name in live:
        takers[name].take_until(math.inf)
    scale = min(takers[n].taken / w for n, w in live.items())
    shrunk = apportion(scale, weights, integer=unit == "docs")
    return {name: {"target_units": shrunk[name], "final_quota": shrunk[name], "shortfall": False,
                   "keep": t.keep_count(shrunk[name])} for name, t in takers.items()}


def run_quotas(takers: dict[str, Taker], weights: dict[str, float], target: int | None, unit: str,
               policy: str) -> dict[str, dict]:
    """Fill every source's quota, handling shortfalls by ``policy``; return per-source outcome. ``target``
    None is ``target: all`` (``take_all``)."""
    if target is None:
        return take_all(takers, weights, unit)
    active = dict(weights)
    fixed: dict[str, float] = {}
    first = apportion(target, weights, integer=unit == "docs")
    quotas = dict(first)
    outcome = {name: {"target_units": first[name], "final_quota": first[name], "shortfall": False, "keep": None}
               for name in weights}
    while active:
        remaining = target - sum(fixed.values())
        quotas.update(apportion(remaining, active, integer=unit == "docs"))
        short = []
        for name in active:
            takers[name].take_until(quotas[name])
            if takers[name].short_of(quotas[name]):
                short.append(name)
        for name in active:
            outcome[name]["final_quota"] = quotas[name]
        if not short:
            break
        for name in short:
            t = takers[name]
            outcome[name]["shortfall"] = True
            log.warning("source %s ran out: %s of %s %s after %d pass(es) (max_epochs=%s)", name,
                        f"{t.taken:,.0f}", f"{quotas[name]:,.0f}", unit, t.epoch, t.max_epochs)
        if policy == "error":
            names = ", ".join(short)
            raise ConfigError(f"source(s) {names} cannot fill their quota; raise their max_epochs, lower the "
                              f"target, or set sampler.shortfall=renormalize (redistribute) or shrink (scale all)")
        if policy == "shrink":
            scale = min(takers[n].taken / weights[n] for n in short if weights[n] > 0)
            shrunk = apportion(scale, weights, integer=unit == "docs")
            for name, t in takers.items():
                outcome[name]["final_quota"] = shrunk[name]
                outcome[name]["keep"] = t.keep_count(shrunk[name])
            return outcome
        for name in short:
            fixed[name] = takers[name].taken
            del active[name]
    return outcome
