"""One writer per run: ``data/<run>/.lock``, an exclusive ``fcntl.flock`` held for a command's life.

Every stage and ``withdraw.py`` take it before they read or write the run's artifacts, so a
withdrawal cannot rewrite ``packed`` under a running stage 4, and two stage processes cannot commit
into one run directory at once. A second process on the same run stops at once (exit 2) with one
line naming the holder's pid and command, which the holder writes into the lock file.

The lock is the kernel's: it goes away with the process (kill -9 included), so a stale lock file
never blocks a run. It is re-entrant within a process (a withdrawal that retrains the tokenizer runs
stage 3 inside itself). Ranks of ``smoke_train.py --nproc N`` inherit the launcher's open lock file
(``MINIDEEPSEEK_RUN_LOCK_FD``): flock belongs to the open file, so the ranks share the launcher's lock.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .config import ConfigError
from .fsio import printable

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
FD_ENV = "MINIDEEPSEEK_RUN_LOCK_FD"  # set by the rank launcher (train/launch.py) for its children
_HELD: dict[str, int] = {}  # resolved run dir -> fd, for this process


class RunLockedError(ConfigError):
    """Another live process holds the run's lock."""


def _key(run_dir: Path) -> str:
    return str(Path(run_dir).resolve())


def _open(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o644)


def holder(run_dir: Path) -> str:
    """What the lock file says about its holder ("pid N: command"), escaped; "" when unknown."""
    try:
        text = (Path(run_dir) / LOCK_NAME).read_bytes()[:400].decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return printable(text)


def _inherited(path: Path) -> int | None:
    """The lock fd a launcher passed down, if it is an open handle of this very lock file."""
    raw = os.environ.get(FD_ENV, "")
    if not raw.isdigit():
        return None
    fd = int(raw)
    try:
        st, want = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
        return None
    try:  # the launcher's lock: taking it again on the same open file succeeds at once
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return None
    return fd


def acquire(run_dir: Path, what: str | None = None) -> int:
    """Take ``run_dir``'s lock for the rest of this process (re-entrant); raise RunLockedError naming
    the holder when another process has it. Returns the lock's fd."""
    run_dir = Path(run_dir)
    key = _key(run_dir)
    if key in _HELD:
        return _HELD[key]
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    fd = _inherited(path)
    if fd is not None:
        _HELD[key] = fd
        return fd
    if int(os.environ.get("LOCAL_RANK", "0") or 0) > 0:
        # a rank > 0 of an external launcher (multi-node torchrun): its node's local rank 0 holds the
        # lock for the node, and only global rank 0 writes
        return -1
    try:
        fd = _open(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink: never lock (or write) through it
            raise ConfigError(f"{path} is a symbolic link; the run lock must be a regular file: remove the link, "
                              f"then rerun") from None
        if exc.filename is None:
            exc.filename = str(path)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        who = holder(run_dir) or "another process"
        raise RunLockedError(f"run directory {run_dir} is in use by {who}; wait for it to finish (or stop it), then "
                             f"rerun. Two processes must not write one run at once") from None
    os.ftruncate(fd, 0)
    cmd = what or " ".join(sys.argv)
    os.write(fd, f"pid {os.getpid()}: {cmd}\n".encode("utf-8", "backslashreplace"))
    _HELD[key] = fd
    log.debug("took the run lock %s", path)
    return fd


def release(run_dir: Path) -> None:
    """Drop this process's lock on ``run_dir`` (tests; a command keeps it until it exits)."""
    fd = _HELD.pop(_key(run_dir), None)
    if fd is not None:
        if str(fd) != os.environ.get(FD_ENV):  # an inherited lock belongs to the launcher
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def held_now() -> set[str]:
    """The run dirs this process holds (the CLI releases what a command took when it returns)."""
    return set(_HELD)


def release_keys(keys: set[str]) -> None:
    for key in keys:
        release(Path(key))


def held(run_dir: Path) -> bool:
    return _key(run_dir) in _HELD


@contextmanager
def hold(run_dir: Path) -> Iterator[None]:
    """The lock for a library call (a stage run from Python): taken unless this process has it, and
    released on exit only if taken here."""
    mine = not held(run_dir)
    acquire(run_dir)
    try:
        yield
    finally:
        if mine:
            release(run_dir)
