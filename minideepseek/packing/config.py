"""Stage 4 config: tokenize ``mixed_dedup`` with our tokenizer, pack into ``seq_len`` blocks, shuffle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import require
from ..runconfig import RunConfig


@dataclass(frozen=True)
class PackConfig:
    # batch_docs and num_threads change how fast the stage runs, never what it writes (the tail is
    # carried across batches, so block contents do not depend on batch boundaries: tested).
    # encoder too: "auto" (tiktoken) gives HF's ids exactly, checked (fastbpe.py)
    # unit_tokens only cuts the work into resumable units (each unit's blocks in its own temp file; the
    # shards are gathered across them), so it never changes what is written either
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("batch_docs", "num_threads", "encoder", "unit_tokens")

    seq_len: int = 4096  # tokens per block (the seed's SEQ_LEN); DeepSeek-V3 pretrains at 4K
    # The last partial block of the whole run: "drop" it (reported) or "pad" it with <|pad|> (id 1)
    tail: Literal["drop", "pad"] = "drop"
    max_shard_bytes: int = 64 << 20  # a shard closes once it holds this many Arrow bytes
    batch_docs: int = 256  # documents per encode_batch_fast call (~0.4M tokens, ~30 MB transient)
    num_threads: int = 0  # tokenizer threads (RAYON_NUM_THREADS); 0 = all cores
    # "auto": tiktoken with our vocabulary and pre-split when it provably gives the same ids (HF
    # otherwise; a sample re-encoded by HF in every run); "hf": HF tokenizers only
    encoder: Literal["auto", "hf"] = "auto"
    # tokens per resumable unit of the local packer (a kill redoes at most one: ~0.7 s on the demo's 2 cores)
    unit_tokens: int = 1 << 19
    decode_samples: int = 10  # random blocks decoded into the report, boundaries marked
    # true: every block holds one source's documents only; the blocks of each source form one
    # contiguous range of the dataset (shuffled within it), so a trainer can weight sources in its
    # own tokens (train/mixture.py). false: one mixed stream (documents of all sources shuffled).
    by_source: bool = False
    # Small data (sizing.py): when the run's tokens fill fewer than min_blocks blocks of seq_len, or more than
    # max_tail_share of them would be dropped as the tail (or padded), seq_len is halved (down to
    # min_seq_len) until they do not; said in the log, the report and the summary. false: seq_len as set.
    auto_seq_len: bool = True
    min_blocks: int = 32
    max_tail_share: float = 0.02
    min_seq_len: int = 256

    def __post_init__(self) -> None:
        require(16 <= self.seq_len <= 1 << 20, f"pack.seq_len={self.seq_len}: use 16..1048576 (4096 default)")
        require(self.max_shard_bytes >= 4 * self.seq_len,
                f"pack.max_shard_bytes={self.max_shard_bytes} is smaller than one block "
                f"({4 * self.seq_len} bytes); raise it (64 MiB = {64 << 20} default)")
        require(self.batch_docs >= 1, "pack.batch_docs must be >= 1 (256 default)")
        require(self.unit_tokens >= 1, "pack.unit_tokens must be >= 1 (524288 default)")
        require(self.num_threads >= 0, "pack.num_threads must be >= 0 (0 = all cores)")
        require(self.decode_samples >= 0, "pack.decode_samples must be >= 0")
        require(self.min_blocks >= 1, f"pack.min_blocks={self.min_blocks} must be >= 1 (32 default)")
        require(0.0 <= self.max_tail_share < 1.0, f"pack.max_tail_share={self.max_tail_share} must be in [0, 1) "
                "(0.02 default)")
        require(self.min_seq_len >= 16, f"pack.min_seq_len={self.min_seq_len} must be >= 16 (256 default; a seq_len "
                "already at or below it is never lowered)")


@dataclass(frozen=True)
class PackStageConfig:
    run: RunConfig = field(default_factory=RunConfig)
    pack: PackConfig = field(default_factory=PackConfig)
