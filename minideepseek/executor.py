"""Where a stage's parallel work runs: ``local`` (this machine's process pool) or ``ray`` (a Ray
cluster, or a local Ray instance started for the run).

Both give the same artifacts: every parallel step is a pure function over a batch whose results
are collected in submission order, so the output cannot depend on which worker ran what or when.
The stage code asks the executor for a *pool* (``submit(fn, arg) -> future``, ``_max_workers``)
where it already used a ``ProcessPoolExecutor`` (stage 1's extraction/filters, stage 4's
tokenization), or for an ordered ``map`` of tasks (stage 2's MinHash phases, stage 3's sample
collection).

Ray needs the artifacts on storage every node sees at the same path (NFS, a mounted bucket): tasks
read their inputs and write their outputs there, and only small results travel through Ray's
object store. Workers import this package from the driver's checkout (``PYTHONPATH`` is set in the
job's runtime environment), so the repository must sit at the same path on every node too.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import secrets
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ConfigError

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ExecutorSpec:
    """``--executor`` / ``--ray-address`` (execution only: never part of a config hash)."""

    kind: str = "local"
    address: str | None = None  # ray: "auto", "ray://head:10001", "10.0.0.1:6379"; None starts a local instance
    num_cpus: int | None = None  # ray, local instance only: CPUs it may use (default: all)

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ConfigError(f"--executor {self.kind!r}: use one of {list(EXECUTORS)}")
        if self.address and self.kind != "ray":
            raise ConfigError("--ray-address needs --executor ray")


def ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the parent: the terminal sends SIGINT to the whole process group, and
    each worker would otherwise print its own KeyboardInterrupt traceback before the parent's one line."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalExecutor:
    kind = "local"

    def pool(self, workers: int) -> ProcessPoolExecutor | None:
        """A process pool of ``workers`` (None for 1: run in this process). forkserver: workers start
        clean (no inherited tokenizer threads, no copied source lists)."""
        if workers <= 1:
            return None
        return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("forkserver"),
                                   initializer=ignore_sigint)

    def map(self, fn: Callable[[Any], Any], args: Iterable[Any], workers: int = 1, window: int = 0) -> Iterator[Any]:
        """``fn`` over ``args`` in order (at most ``window`` in flight; 0 = 2 x workers)."""
        pool = self.pool(workers)
        if pool is None:
            yield from map(fn, args)
            return
        try:
            yield from _windowed((lambda a: pool.submit(fn, a)), (lambda f: f.result()), args, window or 2 * workers)
        finally:
            pool.shutdown(cancel_futures=True)

    def shutdown(self) -> None:
        pass


def _windowed(submit: Callable[[Any], Any], result: Callable[[Any], Any], args: Iterable[Any],
              window: int) -> Iterator[Any]:
    pending: deque = deque()
    for a in args:
        pending.append(submit(a))
        if len(pending) >= window:
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())


class _RayFuture:
    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def result(self) -> Any:
        import ray

        return ray.get(self.ref)


class RayPool:
    """The slice of ``ProcessPoolExecutor`` the stages use, backed by Ray tasks."""

    def __init__(self, ex: RayExecutor) -> None:
        self._ex = ex
        self._max_workers = ex.cpus

    def submit(self, fn: Callable[..., Any], *args: Any) -> _RayFuture:
        return _RayFuture(self._ex.remote(fn).remote(*args))

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def ray_init_kwargs(address: str | None = None, num_cpus: int | None = None) -> dict[str, Any]:
    """``ray.init`` arguments for a run: workers import this checkout (PYTHONPATH) and use one
    tokenizer thread each (tasks run side by side; more threads would oversubscribe the cores)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    kw: dict[str, Any] = {"runtime_env": {"env_vars": {"PYTHONPATH": path, "RAYON_NUM_THREADS": "1"}},
                          "log_to_driver": False, "include_dashboard": False}
    if address:
        kw["address"] = address
    else:
        # a local instance serves this process only: its GCS, raylet and object store listen on loopback
        # (with ray_init's loopback_only; Ray would otherwise pick the machine's routable address and
        # listen on every interface). The dashboard stays off (include_dashboard above).
        kw["_node_ip_address"] = "127.0.0.1"
        if num_cpus:
            kw["num_cpus"] = num_cpus
    return kw


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """Make Ray resolve this node's address to 127.0.0.1 while a local instance starts.

    Ray turns an explicit ``_node_ip_address="127.0.0.1"`` into the machine's routable address
    unless its ``ENABLE_RAY_CLUSTER`` constant is off (it is off on macOS/Windows, where Ray keeps
    local instances on loopback): this flips it for the duration of ``ray.init`` only. Checked on
    ray 2.60 (pinned): every port of the instance listened on 127.0.0.1 (README, Security)."""
    from ray._private import ray_constants

    old = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old


AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


class PrivateRay:
    """What a local instance needs so that other users of the machine cannot use it: a fresh private
    directory (``mkdtemp``, mode 0700) holding Ray's temp tree (Ray makes its own temp dir world-writable,
    so it goes one level down, where nobody else can even look) and a random token (file mode 0600)
    that Ray's token authentication (``RAY_AUTH_MODE=token``, Ray >= 2.52) requires on every GCS, raylet
    and worker RPC. Loopback alone kept other machines out but let any local user submit tasks, i.e.
    run code as the user who started the run. Undone (environment restored, directory removed) by
    ``close``."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mds-ray-"))
        self.temp_dir = self.dir / "ray"
        self.token_path = self.dir / "auth_token"
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        self._old = {k: os.environ.get(k) for k in AUTH_VARS}
        os.environ.pop("RAY_AUTH_TOKEN", None)  # it would take precedence over our file
        os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_path)})
        _refresh_ray_auth()

    def close(self) -> None:
        for k, v in self._old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _refresh_ray_auth()
        shutil.rmtree(self.dir, ignore_errors=True)


def _refresh_ray_auth() -> None:
    """Ray caches its config and token per process: make it read the environment again."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


_PRIVATE: PrivateRay | None = None


def ray_init(address: str | None = None, num_cpus: int | None = None) -> Any:
    """``ray.init`` for a run: join ``address``, or start a local instance bound to loopback, with token
    authentication and its temp tree in a private directory (``PrivateRay``; ``ray_shutdown`` undoes it)."""
    import ray

    global _PRIVATE
    kw = ray_init_kwargs(address, num_cpus)
    if address:
        return ray.init(**kw)
    _PRIVATE = PrivateRay()
    try:
        with loopback_only():
            return ray.init(**kw, _temp_dir=str(_PRIVATE.temp_dir))
    except BaseException:
        ray_shutdown()
        raise


def ray_shutdown() -> None:
    """Stop the Ray connection (and the local instance ``ray_init`` started), then remove its private dir."""
    import ray

    global _PRIVATE
    if ray.is_initialized():
        ray.shutdown()
    if _PRIVATE is not None:
        _PRIVATE.close()
        _PRIVATE = None


class RayExecutor:
    """Joins (or starts) Ray on first use, so a stage that is up to date never pays Ray's start-up."""

    kind = "ray"

    def __init__(self, spec: ExecutorSpec) -> None:
        try:
            import ray  # noqa: F401
        except ImportError as exc:  # pinned in requirements.txt; a hand-made venv may lack it
            raise ConfigError("--executor ray needs the `ray` package: pip install -r requirements.txt") from exc
        self.spec = spec
        self._remotes: dict[Any, Any] = {}
        self._owns = False
        self._cpus = 0

    @property
    def cpus(self) -> int:
        self._ensure()
        return self._cpus

    def _ensure(self) -> None:
        import ray

        if self._cpus:
            return
        if not ray.is_initialized():
            try:
                ray_init(self.spec.address, self.spec.num_cpus)
            except ConnectionError as exc:
                raise ConfigError(f"cannot reach the Ray cluster at {self.spec.address!r} ({exc}); start it with "
                                  f"`ray start --head` or pass the --ray-address of a running head") from exc
            self._owns = True
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        log.info("ray executor: %s CPUs (%s)", self._cpus, self.spec.address or "local instance")

    def remote(self, fn: Callable[..., Any]) -> Any:
        import ray

        self._ensure()
        if fn not in self._remotes:
            self._remotes[fn] = ray.remote(num_cpus=1)(fn)
        return self._remotes[fn]

    def pool(self, workers: int) -> RayPool:
        self._ensure()
        return RayPool(self)

    def map(self, fn: Callable[[Any], Any], args: Iterable[Any], workers: int = 1, window: int = 0) -> Iterator[Any]:
        """Ordered results of one Ray task per argument, at most ``window`` (0 = 2 x cluster CPUs) in flight."""
        import ray

        rf = self.remote(fn)
        yield from _windowed(lambda a: rf.remote(a), ray.get, args, window or 2 * self.cpus)

    def shutdown(self) -> None:
        import ray

        if self._owns and ray.is_initialized():
            ray_shutdown()


def make_executor(spec: ExecutorSpec | None) -> LocalExecutor | RayExecutor:
    if spec is None or spec.kind == "local":
        return LocalExecutor()
    return RayExecutor(spec)
