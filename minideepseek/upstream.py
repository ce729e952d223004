"""Reading an artifact this process did not write: a stage's upstream, or a client's (withdrawal,
export, dashboard) input.

``require_upstream`` is what a stage calls before it reads its upstream: it exists, its own upstreams did
not move on, it comes from the config the user's command gives now, its files match their checksums.
``verify_before_use`` is the client's version: every listed artifact that exists is checked file by file.
Both name the command that rebuilds what they refuse, in the user's own words (minideepseek/invocation.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .artifact import MANIFEST, Manifest, StaleInputError, read_manifest, verify_artifact
from .config import ConfigError

if TYPE_CHECKING:
    from .invocation import Command


def require_upstream(run_dir: Path, artifact: str, producer: str, expected_config_hash: str | None = None,
                     command: Command = "CONFIG", verify: str | None = None,
                     chain: dict[str, str] | None = None) -> dict[str, Any]:
    """Return an upstream artifact's manifest after checking it can be used, or raise StaleInputError
    naming the command to run: it exists, its own upstreams did not move on, it was built from the
    config the user's command now gives (``expected_config_hash``; ``chain`` maps further upstream
    artifacts to the config hash they must have, e.g. ``mixed_raw`` for the tokenizer), and every data
    file matches its manifest checksum (``verify``). Hints repeat the user's own command line
    (``command``: the script's parsed command line, or a config path for a library call)."""
    from .invocation import rerun_hint

    adir = run_dir / artifact
    hint = rerun_hint(producer, command)
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
        chain = _chain_for(command)
    for dep_name in _upstream_closure(run_dir, man):
        want = chain.get(dep_name)
        dep = read_manifest(run_dir / dep_name)
        if want is not None and dep is not None and dep.get("config_hash") != want:
            producer_of = dep.get("stage", dep_name)
            raise StaleInputError(
                f"upstream artifact {adir} was built on {run_dir / dep_name}, which comes from a different "
                f"{producer_of} config than your command now gives; rebuild from there: "
                f"{rerun_hint(producer_of + '.py', command)}")
    verify_artifact(adir, man, verify or _verify_mode(command), rebuild=hint)
    return man


def verify_before_use(run_dir: Path, artifacts: tuple[str, ...] | list[str], command: Command = "CONFIG",
                      required: tuple[str, ...] = ()) -> dict[str, Manifest]:
    """Manifests of the run's ``artifacts`` that exist, each checked file by file against its manifest
    (``run.verify`` of ``command``, sha256 by default) before a client (withdrawal, export,
    dashboard) reads it. A damaged artifact raises CorruptArtifactError: one line naming the artifact,
    the file and the command that rebuilds it. ``required`` ones that are missing raise StaleInputError."""
    from . import pipeline
    from .invocation import rerun_hint

    out: dict[str, Manifest] = {}
    mode = _verify_mode(command)
    for name in artifacts:
        adir = Path(run_dir) / name
        man = read_manifest(adir)
        producer = pipeline.stage(name).script
        if man is None:
            if name in required:
                raise StaleInputError(f"{adir} is missing or incomplete (no {MANIFEST}); run "
                                      f"{rerun_hint(producer, command)} first")
            continue
        verify_artifact(adir, man, mode, rebuild=rerun_hint(producer, command))
        out[name] = man
    return out


_CHAIN_CACHE: dict[tuple, dict[str, str]] = {}


def _chain_for(command: Command) -> dict[str, str]:
    """Config hash per artifact under the user's command (empty when its config cannot be read, e.g. a
    library call's placeholder): lets a stage refuse an upstream whose own upstream came from another config."""
    from .invocation import as_invocation

    inv = as_invocation(command)
    if not inv.config or not Path(inv.config).is_file():
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


def _verify_mode(command: Command) -> str:
    """``run.verify`` of the user's command (sha256 when its config cannot be read)."""
    from .invocation import as_invocation

    inv = as_invocation(command)
    if not inv.config or not Path(inv.config).is_file():
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
