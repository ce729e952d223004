"""The step ledger: from a training step to the documents it read, and from a document to the steps.

What stage 5 records. Per optimizer step and rank, ``batches.jsonl`` holds the sample ids the rank
trained on (its micro-batches in order) and ``token_hash``: a 128-bit BLAKE2b digest of the token
ids of those micro-batches (uint32, little-endian, in order). Hashing a few hundred KB a step costs
microseconds next to a forward pass.

Why a replay is exact. A rank's batches are a pure function of the seed, the sized ``train`` config
(the one ``smoke_train.json`` records, after train/autosize.py), the packed data, the rank count and
the step: the loader state before step N is ``(N - 1) * grad_accum`` micro-batches into the rank's
stream (loader.py, mixture.py). ``Replay`` rebuilds any step from the packed shards without running
the model; the recorded digest proves the rebuilt tokens are the ones that were trained.

Documents. Every packed block lists its documents' spans (``doc_ids``, ``starts``, ``ends``,
``doc_token_start``); ``BlockDocs`` reads those columns (never the token column) into flat arrays,
so a window's documents, or a document's windows, are array look-ups.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow_io import shard_paths
from ..artifact import read_manifest
from ..config import ConfigError, build
from ..pipeline import PACKED, SMOKE_TRAIN
from .config import TrainConfig
from .loader import LoaderState, PackedBlocks, RankLoader, SamplePlan

DIGEST_BYTES = 16


def token_digest(token_arrays: Iterable[np.ndarray]) -> str:
    """Hex BLAKE2b-128 of the token ids of ``token_arrays`` (each cast to little-endian uint32), in order."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for a in token_arrays:
        h.update(np.ascontiguousarray(a, dtype="<u4").tobytes())
    return h.hexdigest()


def digest_words(hex_digest: str) -> np.ndarray:
    """A digest as two int64 words (what the ranks all-gather as a tensor)."""
    return np.frombuffer(bytes.fromhex(hex_digest), dtype="<i8").copy()


def words_digest(words: np.ndarray) -> str:
    return np.ascontiguousarray(words, dtype="<i8").tobytes().hex()


class BlockDocs:
    """The document spans of every packed block, as flat arrays (``off[b]:off[b + 1]`` are block b's)."""

    def __init__(self, packed_dir: Path) -> None:
        offs, ids, starts, ends, dts = [np.zeros(1, np.int64)], [], [], [], []
        base = 0
        for path in shard_paths(packed_dir):
            with pa.memory_map(str(path)) as mm:
                for batch in pa.ipc.open_stream(mm):
                    if batch.num_rows == 0:
                        continue
                    col = batch.column("doc_ids")
                    offs.append(col.offsets.to_numpy()[1:].astype(np.int64) - int(col.offsets[0].as_py()) + base)
                    base = int(offs[-1][-1])
                    ids.append(col.flatten().to_numpy(zero_copy_only=False).astype(object))
                    for name, out in (("starts", starts), ("ends", ends), ("doc_token_start", dts)):
                        out.append(batch.column(name).flatten().to_numpy().astype(np.int64))
        self.off = np.concatenate(offs)
        self.ids = np.concatenate(ids) if ids else np.empty(0, object)
        self.starts, self.ends, self.doc_start = (np.concatenate(x) if x else np.empty(0, np.int64)
                                                  for x in (starts, ends, dts))
        self.block_of = np.repeat(np.arange(len(self.off) - 1), np.diff(self.off))

    def in_block(self, blk: int) -> range:
        return range(int(self.off[blk]), int(self.off[blk + 1]))

    def pieces_of(self, doc_id: str) -> np.ndarray:
        """Indices (into the flat arrays) of every piece of ``doc_id``, in block order."""
        return np.flatnonzero(self.ids == doc_id)


@dataclass
class Replay:
    """Everything needed to rebuild a trained run's batches, read from its artifacts."""

    run_dir: Path
    tc: TrainConfig
    seed: int
    world: int
    steps: int
    plan: SamplePlan
    docs: BlockDocs
    mixture: Any  # mixture.MixtureSampler, or None
    recorded: list[dict[str, Any]]  # batches.jsonl, one per step
    train_manifest: dict[str, Any]

    @classmethod
    def open(cls, run_dir: Path) -> Replay:
        from .mixrun import build_mixture, source_ranges

        art = run_dir / SMOKE_TRAIN
        man = read_manifest(art)
        if man is None:
            raise ConfigError(f"{art} holds no committed smoke train; run stage 5 first "
                              f"(`bash run_pipeline.sh --from smoke_train`)")
        packed = read_manifest(run_dir / PACKED)
        trained_on = {i["name"]: i["fingerprint"] for i in man.get("inputs", [])}.get(PACKED)
        if packed is None or packed["fingerprint"] != trained_on:
            raise ConfigError(f"{run_dir / PACKED} is not the packed data {art} was trained on (repacked or edited "
                              f"since, e.g. by a withdrawal); rerun stage 5 to get a ledger of the current data")
        report = json.loads((art / "smoke_train.json").read_text(encoding="utf-8"))
        tc = build(TrainConfig, report["config"], "smoke_train.json config")  # the sized config that ran
        world = int(man["counters"]["world_size"])
        blocks = PackedBlocks(run_dir / PACKED)
        plan = SamplePlan(blocks, tc.seq_len, tc.val_blocks, int(man["seed"]),
                          val_windows_per_block=tc.val_windows_per_block, strata=source_ranges(packed))
        mixture = build_mixture(tc, plan, packed, run_dir, world)
        recorded = [json.loads(line) for line in (art / "batches.jsonl").read_text(encoding="utf-8").splitlines()]
        return cls(run_dir, tc, int(man["seed"]), world, int(man["counters"]["steps"]), plan,
                   BlockDocs(run_dir / PACKED), mixture, recorded, man)

    def close(self) -> None:
        self.plan.blocks.close()

    # -- the schedule ------------------------------------------------------------------------------
    def loader_before(self, step: int, rank: int) -> Any:
        """Rank ``rank``'s loader in the state it had before optimizer step ``step`` (1-based)."""
        from .mixture import MixtureRankLoader

        taken = (step - 1) * self.tc.grad_accum  # micro-batches this rank took before the step
        if self.mixture is not None:
            return MixtureRankLoader(self.plan, self.mixture, rank, LoaderState(0, taken))
        probe = RankLoader(self.plan, self.tc.micro_batch, rank, self.world)
        return RankLoader(self.plan, self.tc.micro_batch, rank, self.world,
                          LoaderState(taken // probe.per_epoch, taken % probe.per_epoch))

    def step_samples(self, step: int) -> list[list[np.ndarray]]:
        """``[rank][micro]`` sample ids of optimizer step ``step``, rebuilt from the schedule."""
        self._check_step(step)
        out = []
        for rank in range(self.world):
            ld = self.loader_before(step, rank)
            out.append([ld.next_samples() for _ in range(self.tc.grad_accum)])
        return out

    def schedule(self) -> np.ndarray:
        """Every trained sample id: shape (steps, world, grad_accum, micro_batch), rebuilt from the schedule
        (one pass per rank over its stream: indices only, no tokens read)."""
        tc = self.tc
        out = np.empty((self.steps, self.world, tc.grad_accum, tc.micro_batch), np.int64)
        for rank in range(self.world):
            ld = self.loader_before(1, rank)
            for s in range(self.steps):
                for m in range(tc.grad_accum):
                    out[s, rank, m] = ld.next_samples()
        return out

    def epoch_and_phase(self, step: int, micro: int, rank: int, row: int) -> tuple[int | None, int]:
        """(epoch of the plain loader, or None for the mixture's per-source cursors; mixture phase, 0 without).
        The mixture schedules samples: global micro-batch g holds slots g * micro_batch ... (mixture.py)."""
        taken = (step - 1) * self.tc.grad_accum + micro
        if self.mixture is not None:
            return None, int(self.mixture.phase_of((taken * self.world + rank) * self.tc.micro_batch + row))
        per_epoch = RankLoader(self.plan, self.tc.micro_batch, rank, self.world).per_epoch
        return taken // per_epoch, 0

    def checkpoint_steps(self) -> list[int]:
        """Steps at which the run wrote a checkpoint: every checkpoint_interval steps before the last, and
        the last (the artifact's checkpoint.pt). The intermediate files are deleted when the stage commits."""
        ci = self.tc.checkpoint_interval
        inter = list(range(ci, self.tc.max_steps, ci)) if ci else []
        return [s for s in inter if s < self.steps] + [self.steps]

    def _check_step(self, step: int) -> None:
        if not 1 <= step <= self.steps:
            raise ConfigError(f"step {step} is outside the run's steps 1-{self.steps}")

    # -- windows and documents -----------------------------------------------------------------------
    def window(self, sample: int) -> tuple[int, int, int]:
        """(block, window, first token of the window in the block) of a sample id."""
        blk, w = divmod(int(sample), self.plan.windows)
        return blk, w, w * self.tc.seq_len

    def pieces_in(self, sample: int) -> list[tuple[int, int, int]]:
        """(piece index, first, end) of each document piece in the sample's window, positions in the window."""
        blk, _, lo = self.window(sample)
        T, d = self.tc.seq_len, self.docs
        out = []
        for j in self.docs.in_block(blk):
            a, b = max(int(d.starts[j]), lo), min(int(d.ends[j]), lo + T)
            if a < b:
                out.append((j, a - lo, b - lo))
        return out

    def tokens_of(self, samples: np.ndarray) -> np.ndarray:
        return self.plan.gather(np.asarray(samples, np.int64), doc_layout=False).tokens
