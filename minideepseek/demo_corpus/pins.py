"""Expected hashes of the demo corpus's downloads, kept in the repo (``expected_hashes.json``).

A changed upstream file must not silently change the demo's text (it happened once: a Debian
update moved a domain's character count between two runs). So every downloaded file is checked,
right after download and each time a cached copy is reused, against this list:

- PyPI (pinned ``name==version``): the file's sha256 must be the recorded one. A mismatch is an
  error (:class:`IntegrityError`): the registry served, or the cache holds, different bytes.
- Debian (``apt-get download NAME`` gets whatever version the archive has now): the same version
  with another sha256 is an error; another version is *drift*, a warning recorded in the corpus
  manifest and the run summary (``demo_corpus.strict: true`` makes it an error).
- A package of the corpus that the list does not name is *unpinned*: a warning of its own (strict:
  an error), so a package added to the corpus without re-pinning is reported, never trusted silently.

``.venv/bin/python -m minideepseek.demo_corpus pin`` rewrites the list from the cache's own records (the
corpus manifest, each file re-hashed first): the deliberate way to accept new versions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..invocation import venv_python

EXPECTED_FILE = Path(__file__).with_name("expected_hashes.json")
ACCEPT = ("to accept a new upstream version deliberately, rebuild and run "
          "`.venv/bin/python -m minideepseek.demo_corpus pin`, "
          "then commit minideepseek/demo_corpus/expected_hashes.json")


class IntegrityError(ConfigError):
    """A downloaded or cached file does not have its expected sha256."""


@dataclass(frozen=True)
class Expected:
    """``pypi``: ``"name==version" -> {file name: sha256}``; ``debian``: ``name -> {version, file, sha256}``."""

    pypi: dict[str, dict[str, str]] = field(default_factory=dict)
    debian: dict[str, dict[str, str]] = field(default_factory=dict)
    path: str = str(EXPECTED_FILE)
    # ``"v<builder version>" -> component -> {version, sha256, n_docs}``: the sha256 of the records a
    # build wrote for the component (its ``content_sha256``), so a *reused* build is checked against
    # the repo too, not only against its own manifest (which whoever altered the cache can rewrite)
    content: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path = EXPECTED_FILE) -> Expected:
        if not path.is_file():
            return cls(path=str(path))
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(pypi=data.get("pypi", {}), debian=data.get("debian", {}), content=data.get("content", {}),
                   path=str(path))

    def check_content(self, builder: int, component: str, version: str, sha256: str, where: str) -> list[str]:
        """Warnings for one component's records in a reused build; IntegrityError when the repo pins
        this component at this version with another sha256."""
        pin = self.content.get(f"v{builder}", {}).get(component)
        if pin is None:
            return [f"unpinned: the built records of component {component} ({version}, sha256 {sha256}) are not "
                    f"in {self.path}; they were not verified. Run `python -m minideepseek.demo_corpus pin` to record "
                    f"them"]
        if str(pin.get("version")) != str(version):
            return [f"drift: component {component} was built from {version}, the repo pins its records for "
                    f"{pin.get('version')}; the demo text may differ from the pinned build"]
        if pin.get("sha256") != sha256:
            raise IntegrityError(_mismatch(where, f"the built records of component {component} ({version})",
                                           str(pin.get("sha256")), sha256))
        return []

    def check(self, kind: str, name: str, version: str, file_name: str, sha256: str, where: str) -> list[str]:
        """Warnings (drift, unpinned) for one package file; raises :class:`IntegrityError` on a mismatch.

        ``where`` is the file's path, named in the messages so the reader can delete or inspect it."""
        if kind == "pypi":
            files = self.pypi.get(f"{name}=={version}")
            if files is None:
                return [f"unpinned: PyPI {name}=={version} ({file_name}, sha256 {sha256}) is not in {self.path}; "
                        f"it was not verified. Run `{venv_python()} -m minideepseek.demo_corpus pin` to record it"]
            if file_name not in files:
                raise IntegrityError(
                    f"{where}: no expected sha256 for this file of PyPI {name}=={version} (expected one of "
                    f"{sorted(files)}), found sha256 {sha256}; pip picked another file (another platform?); {ACCEPT}")
            if files[file_name] != sha256:
                raise IntegrityError(_mismatch(where, f"PyPI {name}=={version}", files[file_name], sha256))
            return []
        if kind == "debian":
            exp = self.debian.get(name)
            if exp is None:
                return [f"unpinned: Debian {name} {version} (sha256 {sha256}) is not in {self.path}; it was not "
                        f"verified. Run `{venv_python()} -m minideepseek.demo_corpus pin` to record it"]
            if exp["version"] != version:
                return [f"drift: Debian {name}: expected version {exp['version']} (sha256 {exp['sha256']}), the "
                        f"archive served {version} (sha256 {sha256}); the demo text may differ from the pinned "
                        f"build. {ACCEPT[0].upper() + ACCEPT[1:]}"]
            if exp["sha256"] != sha256:
                raise IntegrityError(_mismatch(where, f"Debian {name} {version}", exp["sha256"], sha256))
            return []
        return []


def _mismatch(where: str, what: str, expected: str, found: str) -> str:
    return (f"{where}: sha256 mismatch for {what}: expected {expected}, found {found}. The file was altered "
            f"(in the cache or upstream): delete it to download it again; {ACCEPT}")


def pin_from_manifest(manifest: dict[str, Any], downloads: Path, old: Expected,
                      sources: list[tuple[str, str, str | None]]) -> tuple[dict[str, Any], list[str]]:
    """The new expected list from a corpus manifest's component records, and notes for the reader.

    Every recorded file still in ``downloads`` is re-hashed first (a tampered cache is never pinned).
    ``sources`` is the corpus's ``(kind, name, version)`` list: a package of it that the build did not
    record (a shortfall, another tier) keeps its old entry if it had one, and is named in the notes."""
    from .fetch import sha256_file

    pypi: dict[str, dict[str, str]] = {}
    debian: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    for c in manifest.get("components", []):
        if c.get("status") != "ok" or c.get("source") not in ("pypi", "debian") or not c.get("file"):
            continue
        if "/" in c["file"] or "\\" in c["file"] or c["file"].startswith("."):
            raise IntegrityError(f"the build records the file name {c['file']!r}, not a package file name; the cache "
                                 f"was altered: delete it and rebuild before pinning")
        sub = "pypi" if c["source"] == "pypi" else "debian"
        path = Path(c["path"]) if c.get("path") else None
        root = downloads.resolve()
        if path is not None and root not in path.resolve().parents:  # a manifest path outside the downloads
            path = None  # is never read: the file is looked up in the cache by name instead
        if path is None or not path.is_file():
            path = next(iter(sorted(downloads.glob(f"{sub}/**/{c['file']}"))), None)
        if path is not None and path.is_file():
            found = sha256_file(path)
            if found != c["sha256"]:
                raise IntegrityError(f"{path}: its sha256 {found} differs from the build's record {c['sha256']}; "
                                     f"the cache was altered after the build: delete it and rebuild before pinning")
        if sub == "pypi":
            pypi.setdefault(f"{c['package']}=={c['version']}", {})[c["file"]] = c["sha256"]
        else:
            debian[c["package"]] = {"version": c["version"], "file": c["file"], "sha256": c["sha256"]}
    for kind, name, version in sources:
        if kind == "pypi" and f"{name}=={version}" not in pypi:
            if f"{name}=={version}" in old.pypi:
                pypi[f"{name}=={version}"] = old.pypi[f"{name}=={version}"]
                notes.append(f"kept the old entry for PyPI {name}=={version}: not in this build")
            else:
                notes.append(f"NOT PINNED: PyPI {name}=={version} is in the corpus but not in this build "
                             f"(shortfall or tier left out); build it, then pin again")
        if kind == "debian" and name not in debian:
            if name in old.debian:
                debian[name] = old.debian[name]
                notes.append(f"kept the old entry for Debian {name}: not in this build")
            else:
                notes.append(f"NOT PINNED: Debian {name} is in the corpus but not in this build "
                             f"(shortfall or tier left out); build it, then pin again")
    content = {k: dict(v) for k, v in old.content.items()}
    mine = content.setdefault(f"v{manifest.get('builder_version')}", {})
    for c in manifest.get("components", []):  # the caller checked the build's records against its files
        if c.get("status") == "ok" and c.get("content_sha256"):
            mine[c["component"]] = {"version": str(c["version"]), "sha256": c["content_sha256"],
                                    "n_docs": c.get("n_docs")}
    content = {k: dict(sorted(v.items())) for k, v in sorted(content.items())}
    data = {"comment": "Expected sha256 of every demo-corpus download, and of the records each component's "
                       "build writes (content, per builder version). Written by `.venv/bin/python -m "
                       "minideepseek.demo_corpus pin`; checked by minideepseek/demo_corpus/pins.py.",
            "pypi": dict(sorted(pypi.items())), "debian": dict(sorted(debian.items())), "content": content}
    return data, notes
