"""Shared command-line plumbing for the stage scripts: --config, --set, --force, logging."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .config import ConfigError

DEFAULT_CONFIG = "configs/demo.yaml"


def stage_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"YAML config (default: {DEFAULT_CONFIG})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set sampler.target_docs=2000 (repeatable)")
    p.add_argument("--force", action="store_true", help="rebuild even if the artifact is up to date")
    p.add_argument("--log-level", default=os.environ.get("MINIDEEPSEEK_LOG", "INFO"))
    return p


def add_executor_args(p: argparse.ArgumentParser) -> None:
    """--executor/--ray-address for the CPU stages (execution only: same artifacts either way)."""
    p.add_argument("--executor", default=os.environ.get("MINIDEEPSEEK_EXECUTOR", "local"), choices=["local", "ray"],
                   help="where parallel work runs: local processes (default) or a Ray cluster")
    p.add_argument("--ray-address", default=os.environ.get("MINIDEEPSEEK_RAY_ADDRESS") or None,
                   help="Ray cluster to join (e.g. auto, 10.0.0.1:6379, ray://head:10001); default: start a "
                        "local Ray instance for this run")


@contextmanager
def open_executor(args: argparse.Namespace) -> Iterator[Any]:
    from .executor import ExecutorSpec, make_executor

    ex = make_executor(ExecutorSpec(getattr(args, "executor", "local"), getattr(args, "ray_address", None)))
    try:
        yield ex
    finally:
        ex.shutdown()


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr, force=True)


def run_cli(fn, args: argparse.Namespace) -> int:  # type: ignore[no-untyped-def]
    """Run a stage, turning config/input errors into one clear line and exit code 2."""
    try:
        fn(args)
    except ConfigError as exc:
        # once: the log handler and this line both go to stderr, so logging it too printed it twice
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
