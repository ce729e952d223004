"""The training loader: memory-mapped packed shards -> deterministic, resumable, rank-split batches.

Storage. ``PackedBlocks`` maps every shard listed in ``state.json`` with ``pa.memory_map`` and opens
it with ``pa.ipc.open_stream``; each record batch's ``input_ids`` (``fixed_size_list<uint32>``) is
viewed as a ``(rows, seq_len)`` uint32 numpy array without a copy, and the span columns
(``starts``/``ends``) as offset + value arrays. Only the rows of a micro-batch are copied.

Samples. When ``train.seq_len`` is shorter than the packed blocks, each block is read as
``packed_seq_len // seq_len`` consecutive, non-overlapping *windows* (a remainder at the end of a
block, if any, is unused and reported); a sample is a (block, window) pair with id
``block * windows + window``. So a 4096-token block gives the demo's 256-token model 16 samples
and every packed token is used, instead of cropping each block to its first 256 tokens. The target
of a window's last position is the next token of the block when there is one.

Splits. A seeded permutation of the *blocks* holds out its first ``val_blocks`` as validation, so
no window of a held-out block is ever trained on (``val_windows_per_block`` evaluates only some of
their windows, to keep evaluation cheap). Every epoch the training samples are put in a
seeded permutation of that epoch, cut into micro-batches; global micro-batch ``j`` goes to rank
``j % world``. A rank's position is the number of micro-batches it has taken in the epoch, the same
on every rank (they step in lockstep), so the loader state is ``(epoch, position)``: the batches
from any state are a pure function of (seed, state, rank, world) and resuming a checkpoint replays
exactly what an uninterrupted run would have read. An epoch's last, incomplete round of
micro-batches is skipped (every rank gets the same count).

Document layout per window (for the document mask): ``segments`` numbers the documents in the
window 0, 1, ...; ``positions`` restart at 0 where each document (or the window) starts. Padding
(``pack.tail: pad``) forms its own segment and is never a target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..arrow_io import shard_paths
from ..config import ConfigError
from ..rng import rng_for
from ..tokenizer.config import PAD_ID
from .loss import IGNORE


@dataclass(frozen=True)
class Batch:
    """One micro-batch, as numpy arrays (the trainer moves them to the device)."""

    tokens: np.ndarray  # (B, T) int64 input ids
    targets: np.ndarray  # (B, T) int64 next-token ids, IGNORE where there is none
    segments: np.ndarray  # (B, T) int64 document index within the window
    positions: np.ndarray  # (B, T) int64 position within the document (or window)
    samples: np.ndarray  # (B,) int64 sample ids (block * windows + window)


@dataclass(frozen=True)
class LoaderState:
    epoch: int = 0
    position: int = 0  # micro-batches this rank has taken in the epoch


class PackedBlocks:
    """The blocks of a packed ``save_to_disk`` directory, memory-mapped."""

    def __init__(self, ds_dir: Path) -> None:
        self.paths = shard_paths(ds_dir)  # names from state.json, each confined to the directory
        self._maps: list[pa.MemoryMappedFile] = []
        self._ids: list[np.ndarray] = []
        self._spans: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (offsets, starts, ends)
        self.seq_len = 0
        for path in self.paths:
            mm = pa.memory_map(str(path))
            self._maps.append(mm)
            for batch in pa.ipc.open_stream(mm):
                if batch.num_rows == 0:
                    continue
                col = batch.column("input_ids")
                if not pa.types.is_fixed_size_list(col.type) or col.type.value_type != pa.uint32():
                    raise ConfigError(f"{path}: input_ids is {col.type}, expected fixed_size_list<uint32>; "
                                      f"rebuild with pack_shuffle.py")
                self.seq_len = col.type.list_size
                self._ids.append(col.flatten().to_numpy(zero_copy_only=True).reshape(-1, self.seq_len))
                st, en = batch.column("starts"), batch.column("ends")
                self._spans.append((st.offsets.to_numpy(), st.values.to_numpy(), en.values.to_numpy()))
        self.batch_starts = np.cumsum([0] + [len(a) for a in self._ids], dtype=np.int64)
        if self.num_blocks == 0:
            raise ConfigError(f"{ds_dir} holds no blocks; rerun pack_shuffle.py with more data")

    @property
    def num_blocks(self) -> int:
        return int(self.batch_starts[-1])

    def block(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Block ``g``: its token ids (a view) and its spans' starts and ends."""
        c = int(np.searchsorted(self.batch_starts, g, side="right")) - 1
        r = g - int(self.batch_starts[c])
        off, st, en = self._spans[c]
        return self._ids[c][r], st[off[r]:off[r + 1]], en[off[r]:off[r + 1]]

    def close(self) -> None:
        self._ids, self._spans = [], []
        for mm in self._maps:
            mm.close()
        self._maps = []


class SamplePlan:
    """Which samples exist, which are held out, and each epoch's order (all from the seed)."""

    def __init__(self, blocks: PackedBlocks, seq_len: int, val_blocks: int, seed: int,
                 vocab_size: int | None = None, val_windows_per_block: int = 0,
                 strata: list[tuple[int, int]] | None = None) -> None:
        if seq_len > blocks.seq_len:
            raise ConfigError(f"train.seq_len={seq_len} is longer than the packed blocks ({blocks.seq_len}); "
                              f"set train.seq_len <= {blocks.seq_len} or repack with pack.seq_len >= {seq_len}")
        if val_blocks >= blocks.num_blocks:
            raise ConfigError(f"train.val_blocks={val_blocks} leaves no training data: the packed data has "
                              f"{blocks.num_blocks} blocks; lower train.val_blocks")
        self.blocks, self.seq_len, self.seed, self.vocab_size = blocks, seq_len, seed, vocab_size
        self.windows = blocks.seq_len // seq_len
        self.unused_per_block = blocks.seq_len - self.windows * seq_len
        if strata:  # per-source packed data: every source gets held-out blocks (mixrun.py)
            held = stratified_heldout(strata, val_blocks, seed)
            self.val_block_ids = held
            self.train_block_ids = np.setdiff1d(np.arange(blocks.num_blocks), held)
        else:
            perm = rng_for(seed, "train", "heldout").permutation(blocks.num_blocks)
            self.val_block_ids = np.sort(perm[:val_blocks])
            self.train_block_ids = np.sort(perm[val_blocks:])
        self.train_samples = self._samples(self.train_block_ids)
        # Evaluating a few evenly spaced windows of many held-out blocks covers more documents for
        # the same cost than every window of a few blocks (the other windows stay unused, not trained).
        k = self.windows if val_windows_per_block in (0, None) else min(val_windows_per_block, self.windows)
        picked = np.unique(np.linspace(0, self.windows - 1, k).round().astype(np.int64))
        self.val_samples = (self.val_block_ids[:, None] * self.windows + picked).ravel()

    def _samples(self, block_ids: np.ndarray) -> np.ndarray:
        return (block_ids[:, None] * self.windows + np.arange(self.windows)).ravel()

    def documents_per_sample(self, samples: np.ndarray) -> np.ndarray:
        """How many documents (spans) each sample's window touches."""
        out = np.empty(len(samples), np.int64)
        for i, s in enumerate(samples.tolist()):
            blk, w = divmod(s, self.windows)
            _, _, ends = self.blocks.block(blk)
            lo = w * self.seq_len
            out[i] = np.searchsorted(ends, lo + self.seq_len - 1, side="right") - np.searchsorted(ends, lo, side="right") + 1
        return out

    def attended_pairs(self, samples: np.ndarray, doc_layout: bool = True) -> np.ndarray:
        """(query, key) pairs causal attention lets through in each sample's window (the MFU's attention
        FLOPs, flops.py): L (L + 1) / 2 per piece of document of length L in the window (the pieces
        ``gather`` numbers as segments), or T (T + 1) / 2 per window without the document layout."""
        T = self.seq_len
        out = np.full(len(samples), T * (T + 1) // 2, np.int64)
        if not doc_layout:
            return out
        for i, s in enumerate(np.asarray(samples).tolist()):
            blk, w = divmod(s, self.windows)
            _, _, ends = self.blocks.block(blk)
            lo = w * T
            cuts = ends[(ends > lo) & (ends < lo + T)].astype(np.int64)
            lengths = np.diff(np.concatenate(([lo], cuts, [lo + T])))
            out[i] = int((lengths * (lengths + 1) // 2).sum())
        return out

    def epoch_order(self, epoch: int) -> np.ndarray:
        return self.train_samples[rng_for(self.seed, "train", "epoch", epoch).permutation(len(self.train_samples))]

    def gather(self, samples: np.ndarray, doc_layout: bool = True) -> Batch:
        """Copy ``samples`` into a Batch (tokens, shifted targets, document segments and positions)."""
        B, T = len(samples), self.seq_len
        tokens = np.empty((B, T), np.int64)
        targets = np.full((B, T), IGNORE, np.int64)
        segments = np.zeros((B, T), np.int64)
        positions = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T)).copy()
        t_idx = np.arange(T)
        for i, s in enumerate(samples.tolist()):
            blk, w = divmod(s, self.windows)
            ids, starts, ends = self.blocks.block(blk)
            lo = w * T
            hi = min(lo + T + 1, len(ids))
            win = ids[lo:hi].astype(np.int64)
            tokens[i] = win[:T]
            targets[i, : hi - lo - 1] = win[1:]
            if doc_layout:
                seg = np.searchsorted(ends, lo + t_idx, side="right")  # span index (len(spans) = padding)
                seg0 = seg - seg[0]
                begin = np.where(seg < len(starts), starts[np.minimum(seg, len(starts) - 1)],
                                 ends[-1] if len(ends) else 0)
                segments[i] = seg0
                positions[i] = lo + t_idx - np.maximum(begin, lo)
        if self.vocab_size is not None and B and int(tokens.max()) >= self.vocab_size:
            raise ConfigError(f"packed token id {int(tokens.max())} >= tokenizer vocab {self.vocab_size} in samples "
                              f"{samples.tolist()}: the packed data was built with another tokenizer; rerun "
                              f"pack_shuffle.py")
        targets[targets == PAD_ID] = IGNORE
        return Batch(tokens, targets, segments, positions, np.asarray(samples, np.int64))


def stratified_heldout(strata: list[tuple[int, int]], k: int, seed: int) -> np.ndarray:
    """``k`` held-out blocks over block ranges ``[lo, hi)`` (one per source): one for each range of
    at least 2 blocks first (when k allows), the rest by largest remainder of the ranges' sizes;
    within a range a seeded choice. So a small source still has a validation loss of its own."""
    sizes = np.array([hi - lo for lo, hi in strata], np.int64)
    take = np.zeros(len(strata), np.int64)
    eligible = np.flatnonzero(sizes >= 2)
    if k >= len(eligible):
        take[eligible] = 1
    rest = k - int(take.sum())
    if rest > 0:
        quota = rest * sizes / sizes.sum()
        extra = np.floor(quota).astype(np.int64)
        order = np.argsort(-(quota - extra), kind="stable")
        extra[order[: rest - int(extra.sum())]] += 1
        take += extra
    take = np.minimum(take, np.maximum(sizes - 1, 0))  # never the whole source
    out = [lo + rng_for(seed, "train", "heldout", i).permutation(hi - lo)[:t]
           for i, ((lo, hi), t) in enumerate(zip(strata, take.tolist()))]
    return np.sort(np.concatenate(out)) if out else np.empty(0, np.int64)


class RankLoader:
    """One rank's stream of training micro-batches, resumable from a LoaderState."""

    def __init__(self, plan: SamplePlan, micro_batch: int, rank: int, world: int,
                 state: LoaderState = LoaderState()) -> None:
        self.plan, self.mb, self.rank, self.world = plan, micro_batch, rank, world
        self.per_epoch = (len(plan.train_samples) // micro_batch) // world  # micro-batches per rank
        if self.per_epoch == 0:
            raise ConfigError(f"{len(plan.train_samples)} training samples cannot fill one micro-batch of "
                              f"{micro_batch} on each of {world} ranks; lower train.micro_batch or "
                              f"train.val_blocks, or pack more data")
        self.state = state
        self._order_epoch = -1
        self._order = np.empty(0, np.int64)

    def next_samples(self) -> np.ndarray:
        """The sample ids of this rank's next micro-batch; advances the state."""
        ep, pos = self.state.epoch, self.state.position
        if ep != self._order_epoch:
            self._order, self._order_epoch = self.plan.epoch_order(ep), ep
        j = pos * self.world + self.rank
        out = self._order[j * self.mb:(j + 1) * self.mb]
        pos += 1
        self.state = LoaderState(ep + 1, 0) if pos == self.per_epoch else LoaderState(ep, pos)
        return out

    def next_batch(self, doc_layout: bool = True) -> Batch:
        return self.plan.gather(self.next_samples(), doc_layout)


def val_batches(plan: SamplePlan, micro_batch: int, rank: int, world: int, doc_layout: bool = True):  # type: ignore[no-untyped-def]
    """This rank's share of the held-out samples (every world-th), in micro-batches. The same set
    at every evaluation, so validation losses are comparable across steps."""
    mine = plan.val_samples[rank::world]
    for j in range(0, len(mine), micro_batch):
        yield plan.gather(mine[j:j + micro_batch], doc_layout)
