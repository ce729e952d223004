"""The stage contract (DESIGN.md): tmp dir + atomic rename, ``manifest.json`` last, skip when up to
date, refuse stale inputs.

A stage's artifact is ``data/<run>/<artifact>/``. While it runs it writes into
``<artifact>.tmp-<pid>``; when everything is written it writes ``manifest.json`` there and renames the
directory into place. So a killed stage leaves either the previous complete artifact or nothing
that has a manifest; a stray ``.tmp-*`` directory is removed by the next run.

The ``fingerprint`` of an artifact hashes its config hash, its inputs' fingerprints and its data
files' checksums. It is byte-stable across reruns (no timestamps), so a downstream stage that
recorded it can tell whether its upstream really changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from . import runlock
from .config import ConfigError, config_hash, to_plain
from .fsio import UnsafePathError, copy_atomic, inside, sha256_file, write_json_atomic
from .provenance import git_commit, package_versions, peak_rss_mb
from .units import UNITS_DIR, Units, count_units, recorded_key, resume_key

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


def require_upstream(run_dir: Path, artifact: str, producer: str, expected_config_hash: str | None = None,
                     config_path: str = "CONFIG", verify: str | None = None,
                     chain: dict[str, str] | None = None) -> dict[str, Any]:
    """Return an upstream artifact's manifest after checking it can be used, or raise StaleInputError
    naming the command to run: it exists, its own upstreams did not move on, it was built from the
    config the user's command now gives (``expected_config_hash``; ``chain`` maps further upstream
    artifacts to the config hash they must have, e.g. ``mixed_raw`` for the tokenizer), and every data
    file matches its manifest checksum (``verify``). Hints repeat the user's own command line
    (``invocation.rerun_hint``)."""
    from .invocation import rerun_hint

    adir = run_dir / artifact
    hint = rerun_hint(producer, config_path)
    man = read_manifest(adir)
    if man is None:
        raise StaleInputError(f"upstream artifact {adir} is missing or incomplete (no {MANIFEST}); run {hint} first")
    for inp in man.get("inputs", []):  # transitive: the upstream's own upstream may have moved on
        dep = read_manifest(run_dir / inp["name"])
        if dep is not None and dep.get("fingerprint") != inp.get("fingerprint"):
            raise StaleInputError(f"upstream artifact {adir} was built from an older {inp['name']}; rerun {hint}")
    if expected_config_hash is not None and man.get("config_hash") != expected_config_hash:
        raise StaleInputError(
            f"upstream artifact {adir} was built from a different config than your command now gives; rerun {hint}")
    if chain is None:
        chain = _chain_from_invocation()
    for dep_name in _upstream_closure(run_dir, man):
        want = chain.get(dep_name)
        dep = read_manifest(run_dir / dep_name)
        if want is not None and dep is not None and dep.get("config_hash") != want:
            producer_of = dep.get("stage", dep_name)
            raise StaleInputError(
                f"upstream artifact {adir} was built on {run_dir / dep_name}, which comes from a different "
                f"{producer_of} config than your command now gives; rebuild from there: "
                f"{rerun_hint(producer_of + '.py', config_path)}")
    verify_artifact(adir, man, verify or _verify_mode(), rebuild=hint)
    return man


def verify_before_use(run_dir: Path, artifacts: tuple[str, ...] | list[str], config_path: str = "CONFIG",
                      required: tuple[str, ...] = ()) -> dict[str, Manifest]:
    """Manifests of the run's ``artifacts`` that exist, each checked file by file against its manifest
    (``run.verify`` of the current command, sha256 by default) before a client (withdrawal, export,
    dashboard) reads it. A damaged artifact raises CorruptArtifactError: one line naming the artifact,
    the file and the command that rebuilds it. ``required`` ones that are missing raise StaleInputError."""
    from . import pipeline
    from .invocation import rerun_hint

    out: dict[str, Manifest] = {}
    mode = _verify_mode()
    for name in artifacts:
        adir = Path(run_dir) / name
        man = read_manifest(adir)
        producer = pipeline.stage(name).script
        if man is None:
            if name in required:
                raise StaleInputError(f"{adir} is missing or incomplete (no {MANIFEST}); run "
                                      f"{rerun_hint(producer, config_path)} first")
            continue
        verify_artifact(adir, man, mode, rebuild=rerun_hint(producer, config_path))
        out[name] = man
    return out


_CHAIN_CACHE: dict[tuple, dict[str, str]] = {}


def _chain_from_invocation() -> dict[str, str]:
    """Config hash per artifact under the user's current command (empty when no command is known,
    e.g. a library call): lets a stage refuse an upstream whose own upstream came from another config."""
    from .invocation import current

    inv = current()
    if inv is None or not inv.config:
        return {}
    cfg_path = Path(inv.config).resolve()
    try:  # keyed by content: tests (and notebooks) reuse one file name in many directories
        key = (str(cfg_path), hashlib.sha256(cfg_path.read_bytes()).hexdigest(), inv.overrides)
    except OSError:
        return {}
    if key not in _CHAIN_CACHE:
        from .pipeline import Plan

        try:  # the command's own validation (cli.run_cli) reports config errors; here they only mean "unknown"
            _CHAIN_CACHE[key] = Plan(inv.config, inv.overrides).expected_hashes()
        except ConfigError:
            _CHAIN_CACHE[key] = {}
    return _CHAIN_CACHE[key]


def _verify_mode() -> str:
    """``run.verify`` of the user's current command (sha256 when unknown)."""
    from .invocation import current

    inv = current()
    if inv is None or not inv.config:
        return "sha256"
    from .config import build
    from .runconfig import RunConfig, load_tree

    try:
        data = load_tree(inv.config, list(inv.overrides))
        return build(RunConfig, data.get("run") or {}, "run").verify
    except ConfigError:
        return "sha256"


def _upstream_closure(run_dir: Path, man: dict[str, Any]) -> list[str]:
    """Names of the artifacts an artifact was built on, transitively (inputs that are artifacts of the run)."""
    seen: list[str] = []
    todo = [i["name"] for i in man.get("inputs", [])]
    while todo:
        name = todo.pop(0)
        if name in seen or not (run_dir / name / MANIFEST).is_file():
            continue
        seen.append(name)
        dep = read_manifest(run_dir / name) or {}
        todo += [i["name"] for i in dep.get("inputs", [])]
    return seen


class StageRun:
    """Drives one stage run under the contract.

    >>> run = StageRun("mix_sampler", "mixed_raw", run_dir, cfg, inputs, schema_version=1)
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


class ArtifactEdit:
    """The contract's second mode: an edit of a committed artifact (a withdrawal removing documents),
    with the same guarantees as a build.

    The edited copy is written into ``<artifact>.tmp-<pid>``, its manifest last (chained to its inputs'
    new fingerprints, the edit appended to ``withdrawals``), then renamed into place; a kill at any
    point leaves the old or the new artifact, never a mix. An artifact whose manifest already lists
    the edit is done: a resumed edit skips it and reads back what the first run recorded.

    >>> ed = ArtifactEdit(run_dir, "mixed_raw", ticket)
    >>> got = ed.begin()
    >>> if got is None: return ed.recorded()
    >>> man, tmp = got; ...write the edited files into tmp...; ed.commit(man, tmp, entry, counters, {...})
    """

    def __init__(self, run_dir: Path, artifact: str, key: str,
                 on_swap: Callable[[str], None] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.artifact = artifact
        self.final_dir = self.run_dir / artifact
        self.key = key  # the edit's id (a ticket), recorded in the manifest's withdrawals
        self.on_swap = on_swap  # called with "<artifact>:before_swap"/":after_swap" (fault injection in tests)

    def recorded(self) -> dict[str, Any]:
        """What an earlier (interrupted) run of this edit recorded for the artifact, or {}."""
        man = read_manifest(self.final_dir) or {}
        return next((w.get("result", {}) for w in man.get("withdrawals", []) if w["ticket"] == self.key), {})

    def begin(self) -> tuple[dict[str, Any], Path] | None:
        """(old manifest, tmp dir) when the artifact exists and does not list this edit yet."""
        man = read_manifest(self.final_dir)
        if man is None or any(w["ticket"] == self.key for w in man.get("withdrawals", [])):
            return None
        for stray in self.run_dir.glob(f"{self.artifact}.tmp-*"):
            if not live_suffix(stray.name, ".tmp-"):  # a live process's temp dir is never removed
                shutil.rmtree(stray, ignore_errors=True)
        tmp = self.run_dir / f"{self.artifact}.tmp-{os.getpid()}"
        tmp.mkdir()
        return man, tmp

    def commit(self, man: dict[str, Any], tmp: Path, entry: dict[str, Any], counters: dict[str, Any],
               input_updates: dict[str, str], result: dict[str, Any] | None = None,
               new_input_path: Path | None = None, when: str = "") -> None:
        """Manifest of the edited artifact + atomic swap. ``input_updates``: input name -> its new
        fingerprint (an input not listed before is added, at ``new_input_path``). The withdrawal entry
        keeps ``result`` (shard checksums, re-pack figures), so a resumed run can still report it."""
        volatile = tuple(f["path"] for f in man["outputs"]["files"] if f.get("volatile"))
        files = list_files(tmp, volatile)
        inputs = [{**i, "fingerprint": input_updates.get(i["name"], i["fingerprint"])} for i in man["inputs"]]
        for name, fp in input_updates.items():
            if name not in {i["name"] for i in inputs}:
                inputs.append({"name": name, "path": str(new_input_path), "fingerprint": fp, "detail": {}})
        new = {**man, "inputs": inputs, "outputs": {"files": files, "total_bytes": sum(f["bytes"] for f in files)},
               "fingerprint": artifact_fingerprint(man["config_hash"], [i["fingerprint"] for i in inputs], files),
               "counters": {**man["counters"], **counters},
               "withdrawals": [*man.get("withdrawals", []), {**entry, "when": when, "result": result or {}}]}
        write_json_atomic(tmp / MANIFEST, new)
        if self.on_swap:
            self.on_swap(f"{self.artifact}:before_swap")
        swap_into_place(tmp, self.final_dir)
        if self.on_swap:
            self.on_swap(f"{self.artifact}:after_swap")
        log.info("%s %s: %s rewritten", "withdraw", self.key, self.final_dir)
