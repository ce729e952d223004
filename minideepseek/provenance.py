"""What a manifest records about where and how an artifact was made: package versions, git commit,
peak memory."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

_PACKAGES = ("datasets", "datasketch", "tokenizers", "pyarrow", "numpy", "torch", "trafilatura", "resiliparse")


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


def peak_rss_mb() -> float:
    """Peak resident set size of this process (and waited-for children), in MiB."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)  # ru_maxrss is KiB on Linux
