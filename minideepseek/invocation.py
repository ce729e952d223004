"""The user's own command line (an :class:`Invocation`, built from the script's arguments and passed down),
so every hint the pipeline prints (resume after a failure, rebuild a stale or corrupt upstream) repeats
the same ``--config``, every ``--set`` and ``--executor`` the user gave: a hint that drops
``--set run.name=x`` would send the user to another run."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

from . import pipeline

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def venv_python() -> str:
    """The interpreter a hint should name: the checkout's ``.venv/bin/python`` when it exists (what the README's
    commands create; a bare ``python`` there lacks the packages), else ``python``."""
    venv = os.path.join(_ROOT, ".venv", "bin", "python")
    if not os.path.exists(venv):
        return "python"
    return ".venv/bin/python" if os.path.abspath(os.getcwd()) == _ROOT else venv


def _cpu_stages() -> tuple[str, ...]:
    return tuple(s.name for s in pipeline.STAGES if s.executor)



@dataclass(frozen=True)
class Invocation:
    """A command as the user typed it: passed from the script's parsed arguments down to every place that
    prints a hint or re-derives a config hash from it (no process-global command line)."""

    config: str
    overrides: tuple[str, ...] = ()
    executor: str = "local"
    ray_address: str | None = None

    @classmethod
    def from_args(cls, args: Any) -> Invocation:
        return cls(config=str(getattr(args, "config", "") or ""),
                   overrides=tuple(getattr(args, "overrides", None) or ()),
                   executor=getattr(args, "executor", None) or "local",
                   ray_address=getattr(args, "ray_address", None))


Command = Invocation | str  # a library call may pass just the config path (no --set, local executor)


def as_invocation(command: Command) -> Invocation:
    return command if isinstance(command, Invocation) else Invocation(config=str(command or "CONFIG"))


def _common(inv: Invocation, stage: str) -> list[str]:
    out = ["--config", inv.config]
    for o in inv.overrides:
        out += ["--set", o]
    if inv.executor != "local" and stage in _cpu_stages():
        out += ["--executor", inv.executor]
        if inv.ray_address:
            out += ["--ray-address", inv.ray_address]
    return out


def stage_command(script: str, command: Command = "CONFIG") -> str:
    """``.venv/bin/python <script> --config C --set k=v ... [--executor ray]`` for the user's command
    (the checkout's venv interpreter when it exists: a pasted bare ``python`` lacks the packages)."""
    inv = as_invocation(command)
    stage = script.removesuffix(".py")
    return shlex.join([venv_python(), script, *_common(inv, stage)])


def pipeline_command(stage: str, command: Command = "CONFIG") -> str:
    inv = as_invocation(command)
    return shlex.join(["bash", "run_pipeline.sh", *_common(inv, stage), "--from", stage])


def rerun_hint(script: str, command: Command = "CONFIG") -> str:
    """The command that (re)builds ``script``'s artifact, as the user would type it."""
    inv = as_invocation(command)
    return f"`{stage_command(script, inv)}` (or `{pipeline_command(script.removesuffix('.py'), inv)}`)"
