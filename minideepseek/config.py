"""YAML configs -> frozen, validated dataclasses.

Every stage reads one YAML file (``configs/*.yaml``) with one section per concern (``run``,
``sources``, ``sampler``, ...). ``--set a.b=c`` overrides any key; values are parsed as YAML so
``--set sampler.target_docs=2000`` gives an int. Unknown keys and bad values raise
:class:`ConfigError` with a message that names the fix, before any work starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A user-facing configuration error; the message says what to change."""


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} not found; pass --config configs/demo.yaml or another file in configs/")
    with p.open(encoding="utf-8") as fh:
        try:
            data = yaml.safe_load(fh) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p} must hold a mapping of sections (run:, sources:, sampler:, ...)")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides. List items are addressed by index or by ``name``:
    ``sources.code.weight=0.3`` or ``sources.1.weight=0.3``."""
    data = json.loads(json.dumps(data))  # deep copy, plain types only
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set sampler.target_docs=2000")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        node: Any = data
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                idx = _list_index(node, part, key)
                if last:
                    node[idx] = value
                else:
                    node = node[idx]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ConfigError(f"--set {key}: {'.'.join(parts[:i])} is a value, not a section")
    return data


def _list_index(node: list[Any], part: str, key: str) -> int:
    if part.isdigit() and int(part) < len(node):
        return int(part)
    for i, elem in enumerate(node):
        if isinstance(elem, dict) and elem.get("name") == part:
            return i
    names = [e.get("name") for e in node if isinstance(e, dict)]
    raise ConfigError(f"--set {key}: no list item {part!r}; use an index 0..{len(node) - 1} or a name in {names}")


def build(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass ``cls`` from a mapping, recursively, rejecting unknown keys.

    After construction the dataclass's own ``__post_init__`` validates values."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in {where}; valid keys: {sorted(fields)}")
    check = getattr(cls, "check_keys", None)
    if check is not None:  # a dataclass may restrict which keys apply together (e.g. per source type)
        check(data, where)
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, f"{where}.{name}")
    missing = [
        n for n, f in fields.items()
        if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{where} is missing required key(s) {missing}")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _describe(tp: Any) -> str:
    """A type as the error message names it (``an integer``, ``one of ['all']``)."""
    if get_origin(tp) is typing.Literal:
        return f"one of {list(get_args(tp))}"
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    return names.get(tp, "a list" if get_origin(tp) in (tuple, list) else getattr(tp, "__name__", str(tp)))


def _coerce(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            return None
        errors = []
        for arg in args:
            try:
                return _coerce(arg, value, where)
            except ConfigError as exc:
                errors.append(str(exc))
        if len(errors) == 1:
            raise ConfigError(errors[0])
        raise ConfigError(f"{where} = {value!r}: expected " + " or ".join(_describe(a) for a in args))
    if origin is typing.Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{where} = {value!r} is not allowed; choose one of {list(allowed)}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where} must be a list, got {value!r}")
        args = get_args(tp) or (Any,)
        if origin is tuple and len(args) > 1 and args[-1] is not Ellipsis:  # fixed shape, e.g. (n, threshold)
            if len(value) != len(args):
                raise ConfigError(f"{where} must have {len(args)} items, got {value!r}")
            return tuple(_coerce(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        return tuple(_coerce(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return str(value)
    raise ConfigError(f"{where}: unsupported config type {tp}")


def to_plain(obj: Any) -> Any:
    """Dataclass tree -> JSON-able plain types (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _identity(obj: Any) -> Any:
    """Like to_plain, minus fields a dataclass lists in ``EXEC_ONLY`` (worker counts, batch sizes):
    they change how a stage runs, not what it produces, so they must not make it stale."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        skip = set(getattr(obj, "EXEC_ONLY", ()))
        # a key added later whose default changes nothing (``HASH_OMIT_DEFAULT``) is hashed only when set
        # otherwise, so existing runs do not turn stale the day it lands
        skip |= {n for n in getattr(obj, "HASH_OMIT_DEFAULT", ())
                 if getattr(obj, n) == next(f.default for f in dataclasses.fields(obj) if f.name == n)}
        return {f.name: _identity(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in skip}
    if isinstance(obj, (list, tuple)):
        return [_identity(v) for v in obj]
    return to_plain(obj)


def config_hash(obj: Any) -> str:
    """Stable hash of what a config determines about the output (sorted-key JSON)."""
    blob = json.dumps(_identity(obj), sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def require(cond: bool, msg: str) -> None:
    """Validation helper for ``__post_init__``: raise ConfigError(msg) unless cond."""
    if not cond:
        raise ConfigError(msg)


_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def is_path_name(value: object) -> bool:
    """A name that becomes one path component (a run, a source): letters, digits, ``_``, ``-``, ``.``,
    and not made of dots only (``.``/``..`` would name the directory itself or its parent)."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and value.strip(".") != ""
