"""Process-group plumbing: one process or ``torchrun --nproc_per_node=N`` (NCCL on GPUs, gloo on CPU).

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE and the rendezvous variables; without them this is a
single process and no process group is created. Every collective here is called by every rank in
the same order; only rank 0 writes files.
"""

from __future__ import annotations

import datetime
import logging
import os
from dataclasses import dataclass

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
            kw = {"device_id": self.device} if device_kind == "cuda" else {}
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
        if not self.initialized:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

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
