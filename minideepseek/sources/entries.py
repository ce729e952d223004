"""Which files under a local source's directory may be read, and the names reports give them.

A data folder is input, and input can be hostile: a symlink ``notes.txt -> /proc/self/environ`` would
put the process environment (tokens included) into ``rejects.jsonl``; a FIFO would block the stage
forever; a device or a procfs/sysfs file is kernel state, never data. So every entry the glob finds is
checked before it is hashed or read:

- it must resolve inside the source directory, unless the source sets ``follow_symlinks: true``
  (a link that stays inside is fine either way);
- what it resolves to must be a regular file (not a FIFO, socket, character or block device) on a
  real file system (not proc, sysfs, devtmpfs, debugfs, ... per ``/proc/self/mounts``).

An entry that fails is not read and is reported as a file-level problem with the reason (status
``skipped``). The check is repeated right before the file is read, with its device and inode
compared, so a file swapped for a link after listing is skipped too.

File names are bytes on Linux; one that is not UTF-8 is read normally and *named* with its
undecodable bytes escaped (``caf\\xe9.txt``), in reports, ids and rejects alike.
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# Kernel and pseudo file systems: their "files" are process or device state, never a corpus.
VIRTUAL_FS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "cgroup",
                        "cgroup2", "configfs", "fusectl", "bpf", "pstore", "efivarfs", "mqueue", "binfmt_misc",
                        "autofs", "hugetlbfs", "rpc_pipefs", "nsfs"})


def display(name: str | os.PathLike[str]) -> str:
    """A file name as text: undecodable bytes (surrogate-escaped by the OS layer) become ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


@functools.lru_cache(maxsize=1)
def _mounts() -> tuple[tuple[str, str], ...]:
    """(mount point, fs type), longest mount point first."""
    out = []
    try:
        with open("/proc/self/mounts", "rb") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3:
                    point = parts[1].decode("utf-8", "surrogateescape")
                    for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
                        point = point.replace(esc, ch)
                    out.append((point, parts[2].decode("ascii", "replace")))
    except OSError:  # not Linux: fall back to the well-known mount points
        out = [("/proc", "proc"), ("/sys", "sysfs"), ("/dev", "devtmpfs")]
    return tuple(sorted(out, key=lambda m: len(m[0]), reverse=True))


def fs_type(real: Path) -> str:
    """The file system type of the mount holding ``real`` (an absolute, resolved path)."""
    s = str(real)
    for point, kind in _mounts():
        if s == point or s.startswith(point.rstrip("/") + "/"):
            return kind
    return ""


def _special(mode: int) -> str | None:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


@dataclass(frozen=True)
class Entry:
    """One file a glob found: where it is, its display name, and why it is skipped ("" = readable)."""

    path: Path
    rel: str
    kind: str
    problem: str = ""
    ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the regular file that was checked


def check(path: Path, root_real: Path, follow_symlinks: bool) -> tuple[str, tuple[int, int] | None]:
    """("", (dev, ino)) for a readable regular file, else (why it is skipped, None)."""
    try:
        real = Path(os.path.realpath(path))
    except (OSError, RuntimeError) as exc:  # a link loop
        return f"cannot be resolved ({exc.__class__.__name__}: a symbolic link loop?)", None
    if not follow_symlinks and real != root_real and root_real not in real.parents:
        return (f"symbolic link to {display(real)}, outside the source directory; not read (set "
                f"follow_symlinks: true on the source to read links that leave it)"), None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"broken symbolic link (to {display(real)})", None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})", None
    special = _special(st.st_mode)
    if special:
        via = f" (via a link to {display(real)})" if path.is_symlink() else ""
        return f"{special}{via}; only regular files are read", None
    fs = fs_type(real)
    if fs in VIRTUAL_FS:
        return f"{display(real)} is on a {fs} file system (process or kernel state, not data); not read", None
    return "", (st.st_dev, st.st_ino)


def recheck(entry: Entry, root_real: Path, follow_symlinks: bool) -> str:
    """Right before reading: the same check, and the file must still be the one that was listed."""
    problem, ident = check(entry.path, root_real, follow_symlinks)
    if problem:
        return problem
    if ident != entry.ident:
        return "replaced since the source was listed (another file now has its name); not read"
    return ""
