"""Crash-safe file writes and checksums: a file is either its old version or its complete new one.

Writes never go through a symlink: the content goes into a fresh temp file beside the target, opened
with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a link or file planted under the temp name makes the open
fail instead of writing where it points), and ``os.replace`` then swaps the *name*: a symlink at the
target is replaced by the file, never followed. Paths read from a manifest or a ``state.json`` go
through ``inside`` before use, so a crafted ``../`` or absolute entry cannot point a reader (or a
checksum) outside its artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO


class UnsafePathError(ValueError):
    """A path from a file (manifest, state.json, ticket log) leaves the directory it must stay in."""


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def inside(base: Path, rel: str) -> Path:
    """``base / rel`` for a relative path that stays inside ``base`` once resolved (symlinks included);
    raises UnsafePathError for an absolute path, a ``..`` component, a NUL, or a link that leads out."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or rel.startswith(("/", "\\")) or Path(rel).is_absolute():
        raise UnsafePathError(f"{printable(str(rel))!s} is not a relative path inside {base}")
    parts = Path(rel).parts
    if any(p in ("..", "") for p in parts):
        raise UnsafePathError(f"{printable(rel)} leaves {base} ('..')")
    root = Path(base).resolve()
    target = (Path(base) / rel).resolve()
    if target != root and root not in target.parents:
        raise UnsafePathError(f"{printable(rel)} resolves to {target}, outside {base} (a symlink?)")
    return Path(base) / rel


def _open_new(path: Path) -> int:
    """A new file for writing; refuses to follow or reuse anything already at ``path``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o644)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a fresh temp file beside ``path``; on a clean exit the temp file replaces
    ``path`` (os.replace), on an error it is removed. Readers never see half a file, and a symlink at
    ``path`` (or at the temp name) is never written through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    if tmp.is_symlink() or tmp.exists():  # our own pid's leftover (a crash), or something planted
        tmp.unlink()
    fd = _open_new(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_writer(path) as fh:
        fh.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON via a temp file + os.replace, so readers never see half a file."""
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def copy_atomic(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` the same way (temp file + os.replace, never through a link at ``dst``)."""
    with atomic_writer(dst) as out, open(src, "rb") as fin:
        shutil.copyfileobj(fin, out, 1 << 20)


def open_append_nofollow(path: Path) -> Any:
    """A binary append handle that refuses a symlink at ``path`` (the ticket log)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.fdopen(os.open(path, flags, 0o644), "ab")


# C0/C1 control characters, DEL and the Unicode line/paragraph separators: what must never reach a
# terminal or a one-line error unescaped (an ESC sequence can rewrite the screen; a newline forges lines).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with control characters (and lone surrogates) escaped as ``\\xNN``/``\\uNNNN``."""
    def esc(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return _UNPRINTABLE.sub(esc, text)
