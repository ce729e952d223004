"""The stage contract (DESIGN.md): build in a tmp dir, ``manifest.json`` last, atomic rename; skip when
up to date, refuse stale or corrupt inputs, resume a killed run from its finished units.

``StageRun`` drives one stage build: ``up_to_date`` (same schema, config hash and input fingerprints, files
intact), else ``begin`` (a new ``<artifact>.tmp-<pid>``, or a killed run's adopted: minideepseek/units.py),
the stage's body, ``commit`` (checksums, manifest, swap). Beside it: what an artifact is on disk
(manifest, files, fingerprint, the atomic moves: minideepseek/artifact.py), reading an artifact this
process did not write (minideepseek/upstream.py), and the second mode, an edit of a committed artifact
(a withdrawal: ``ArtifactEdit`` in minideepseek/edits.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from . import runlock
from .artifact import (
    MANIFEST,
    VERIFIED,
    CorruptArtifactError,
    InputRef,
    Manifest,
    StaleInputError,
    artifact_fingerprint,
    check_writable,
    list_files,
    live_suffix,
    publish_reports,
    read_manifest,
    remove_dead_tmp,
    restore_interrupted_swap,
    swap_into_place,
    verify_artifact,
)
from .config import config_hash, to_plain
from .fsio import write_json_atomic
from .provenance import git_commit, package_versions, peak_rss_mb
from .units import UNITS_DIR, Units, count_units, recorded_key, resume_key
from .upstream import require_upstream, verify_before_use

log = logging.getLogger(__name__)

# the names other modules import from here (the artifact model and the upstream checks are re-exported for
# them: a stage talks to its artifact and its upstreams through the contract)
__all__ = ["MANIFEST", "CorruptArtifactError", "InputRef", "Manifest", "StageRun", "StaleInputError",
           "check_writable", "live_suffix", "publish_reports", "read_manifest", "remove_dead_tmp",
           "restore_interrupted_swap", "require_upstream", "verify_artifact", "verify_before_use"]


class StageRun:
    """Drives one stage run under the contract.

    >>> run = StageRun("mix_sampler", MIXED_RAW, run_dir, cfg, inputs, schema_version=1)
    >>> if run.up_to_date() and not force: return run.existing
    >>> tmp = run.begin(); ...write files into tmp...; run.commit(counters={...})
    """

    def __init__(self, stage: str, artifact: str, run_dir: Path, cfg: Any, inputs: list[InputRef],
                 schema_version: int, seed: int) -> None:
        self.stage = stage
        self.artifact = artifact
        self.run_dir = Path(run_dir)
        self.final_dir = self.run_dir / artifact
        self.cfg = cfg
        self.config_hash = config_hash(cfg)
        self.inputs = inputs
        self.schema_version = schema_version
        self.seed = seed
        self.tmp_dir: Path | None = None
        self.units: Units | None = None  # set by begin(): finished units, adopted from a killed run or new
        self.resumed_from: str | None = None
        self._t0 = 0.0
        self._started = ""

    @property
    def resume_key(self) -> str:
        return resume_key(self.stage, self.schema_version, self.config_hash,
                          {i.name: i.fingerprint for i in self.inputs})

    @property
    def existing(self) -> dict[str, Any] | None:
        return read_manifest(self.final_dir)

    def up_to_date(self, verify: str = "sha256") -> bool:
        """True when the artifact is complete, was built from this config and these inputs, and its files
        still match their checksums (a corrupted output is rebuilt, never reported as up to date)."""
        man = self.existing
        if man is None:
            return False
        reasons = []
        if man.get("schema_version") != self.schema_version:
            reasons.append("schema version changed")
        if man.get("config_hash") != self.config_hash:
            reasons.append("config changed")
        old_inputs = {i["name"]: i["fingerprint"] for i in man.get("inputs", [])}
        new_inputs = {i.name: i.fingerprint for i in self.inputs}
        if old_inputs != new_inputs:
            reasons.append("inputs changed")
        if not reasons:
            try:
                verify_artifact(self.final_dir, man, verify)
            except CorruptArtifactError as exc:
                log.warning("%s: %s", self.stage, exc)
                reasons.append("an output file does not match its manifest checksum")
        if reasons:
            log.info("%s: %s exists but is out of date (%s); rebuilding", self.stage, self.final_dir, ", ".join(reasons))
            return False
        return True

    def begin(self, restart: bool = False) -> Path:
        """Create the temp dir the artifact is built in, or adopt a killed run's (same resume key: its
        finished units are reused, see minideepseek/units.py); ``restart`` discards a killed run's units."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        restore_interrupted_swap(self.final_dir)
        adopt = self._resumable(restart)
        remove_dead_tmp(self.run_dir)
        for stray in self.run_dir.glob(f"{self.artifact}.old-*"):  # the artifact exists again: old copies go
            if self.final_dir.exists() and not live_suffix(stray.name, ".old-"):
                shutil.rmtree(stray, ignore_errors=True)
        self.tmp_dir = self.run_dir / f"{self.artifact}.tmp-{os.getpid()}"
        if adopt is not None:
            os.rename(adopt, self.tmp_dir)
            self.resumed_from = adopt.name
        else:
            self.tmp_dir.mkdir()
        self.units = Units(self.tmp_dir, self.stage, self.resume_key)
        self._t0 = time.time()
        self._started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._t0))
        return self.tmp_dir

    def _resumable(self, restart: bool) -> Path | None:
        """The dead run's temp dir with finished units under this run's resume key (the one with the most
        units when a stage was killed more than once); every other dead one with units is discarded, and
        the log says why."""
        cands = []
        for p in sorted(self.run_dir.glob(f"{self.artifact}.tmp-*")):
            if not p.is_dir() or p.is_symlink() or live_suffix(p.name, ".tmp-") or not (p / UNITS_DIR).is_dir():
                continue
            n = count_units(p)
            if restart:
                log.warning("%s: --restart: discarding %d finished unit(s) of a killed run in %s", self.stage, n, p.name)
            elif recorded_key(p) != self.resume_key:
                log.warning("%s: discarding %d finished unit(s) in %s: they were built from another config or "
                            "other inputs than this run's, so none is reused", self.stage, n, p.name)
            else:
                cands.append((n, p))
                continue
            shutil.rmtree(p, ignore_errors=True)
        if not cands:
            return None
        cands.sort(key=lambda c: (c[0], c[1].name))
        for _, p in cands[:-1]:
            shutil.rmtree(p, ignore_errors=True)
        n, best = cands[-1]
        log.warning("%s: resuming the killed run in %s: %d finished unit(s) are reused (same config and inputs; "
                    "--restart discards them)", self.stage, best.name, n)
        return best

    def elapsed(self) -> float:
        return time.time() - self._t0

    def commit(self, counters: dict[str, Any], extra: dict[str, Any] | None = None,
               volatile: tuple[str, ...] = ()) -> Manifest:
        """Checksum outputs, write the manifest last, rename the tmp dir into place.

        ``volatile`` files (reports that carry wall time or peak memory) are checksummed but left out
        of the fingerprint: the data is byte-identical across reruns, timings are not."""
        assert self.tmp_dir is not None, "begin() first"
        shutil.rmtree(self.tmp_dir / UNITS_DIR, ignore_errors=True)  # resume records never reach the artifact
        files = list_files(self.tmp_dir, volatile)
        fp = artifact_fingerprint(self.config_hash, [i.fingerprint for i in self.inputs], files)
        wall = time.time() - self._t0
        manifest = {
            "stage": self.stage,
            "artifact": self.artifact,
            "schema_version": self.schema_version,
            "fingerprint": fp,
            "config_hash": self.config_hash,
            "config": to_plain(self.cfg),
            "seed": self.seed,
            "inputs": [to_plain(i) for i in self.inputs],
            "outputs": {"files": files, "total_bytes": sum(f["bytes"] for f in files)},
            "counters": counters,
            **(extra or {}),
            "versions": package_versions(),
            "git_commit": git_commit(),
            "command": " ".join(sys.argv),
            "started_at": self._started,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": round(wall, 2),
            "peak_rss_mb": peak_rss_mb(),
            "cpu_count": psutil.cpu_count(),
            "input_verification": list(VERIFIED),
        }
        if self.units is not None and (self.units.summary()["units_finished_here"] or self.resumed_from):
            manifest["units"] = self.units.summary()  # how the work was split (bench/bench_resume.py reads it)
        if self.units is not None and self.resumed_from is not None:
            manifest["resumed"] = {"from": self.resumed_from, **self.units.summary()}
        write_json_atomic(self.tmp_dir / MANIFEST, manifest)
        swap_into_place(self.tmp_dir, self.final_dir)
        self.tmp_dir = None
        manifest = Manifest(manifest)
        log.info("%s: wrote %s (%s files, %.1f MB) in %.1f s", self.stage, self.final_dir, len(files),
                 manifest["outputs"]["total_bytes"] / 1e6, wall)
        return manifest

    def execute(self, build: Callable[[Path], dict[str, Any]], report_dir: Path, reports: tuple[str, ...],
                force: bool = False, restart: bool = False) -> Manifest:
        """The contract around a stage body: skip when up to date (unless ``force``), else build into
        the tmp dir (``build(tmp)`` must end with ``commit``), abort on any error; then publish the
        artifact's reports to ``report_dir``. Leftovers of dead processes go first, skipped or not."""
        check_writable(self.run_dir, Path(report_dir))
        with runlock.hold(self.run_dir):
            return self._execute(build, report_dir, reports, force, restart)

    def _execute(self, build: Callable[[Path], dict[str, Any]], report_dir: Path, reports: tuple[str, ...],
                 force: bool, restart: bool) -> Manifest:
        restore_interrupted_swap(self.final_dir)
        remove_dead_tmp(self.run_dir, Path(report_dir))
        verify = getattr(getattr(self.cfg, "run", None), "verify", "sha256")
        if not force and self.up_to_date(verify):
            log.info("%s: %s is up to date; skipping (use --force to rebuild)", self.stage, self.final_dir)
            man = self.existing
            assert man is not None
        else:
            tmp = self.begin(restart)
            try:
                man = build(tmp)
            except KeyboardInterrupt:
                self.abort(keep_units=True)  # Ctrl-C is a kill the user chose: the next run resumes
                raise
            except BaseException:
                self.abort()
                raise
        publish_reports(self.final_dir, report_dir, reports)
        return man

    def abort(self, keep_units: bool = False) -> None:
        """Remove the temp dir, unless ``keep_units`` and it holds finished units (then the dead process's
        dir is adopted or discarded by the stage's next run, like after a SIGKILL)."""
        if self.tmp_dir is not None:
            if not (keep_units and self.units is not None and count_units(self.tmp_dir)):
                shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None
