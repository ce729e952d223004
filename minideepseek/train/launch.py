"""Start N ranks of stage 5 on this machine with no network rendezvous (``smoke_train.py --nproc N``).

``torchrun --standalone`` was the launcher before: its rendezvous TCPStore listens on every interface
whatever host it is given, and its elastic agent unpickles the rendezvous state it reads from that store
about once a second, so anyone who could reach the port while a smoke train ran could run code as the
training user (MEASURED_FACTS.md; reproduced on loopback). This launcher needs no such service:

- the ranks meet through a ``FileStore`` (``init_process_group(init_method="file://...")``) in a fresh
  private directory (``mkdtemp``: mode 0700, so no other user can read or plant the store), removed
  when the ranks are done;
- the collectives' own sockets stay on loopback: gloo (CPU) and NCCL's bootstrap (GPU) are pinned to
  the loopback interface (``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME``); ranks on one node exchange
  GPU data through NCCL's shared-memory/P2P transports, not sockets;
- nothing is unpickled from a peer: the objects rank 0 sends (a checkpoint path, a verdict) travel
  as JSON (``dist.DistEnv.broadcast_object``).

Each rank is ``python smoke_train.py ...`` with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE set
(``cuda:LOCAL_RANK`` on GPUs, NCCL; gloo on CPU). The launcher holds the run lock
(``runlock``) and passes its open lock file down, so the ranks share it. If one rank fails, the others
are stopped (SIGTERM, then SIGKILL after a grace period), like torchrun; the exit code is the first
failing rank's (0 when all succeed). Multi-node training is not launched from here: see docs/security.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import runlock

log = logging.getLogger(__name__)

INIT_ENV = "MINIDEEPSEEK_DIST_INIT"  # file://<private dir>/store, read by dist.DistEnv.init
GRACE_S = 10.0


def loopback_interface() -> str:
    """The name of the interface holding 127.0.0.1 ("lo" on Linux, "lo0" on macOS)."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(getattr(a, "address", "") == "127.0.0.1" for a in addrs):
            return name
    return "lo"


def rank_env(base: dict[str, str], rank: int, world: int, init: str, lock_fd: int | None) -> dict[str, str]:
    """The environment of one rank: torchrun's variables, the file store, collectives on loopback."""
    lo = loopback_interface()
    env = {k: v for k, v in base.items() if not k.startswith(("TORCHELASTIC_", "MASTER_"))}
    env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                "GROUP_RANK": "0", INIT_ENV: init, "GLOO_SOCKET_IFNAME": lo, "NCCL_SOCKET_IFNAME": lo})
    env.pop(runlock.FD_ENV, None)
    if lock_fd is not None and lock_fd >= 0:
        env[runlock.FD_ENV] = str(lock_fd)
    return env


def strip_nproc(argv: list[str]) -> list[str]:
    """``argv`` without ``--nproc N`` / ``--nproc=N`` (what each rank gets)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def launch(script: str, argv: list[str], nproc: int, run_dir: Path | None) -> int:
    """Run ``nproc`` ranks of ``python script argv`` and wait for them; returns the exit code."""
    lock_fd = runlock.acquire(run_dir) if run_dir is not None else None
    store_dir = Path(tempfile.mkdtemp(prefix="mds-ranks-"))  # 0700: only this user can see the store
    init = f"file://{store_dir / 'store'}"
    procs: list[subprocess.Popen] = []
    stopping = {"sig": 0}

    def forward(signum: int, _frame: object) -> None:
        stopping["sig"] = signum
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for rank in range(nproc):
            env = rank_env(dict(os.environ), rank, nproc, init, lock_fd)
            fds = (lock_fd,) if lock_fd is not None and lock_fd >= 0 else ()
            procs.append(subprocess.Popen([sys.executable, script, *argv], env=env, pass_fds=fds))
        log.info("started %d rank(s) of %s (file store in %s, collectives on loopback)", nproc, script, store_dir)
        return _wait(procs, stopping)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for s, h in old.items():
            signal.signal(s, h)
        shutil.rmtree(store_dir, ignore_errors=True)


def _wait(procs: list[subprocess.Popen], stopping: dict[str, int]) -> int:
    """Wait for every rank; the first failure stops the others (a peer would otherwise wait in a
    collective until its timeout)."""
    rc = 0
    while True:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed and not rc:
            rank, rc = failed[0]
            if any(c is None for c in codes):
                log.error("rank %d exited with %d; stopping the other ranks", rank, rc)
                _stop([p for p in procs if p.poll() is None])
        if all(c is not None for c in codes):
            if stopping["sig"] and not rc:
                rc = 128 + stopping["sig"]
            return rc if rc >= 0 else 128 - rc  # killed by a signal: the shell's 128+N
        time.sleep(0.1)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
