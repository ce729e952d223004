"""Pin every hub dataset of a recipe to the commit it is at now: ``revision: <40-hex SHA>`` per source.

    python -m minideepseek.sources.hub_pin configs/deepseek_v3_1b.yaml            # resolve, rewrite the file
    python -m minideepseek.sources.hub_pin configs/deepseek_v3_1b.yaml --check    # exit 1 if one is not pinned

Like ``python -m minideepseek.demo_corpus pin``, this is the deliberate step that accepts what upstream
serves now: run it (network needed), read the diff, commit the YAML. A pinned run then streams exactly
those commits; a dataset that changes upstream changes nothing until it is pinned again. Only the
``revision:`` lines change (comments and layout are kept); a ``revision:`` that is already a SHA is kept
unless ``--update``. Builders with URL ``data_files`` (``path: json``) have no commit and are skipped.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from ..config import ConfigError, load_yaml
from .hf import _SHA, hub_commit, is_hub_repo


def _block(lines: list[str], name: str) -> tuple[int, int, str]:
    """(first line, end line, key indent) of the ``- name: <name>`` entry under ``sources:``."""
    start = next((i for i, ln in enumerate(lines) if re.match(rf"\s*-\s+name:\s*['\"]?{re.escape(name)}['\"]?\s*(#.*)?$",
                                                               ln)), None)
    if start is None:
        raise ConfigError(f"hub_pin: no '- name: {name}' line in the file; pin it by hand")
    dash = lines[start].index("-")
    indent = " " * (dash + 2)
    end = start + 1
    while end < len(lines):
        ln = lines[end]
        if ln.strip() and not ln.lstrip().startswith("#") and (len(ln) - len(ln.lstrip())) <= dash:
            break
        end += 1
    return start, end, indent


def pin_text(text: str, sources: list[dict], resolve: Callable[[str, str | None], str],
             update: bool = False) -> tuple[str, list[str]]:
    """The YAML ``text`` with a commit SHA as each hub source's ``revision:``, and what changed."""
    lines = text.splitlines(keepends=True)
    notes = []
    for src in sources:
        if src.get("type") != "hf" or not is_hub_repo(str(src.get("path", ""))):
            continue
        rev = src.get("revision")
        if rev and _SHA.fullmatch(str(rev)) and not update:
            continue
        sha = resolve(src["path"], None if update or not rev else str(rev))
        if not _SHA.fullmatch(sha):
            raise ConfigError(f"hub_pin: {src['path']}: the hub answered {sha!r}, not a commit SHA")
        start, end, indent = _block(lines, src["name"])
        new = f"{indent}revision: \"{sha}\"\n"  # quoted: an all-digit (or digits+e) SHA is a YAML number
        at = next((i for i in range(start, end) if re.match(rf"{indent}revision:", lines[i])), None)
        if at is not None:
            lines[at] = new
        else:
            after = next((i for i in range(start, end) if re.match(rf"{indent}path:", lines[i])), start)
            lines.insert(after + 1, new)
        notes.append(f"{src['name']}: {src['path']} {rev or '(default branch)'} -> {sha}")
    return "".join(lines), notes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m minideepseek.sources.hub_pin", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("--check", action="store_true", help="only report hub sources without a commit SHA (exit 1)")
    p.add_argument("--update", action="store_true", help="re-resolve every hub source's default branch")
    args = p.parse_args(argv)
    try:
        path = Path(args.config)
        sources = load_yaml(path).get("sources") or []
        if args.check:
            loose = [s["name"] for s in sources if s.get("type") == "hf" and is_hub_repo(str(s.get("path", "")))
                     and not _SHA.fullmatch(str(s.get("revision") or ""))]
            for n in loose:
                print(f"not pinned: sources.{n}.revision is not a commit SHA", file=sys.stderr)
            return 1 if loose else 0
        text, notes = pin_text(path.read_text(encoding="utf-8"), sources, hub_commit, args.update)
        if load_yaml_text(text).get("sources") is None:
            raise ConfigError("hub_pin: the edited file no longer parses; nothing written")
        path.write_text(text, encoding="utf-8")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - network, hub: one line
        print(f"error: hub_pin: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for n in notes:
        print(n)
    print(f"pinned {len(notes)} hub source(s) in {path}" if notes else f"every hub source of {path} is pinned")
    return 0


def load_yaml_text(text: str) -> dict:
    import yaml

    return yaml.safe_load(text) or {}


if __name__ == "__main__":
    raise SystemExit(main())
