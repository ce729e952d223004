"""Shared command-line plumbing for the stage scripts: --config, --set, --force, logging."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .config import ConfigError
from .fsio import UnsafePathError, printable

DEFAULT_CONFIG = "configs/demo.yaml"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Errors of the file system that are the user's environment, not a bug: one line naming the path.
_ENV_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EISDIR,
               errno.EMFILE, errno.ENAMETOOLONG}


class StrictFailure(RuntimeError):
    """A stage finished and wrote its artifact, but a target the config made binding (``sampler.strict``)
    was missed: exit 3, so run_pipeline.sh stops before the next stage."""


EXIT_STRICT = 3


def stage_parser(prog: str, description: str, force: bool = True) -> argparse.ArgumentParser:
    """--config/--set/--log-level, and --force for a script that builds an artifact (``force``)."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"YAML config (default: {DEFAULT_CONFIG})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set sampler.target_docs=2000 (repeatable)")
    if force:
        p.add_argument("--force", action="store_true", help="rebuild even if the artifact is up to date")
        p.add_argument("--restart", action="store_true",
                       help="discard the finished units a killed run of this stage left (default: resume from them)")
    p.add_argument("--log-level", default=os.environ.get("MINIDEEPSEEK_LOG", "INFO"), metavar="LEVEL",
                   help=f"logging level: {', '.join(LOG_LEVELS)} (default: INFO or $MINIDEEPSEEK_LOG)")
    return p


def add_executor_args(p: argparse.ArgumentParser) -> None:
    """--executor/--ray-address for the CPU stages (execution only: same artifacts either way)."""
    p.add_argument("--executor", default=os.environ.get("MINIDEEPSEEK_EXECUTOR", "local"), choices=["local", "ray"],
                   help="where parallel work runs: local processes (default) or a Ray cluster")
    p.add_argument("--ray-address", default=os.environ.get("MINIDEEPSEEK_RAY_ADDRESS") or None,
                   help="Ray cluster to join (e.g. auto, 10.0.0.1:6379, ray://head:10001); default: start a "
                        "local Ray instance for this run")


def build_stage_parser(prog: str, description: str, executor: bool = True) -> argparse.ArgumentParser:
    """A stage script's parser: --config/--set/--force/--log-level, and --executor/--ray-address for the
    CPU stages."""
    p = stage_parser(prog, description)
    if executor:
        add_executor_args(p)
    return p


def stage_main(parser: argparse.ArgumentParser, run: Any, argv: list[str] | None = None) -> int:
    """Every stage script's ``main``: parse, set up logging, run ``run(args)`` under ``run_cli``."""
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    return run_cli(run, args)


def stage_script(name: str, doc: str | None) -> tuple[Any, Any]:
    """``(build_parser, main)`` of the CPU stage script ``<name>.py``: the registry knows its entry and
    its summary line, so a stage script is its docstring and this call."""

    def run(args: argparse.Namespace) -> None:
        # imported here, not at the top: --help must not pay for datasets/torch/tokenizers
        from . import pipeline
        from .invocation import Invocation

        spec = pipeline.stage(name)
        cfg, man = run_stage(args, name, lambda cfg, up, ex: pipeline.entry(spec)(
            cfg, up, Invocation.from_args(args), force=args.force, executor=ex, restart=args.restart))
        print(pipeline.summary_line(spec)(cfg, man))
        gate = pipeline.strict_gate(spec)
        why = gate(cfg, man) if gate is not None else None
        if why:
            raise StrictFailure(why)

    def build_parser() -> argparse.ArgumentParser:
        return build_stage_parser(f"{name}.py", doc or "")

    def main(argv: list[str] | None = None) -> int:
        return stage_main(build_parser(), run, argv)

    return build_parser, main


def run_stage(args: argparse.Namespace, name: str, call: Any) -> tuple[Any, dict[str, Any]]:
    """A CPU stage's body: its config from the once-parsed file, then ``call(cfg, upstream_hashes,
    executor)`` inside the executor the command asked for; returns (config, manifest)."""
    plan, cfg = stage_plan(args, name)
    with open_executor(args) as ex:
        return cfg, call(cfg, plan.upstream_hashes(name), ex)


def stage_plan(args: argparse.Namespace, name: str, quiet: bool = False) -> tuple[Any, Any]:
    """(plan, config) of stage ``name`` for this command: the config file is parsed once, and the plan
    also gives the config hashes the stage's upstream artifacts must carry."""
    from . import runlock
    from .pipeline import Plan

    plan = Plan(args.config, args.overrides)
    cfg = plan.config(name, quiet=quiet)
    runlock.acquire(cfg.run.run_dir)  # one command per run directory (released when run_cli returns)
    return plan, cfg


@contextmanager
def open_executor(args: argparse.Namespace) -> Iterator[Any]:
    from .executor import ExecutorSpec, make_executor

    ex = make_executor(ExecutorSpec(getattr(args, "executor", "local"), getattr(args, "ray_address", None)))
    try:
        yield ex
    finally:
        ex.shutdown()


def setup_logging(level: str = "INFO") -> None:
    """Configure logging once; an unknown level is a one-line error (exit 2), not a traceback."""
    name = str(level).upper()
    if name not in LOG_LEVELS:
        print(f"error: --log-level {level!r} is not a logging level; use one of {', '.join(LOG_LEVELS)}",
              file=sys.stderr)
        raise SystemExit(2)
    handler = _BarAwareHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=name, handlers=[handler], force=True)


class _BarAwareHandler(logging.StreamHandler):
    """Log lines printed *above* a running tqdm bar (``tqdm.write``), not glued onto the bar's line: a
    WARNING in the middle of stage 1's sampling bar was easy to miss."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            if getattr(tqdm, "_instances", None):
                tqdm.write(self.format(record), file=self.stream)
                return
        except Exception:  # noqa: BLE001 - logging must never fail because of the bar
            pass
        super().emit(record)


def run_cli(fn, args: argparse.Namespace, validate: bool = True) -> int:  # type: ignore[no-untyped-def]
    """Run a stage, turning config/input errors into one clear line and exit code 2, and an unwritable
    or full output location into one line naming the path (exit 1).

    Before anything runs, every stage section of the config file is validated (``validate``). ``fn`` passes
    the command line on (``Invocation.from_args``) so hints repeat it."""
    from . import runlock

    locks = runlock.held_now()
    try:
        return _run_cli(fn, args, validate)
    finally:
        runlock.release_keys(runlock.held_now() - locks)  # the run locks this command took


def inv_script(args: argparse.Namespace) -> str | None:
    """The script this process runs (``mix_sampler.py``), for the interrupt hint; None for non-stage tools."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.endswith(".py") and getattr(args, "config", None) else None


def _run_cli(fn, args: argparse.Namespace, validate: bool) -> int:  # type: ignore[no-untyped-def]
    try:
        if validate and getattr(args, "config", None):
            from .validate import validate_all

            validate_all(args.config, args.overrides)
        fn(args)
    except (ConfigError, UnsafePathError) as exc:
        # once: the log handler and this line both go to stderr, so logging it too printed it twice. One
        # line, control characters escaped: a message quotes paths and values from files and configs
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except StrictFailure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_STRICT
    except KeyboardInterrupt:
        # one line, not a traceback: the stage committed nothing (no manifest), its finished units stay in its
        # temp dir and the same command resumes from them; run_pipeline.sh prints its own resume line
        from .invocation import Invocation, stage_command

        if not os.environ.get("MINIDEEPSEEK_PIPELINE"):  # under run_pipeline.sh, its own line says it
            script = inv_script(args)
            again = stage_command(script, Invocation.from_args(args)) if script else "the same command"
            print(f"\ninterrupted: nothing was committed for this stage; rerun `{again}` to resume it from its "
                  "finished units (add --restart to start it over; finished stages are kept and skipped)",
                  file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in _ENV_ERRNOS:
            raise
        where = f" {printable(str(exc.filename))}" if exc.filename else ""
        print(f"error: cannot write{where}: {exc.strerror or exc} (errno {errno.errorcode.get(exc.errno, exc.errno)}); "
              "free space or fix the permissions of that path, or point run.data_dir/run.reports_dir elsewhere",
              file=sys.stderr)
        return 1
    except Exception as exc:  # an Arrow artifact that fails to parse and was not checksummed (run.verify=size)
        msg = str(exc)
        if type(exc).__module__.startswith("pyarrow") and ("flatbuffers" in msg or "IPC" in msg):
            print(f"error: an Arrow artifact file cannot be read ({type(exc).__name__}: {msg.splitlines()[0]}); it "
                  "is corrupt: rerun the stage that wrote it with --force (run.verify=sha256 names the file)",
                  file=sys.stderr)
            return 2
        raise
    return 0
