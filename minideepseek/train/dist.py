"""Process-group plumbing: one process, ``smoke_train.py --nproc N`` (``launch.py``), or an external
``torchrun`` (multi-node, trusted networks only); NCCL on GPUs, gloo on CPU.

The launcher sets RANK, LOCAL_RANK, WORLD_SIZE and ``MINIDEEPSEEK_DIST_INIT`` (a ``file://`` store in a
private directory: no TCP rendezvous); torchrun sets RANK etc. and its ``env://`` rendezvous variables.
Without them this is a single process and no process group is created. Every collective here is called
by every rank in the same order; only rank 0 writes files. Objects go between ranks as JSON, never
pickles (``broadcast_object``): a peer's bytes are never unpickled.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


@dataclass
class DistEnv:
    rank: int = 0
    local_rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")
    initialized: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environ(cls) -> DistEnv:
        return cls(rank=int(os.environ.get("RANK", 0)), local_rank=int(os.environ.get("LOCAL_RANK", 0)),
                   world=int(os.environ.get("WORLD_SIZE", 1)))

    def init(self, device_kind: str, timeout_s: int = 600) -> None:
        """Pick the device (cuda:LOCAL_RANK or cpu) and, under torchrun, join the process group.

        The timeout bounds how long a rank waits in a collective for a dead or stuck peer before it
        raises instead of hanging forever (see the report's failure notes)."""
        if device_kind == "cuda":
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        if self.world > 1 and not self.initialized:
            backend = "nccl" if device_kind == "cuda" else "gloo"
            kw: dict[str, Any] = {"device_id": self.device} if device_kind == "cuda" else {}
            init = os.environ.get("MINIDEEPSEEK_DIST_INIT")  # launch.py's private file store (no TCP store)
            if init:
                kw.update(init_method=init, rank=self.rank, world_size=self.world)
            dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s), **kw)
            self.initialized = True
            log.info("rank %d/%d joined the %s process group on %s", self.rank, self.world, backend, self.device)

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.initialized:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        """Equal-shaped tensors from every rank, in rank order."""
        if not self.initialized:
            return [t]
        out = [torch.empty_like(t) for _ in range(self.world)]
        dist.all_gather(out, t)
        return out

    def broadcast_object(self, obj: object) -> object:
        """Rank 0's ``obj`` on every rank. JSON over two tensor broadcasts (length, bytes), not
        ``broadcast_object_list``: that one unpickles what it receives, and a rank must never run code
        from bytes that came over a socket. ``obj`` must be JSON (a path, a number, a bool, None)."""
        if not self.initialized:
            return obj
        data = json.dumps(obj).encode("utf-8") if self.is_main else b""
        n = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        dist.broadcast(n, src=0)
        buf = (torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device) if self.is_main
               else torch.empty(int(n.item()), dtype=torch.uint8, device=self.device))
        if int(n.item()):
            dist.broadcast(buf, src=0)
        return json.loads(buf.cpu().numpy().tobytes().decode("utf-8"))

    def barrier(self) -> None:
        if self.initialized:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.local_rank])
            else:
                dist.barrier()

    def close(self) -> None:
        if self.initialized:
            dist.destroy_process_group()
            self.initialized = False
