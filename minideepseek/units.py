"""Resume inside a stage: finished units of work recorded in the stage's temp dir.

A stage's artifact is built in ``<artifact>.tmp-<pid>`` (minideepseek/stage.py). A stage that splits its
work into units (stage 1: batches of records; stage 2: signature blocks, band files, chunks, passes;
stage 3: sample collection; stage 4: partitions) records each finished unit in ``<tmp>/_units/`` with
``Units.finish``: a small JSON state (what a resumed run needs to go on from there: counters, quota
state, file sizes), written atomically *after* the unit's files. A kill leaves the temp dir behind;
the next run of the stage with the same key (schema, config hash, input fingerprints: ``KEY_FILE``)
adopts it and skips every unit that ``done`` says is finished; a run with another key discards it and
says so. ``--restart`` discards it unconditionally. The unit records never reach the artifact
(``StageRun.commit`` removes ``_units/`` before the files are listed), so a resumed artifact has the
same files as an uninterrupted one.

Fault injection for tests (subprocess kill tests): ``MINIDEEPSEEK_KILL_AFTER_UNIT=<stage>:<n>`` sends
SIGKILL to this process right after its n-th ``finish`` of that stage (0 = never).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from .fsio import write_json_atomic

log = logging.getLogger(__name__)

UNITS_DIR = "_units"
KEY_FILE = "key.json"
KILL_ENV = "MINIDEEPSEEK_KILL_AFTER_UNIT"
_NAME = re.compile(r"^[A-Za-z0-9_.=-]{1,160}$")


def resume_key(stage: str, schema_version: int, config_hash: str, input_fingerprints: dict[str, str]) -> str:
    """What finished units depend on: the stage, its schema, its config and its inputs' fingerprints.
    Units recorded under any other key are never reused."""
    return hashlib.sha256(json.dumps({"stage": stage, "schema": schema_version, "config": config_hash,
                                      "inputs": dict(sorted(input_fingerprints.items()))},
                                     sort_keys=True).encode()).hexdigest()


def recorded_key(tmp: Path) -> str | None:
    """The resume key a temp dir's units were recorded under, or None (no units, or unreadable)."""
    p = tmp / UNITS_DIR / KEY_FILE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("key") if isinstance(data, dict) and isinstance(data.get("key"), str) else None


def count_units(tmp: Path) -> int:
    d = tmp / UNITS_DIR
    return sum(1 for p in d.glob("*.json") if p.name != KEY_FILE) if d.is_dir() else 0


class Units:
    """The finished units of one stage run (``StageRun.units``).

    >>> if not units.done("source=web.batch=000012"):
    ...     ...do the unit, write its files into tmp...
    ...     units.finish("source=web.batch=000012", {"rows": 512})
    >>> state = units.get("source=web.batch=000012")
    """

    def __init__(self, tmp: Path, stage: str, key: str) -> None:
        self.dir = tmp / UNITS_DIR
        self.stage = stage
        self.key = key
        self.dir.mkdir(parents=True, exist_ok=True)
        if recorded_key(tmp) != key:
            write_json_atomic(self.dir / KEY_FILE, {"key": key, "stage": stage})
        self.reused: list[str] = []  # units a resumed run skipped (done() said True)
        self.saved_s = 0.0  # the recorded work seconds of the reused units
        self._finished = 0
        self._t_last = time.perf_counter()
        kill = os.environ.get(KILL_ENV, "")
        st, _, n = kill.rpartition(":")
        self._kill_after = int(n) if st == stage and n.isdigit() else 0

    def _path(self, name: str) -> Path:
        if not _NAME.match(name) or name == KEY_FILE.removesuffix(".json"):
            raise ValueError(f"bad unit name {name!r}")
        return self.dir / f"{name}.json"

    def done(self, name: str) -> bool:
        """True when the unit was finished by this run or by the killed run this one resumes; a reused
        unit is counted (the stage's log and manifest say how much work the resume saved)."""
        state = self.get(name)
        if state is None:
            return False
        if name not in self.reused:
            self.reused.append(name)
            self.saved_s += float(state.get("_seconds", 0.0))
        return True

    def get(self, name: str) -> dict[str, Any] | None:
        p = self._path(name)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def finish(self, name: str, state: dict[str, Any] | None = None) -> None:
        """Record a unit as finished (its files must already be complete): the state is written atomically,
        with the seconds since the previous unit finished (what redoing it would cost)."""
        now = time.perf_counter()
        write_json_atomic(self._path(name), {**(state or {}), "_seconds": round(now - self._t_last, 3)})
        self._t_last = now
        self._finished += 1
        if self._kill_after and self._finished == self._kill_after:
            log.warning("%s: %s=%s: killing this process after unit %s (fault injection)", self.stage, KILL_ENV,
                        os.environ.get(KILL_ENV), name)
            os.kill(os.getpid(), signal.SIGKILL)

    def summary(self) -> dict[str, Any]:
        """For the manifest: how many units this run reused from a killed run and what they had cost."""
        return {"units_reused": len(self.reused), "seconds_saved": round(self.saved_s, 2),
                "units_finished_here": self._finished}
