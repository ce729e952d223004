"""Does this interpreter's environment hold exactly what requirements.lock pins? (stdlib only)

    .venv/bin/python scripts/check_venv.py requirements.lock    # exit 0: same packages and versions; 1: not

``scripts/ensure_venv.sh`` runs it before reusing a venv whose stamp says it was built from the current
lock: a package installed, removed, upgraded or downgraded by hand since then makes it rebuild the venv
from scratch instead of trusting it. It compares distribution names and versions (what pip records);
it does not re-hash installed files (a user who can rewrite the venv's files can rewrite this script too).
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
import sysconfig
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def canon(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(lock: Path) -> dict[str, str]:
    out = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = _PIN.match(line)
        if m:
            out[canon(m.group(1))] = m.group(2)
    return out


def installed() -> dict[str, str]:
    """Distributions installed in this environment's site-packages (not whatever else is on sys.path:
    setuptools, once imported, puts its vendored packages there)."""
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    out: dict[str, str] = {}
    for d in md.distributions(path=paths):
        name = d.metadata["Name"]
        if name:
            out[canon(name)] = d.version
    return out


def differences(lock: dict[str, str], have: dict[str, str]) -> list[str]:
    """Human-readable differences between the lock and what is installed (empty: identical)."""
    out = [f"missing {n}=={v}" for n, v in sorted(lock.items()) if n not in have]
    out += [f"{n} is {have[n]}, the lock pins {v}" for n, v in sorted(lock.items())
            if n in have and have[n] != v and have[n].split("+")[0] != v]
    out += [f"not in the lock: {n}=={v}" for n, v in sorted(have.items()) if n not in lock]
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    diff = differences(pinned(Path(args[0])), installed())
    for d in diff[:20]:
        print(f"check_venv: {d}", file=sys.stderr)
    if len(diff) > 20:
        print(f"check_venv: ... and {len(diff) - 20} more", file=sys.stderr)
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
