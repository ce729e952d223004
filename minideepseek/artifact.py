"""The artifact model: what a finished stage leaves on disk, and the file-system moves that make a
build or an edit atomic.

An artifact is ``data/<run>/<artifact>/`` with its data files and ``manifest.json`` (written last): the
stage, config hash, inputs' fingerprints, every file's size and sha256 (``list_files``) and a
``fingerprint`` over them (``artifact_fingerprint``; volatile reports left out, so reruns give the same
value). ``verify_artifact`` checks the files against the manifest before anyone trusts them. A build
writes into ``<artifact>.tmp-<pid>`` and ``swap_into_place`` renames it over the old one; what dead
processes left is cleaned by ``remove_dead_tmp`` (a killed stage's finished units excepted: see
minideepseek/units.py). The contract that drives a stage through these (skip when up to date, refuse
stale inputs, resume) is minideepseek/stage.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from .config import ConfigError
from .fsio import UnsafePathError, copy_atomic, inside, sha256_file
from .units import UNITS_DIR

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


class StaleInputError(ConfigError):
    """An upstream artifact is missing, incomplete or was built from a different config."""


class CorruptArtifactError(StaleInputError):
    """A file of an artifact does not match the checksum its manifest recorded."""


VERIFY_MODES = ("sha256", "size")
# What this process verified, for the manifest of the stage it runs (``input_verification``).
VERIFIED: list[dict[str, Any]] = []


def verify_artifact(adir: Path, man: dict[str, Any], mode: str = "sha256", rebuild: str = "") -> dict[str, Any]:
    """Check every file the manifest lists: present, same size and (``sha256`` mode) same sha256.

    ``size`` mode (``run.verify: size``) is for multi-GB runs where hashing every input on every stage
    costs too much; it is logged as such. Raises CorruptArtifactError naming the artifact, the file
    and the command that rebuilds it."""
    t0 = time.perf_counter()
    files = man.get("outputs", {}).get("files", [])
    nbytes = 0
    for f in files:
        try:
            p = inside(adir, f["path"])
        except (UnsafePathError, KeyError, TypeError) as exc:
            raise CorruptArtifactError(
                f"artifact {adir}: its manifest lists a file outside the artifact ({exc}); the artifact cannot be "
                f"trusted" + (f"; rebuild it: {rebuild}" if rebuild else "")) from None
        why = None
        if p.is_symlink():
            why = "is a symbolic link (an artifact holds regular files only)"
        elif not p.is_file():
            why = "is missing"
        elif p.stat().st_size != f["bytes"]:
            why = f"has {p.stat().st_size:,} bytes, the manifest says {f['bytes']:,}"
        elif mode == "sha256":
            got = sha256_file(p)
            if got != f["sha256"]:
                why = f"sha256 {got[:16]}... differs from the manifest's {f['sha256'][:16]}... (corrupted or edited)"
        if why:
            raise CorruptArtifactError(
                f"artifact {adir}: file {f['path']} {why}; the artifact cannot be trusted"
                + (f"; rebuild it: {rebuild}" if rebuild else ""))
        nbytes += f["bytes"]
    dt = time.perf_counter() - t0
    rec = {"artifact": adir.name, "mode": mode, "files": len(files), "bytes": nbytes, "seconds": round(dt, 3),
           "mb_per_s": round(nbytes / 1e6 / dt, 1) if dt > 0 and mode == "sha256" else None}
    VERIFIED.append(rec)
    if mode == "sha256":
        log.info("verified %s: %d files, %.1f MB sha256 in %.2f s (%s MB/s)", adir, len(files), nbytes / 1e6, dt,
                 rec["mb_per_s"])
    else:
        log.warning("%s: checked %d files by size only (run.verify=size): their content is NOT verified", adir,
                    len(files))
    return rec


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def live_suffix(name: str, mark: str) -> bool:
    """True when ``name`` ends in ``<mark><pid>`` of a live process other than this one (or a tail that is
    no pid: left alone too, it is not ours to remove)."""
    tail = name.rsplit(mark, 1)[-1]
    if not tail.isdigit():
        return True
    return int(tail) != os.getpid() and _pid_alive(int(tail))


def remove_dead_tmp(*dirs: Path) -> list[Path]:
    """Remove ``*.tmp-<pid>`` files and directories (and ``*.old-<pid>`` swap leftovers) whose process is
    gone, in ``dirs`` and one level below: what a killed stage, report write or swap left behind. A
    live process's temp files are left alone (another run may be writing them)."""
    removed = []
    for d in dirs:
        if not d.is_dir():
            continue
        cands = list(d.glob("*.tmp-*")) + list(d.glob("*/*.tmp-*")) + list(d.glob("*.old-*"))
        for p in sorted(set(cands)):
            tail = p.name.rsplit(".tmp-", 1)[-1] if ".tmp-" in p.name else p.name.rsplit(".old-", 1)[-1]
            if not tail.isdigit() or _pid_alive(int(tail)):
                continue
            if ".old-" in p.name and p.parent == d and not (d / p.name.rsplit(".old-", 1)[0]).exists():
                continue  # the only copy of an interrupted swap: restore_interrupted_swap puts it back
            if p.is_dir() and (p / UNITS_DIR).is_dir():
                continue  # a killed stage's finished units: only that stage's next run adopts or discards them
            log.warning("removing leftover %s of a dead process", p)
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed


@dataclass(frozen=True)
class InputRef:
    """One input of a stage: a path and a fingerprint that changes when its content does."""

    name: str
    path: str
    fingerprint: str
    detail: dict[str, Any] = field(default_factory=dict)


class Manifest(dict):  # type: ignore[type-arg]
    """An artifact's ``manifest.json`` with its fields named. Still the dict that was read (it is written
    back as JSON and older code indexes it), so a field a stage adds (``by_source``) stays reachable."""

    @property
    def stage(self) -> str:
        return self["stage"]

    @property
    def artifact(self) -> str:
        return self["artifact"]

    @property
    def fingerprint(self) -> str:
        return self["fingerprint"]

    @property
    def config_hash(self) -> str:
        return self["config_hash"]

    @property
    def config(self) -> dict[str, Any]:
        return self.get("config") or {}

    @property
    def counters(self) -> dict[str, Any]:
        return self.get("counters") or {}

    @property
    def inputs(self) -> list[dict[str, Any]]:
        return self.get("inputs") or []

    @property
    def files(self) -> list[dict[str, Any]]:
        """Every output file: path, bytes, sha256, volatile."""
        return (self.get("outputs") or {}).get("files") or []

    @property
    def withdrawals(self) -> list[dict[str, Any]]:
        return self.get("withdrawals") or []

    @property
    def wall_s(self) -> float | None:
        return self.get("wall_s")

    @property
    def peak_rss_mb(self) -> float | None:
        return self.get("peak_rss_mb")

    @property
    def finished_at(self) -> str | None:
        return self.get("finished_at")

    def input_fingerprint(self, name: str) -> str | None:
        return next((i["fingerprint"] for i in self.inputs if i["name"] == name), None)


def read_manifest(artifact_dir: Path) -> Manifest | None:
    p = artifact_dir / MANIFEST
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    return Manifest(data) if isinstance(data, dict) else None  # anything else is no manifest of ours


def list_files(root: Path, volatile: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every file under ``root`` (sorted) with size, sha256 and whether it is volatile: the
    ``outputs.files`` of a manifest."""
    files = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != MANIFEST:
            rel = p.relative_to(root).as_posix()
            files.append({"path": rel, "bytes": p.stat().st_size, "sha256": sha256_file(p), "volatile": rel in volatile})
    return files


def artifact_fingerprint(config_hash: str, input_fingerprints: list[str], files: list[dict[str, Any]]) -> str:
    """What an artifact's ``fingerprint`` hashes: its config, its inputs' fingerprints and the checksums
    of its non-volatile files (timings live in volatile reports, so reruns give the same value)."""
    return hashlib.sha256(json.dumps(
        {"config": config_hash, "inputs": list(input_fingerprints),
         "files": [(f["path"], f["sha256"]) for f in files if not f.get("volatile")]},
        sort_keys=True).encode()).hexdigest()


def swap_into_place(tmp: Path, final: Path) -> None:
    """Rename a finished ``<artifact>.tmp-<pid>`` over ``<artifact>``: the old one is first renamed to
    ``<artifact>.old-<pid>`` (so there is never a moment with a half-replaced directory), then removed.
    A kill between the two renames leaves no ``<artifact>``, only the complete ``.old-``/``.tmp-``
    copies; ``restore_interrupted_swap`` puts the old one back."""
    old = None
    if final.exists():
        old = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.rename(final, old)
    os.rename(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def restore_interrupted_swap(final: Path) -> bool:
    """If a kill hit ``swap_into_place`` between its renames, rename the complete old copy back."""
    if final.exists():
        return False
    olds = sorted(p for p in final.parent.glob(f"{final.name}.old-*") if (p / MANIFEST).is_file())
    if not olds:
        return False
    os.rename(olds[-1], final)
    log.warning("restored %s from %s (a run was killed while replacing it)", final, olds[-1].name)
    return True


def check_writable(*dirs: Path) -> None:
    """Fail before any work when an output directory cannot be written (read-only file system, no
    permission, full disk): one OSError naming the directory, turned into a one-line error by the CLI."""
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".write-probe.tmp-{os.getpid()}"
        try:
            probe.unlink(missing_ok=True)  # never write through a link planted under the probe's name
            probe.write_bytes(b"x")
        finally:
            probe.unlink(missing_ok=True)


def publish_reports(artifact_dir: Path, report_dir: Path, names: tuple[str, ...]) -> None:
    """Copy an artifact's report files to ``reports/<run>/`` (the artifact keeps the originals); each copy
    is atomic and replaces a symlink at its name instead of writing through it."""
    report_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        src = artifact_dir / name
        if src.is_file() and not src.is_symlink():
            copy_atomic(src, report_dir / name)
