"""A small decoder-only transformer: tied embeddings, RMSNorm, RoPE, SwiGLU, SDPA or FlexAttention.

Document masking (on by default): a packed block holds the tail of one document and the heads of
the next ones. Without a mask, attention lets a document read the previous, unrelated document as
its context. With ``segments`` (the document index of every position, from the packed spans) each
query attends only to earlier positions of its own document, block-diagonal causal attention.
``positions`` restart at 0 at every document start, so a document is computed the same wherever it
sits in a block (tested, on both attention paths). ``segments=None`` means plain causal attention
(``is_causal``, SDPA's fastest kernel); the trainer passes None for a batch whose windows each hold
one document, deciding that on the host (``trainer.to_device``) so the model has no data-dependent
branch: such a branch is a graph break under ``torch.compile`` and a GPU->CPU sync every step.

Two ways to apply the same mask (``GPT.attention``):
- ``sdpa``: a dense boolean ``(B, 1, T, T)`` mask ``causal & (segment_q == segment_k)`` for
  ``scaled_dot_product_attention``. The reference and the CPU path. On CUDA a dense mask keeps SDPA
  off its flash kernel: on an H200 the mask cost 17% of the step (117.9K vs 142.6K tokens/s).
- ``flex``: a FlexAttention ``BlockMask`` built once per micro-batch from the segments (one
  ``create_block_mask`` for all layers). Blocks of 128 x 128 that no query may see are skipped,
  blocks inside one document run unmasked, only blocks on a diagonal or a document edge evaluate
  the mask. The H200 step was as fast as no mask at all (143.6K tokens/s), and 2.5x with the model
  compiled (MEASURED_FACTS.md). CUDA only for training: FlexAttention has no backward on CPU; its
  CPU forward is what the tests compare against the dense mask.

Init follows GPT-2 (normal std 0.02, residual projections scaled by 1/sqrt(2 * n_layer)): on CPU
the default init gave denormal-heavy softmax gradients and 20 s steps (MEASURED_FACTS.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from .loss import chunked_lm_loss

AttentionKind = Literal["sdpa", "flex"]
Mask = torch.Tensor | BlockMask | None


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    n_layer: int
    d_model: int
    n_head: int
    max_seq_len: int
    rope_theta: float = 10_000.0

    @property
    def d_ff(self) -> int:
        """SwiGLU hidden size: 8/3 d (same parameters as a 4d GELU MLP), rounded up to 64."""
        return 64 * math.ceil(8 * self.d_model / 3 / 64)


def dense_document_mask(segments: torch.Tensor) -> torch.Tensor:
    """The SDPA boolean mask (B, 1, T, T) for ``segments`` (B, T): same document and not in the future."""
    T = segments.shape[1]
    same = segments[:, :, None] == segments[:, None, :]
    causal = torch.ones(T, T, dtype=torch.bool, device=segments.device).tril()
    return (same & causal)[:, None]


def document_block_mask(segments: torch.Tensor) -> BlockMask:
    """The FlexAttention block mask for ``segments`` (B, T): the same rule as ``dense_document_mask``.

    The mask function reads ``segments`` only inside partially masked blocks; the block structure is
    computed here, on the device, once per micro-batch. Under ``torch.compile`` this is traced into
    the model's graph (``segments`` is a graph input), so a new batch is not a recompile."""
    B, T = segments.shape

    def same_document_causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return (q >= kv) & (segments[b, q] == segments[b, kv])

    return create_block_mask(same_document_causal, B, None, T, T, device=segments.device)


@functools.cache
def _compiled_flex() -> Callable[..., torch.Tensor]:
    """FlexAttention compiled on its own, for an eager model on CUDA: uncompiled, it falls back to a
    reference implementation that materializes every score. Compiled once per process (shapes are
    static); inside a compiled model the plain function is traced instead."""
    return torch.compile(flex_attention, dynamic=False)


class Rotary(nn.Module):
    """cos/sin tables for RoPE, indexed by per-token position ids."""

    def __init__(self, head_dim: int, max_len: int, theta: float) -> None:
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: (B, H, T, hd); positions: (B, T)."""
        cos = self.cos[positions][:, None].to(x.dtype)  # (B, 1, T, hd/2)
        sin = self.sin[positions][:, None].to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.hd = cfg.n_head, cfg.d_model // cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, rope: Rotary, positions: torch.Tensor, mask: Mask) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, self.hd).permute(2, 0, 3, 1, 4)
        q, k = rope(q, positions), rope(k, positions)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif isinstance(mask, BlockMask):
            eager_cuda = q.is_cuda and not torch.compiler.is_compiling()
            y = (_compiled_flex() if eager_cuda else flex_attention)(q, k, v, block_mask=mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.d_model)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, rope: Rotary, positions: torch.Tensor, mask: Mask) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), rope, positions, mask)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """Decoder-only LM. ``forward(tokens, targets)`` returns the mean loss (chunked over the tied
    output projection); ``hidden(tokens)`` the final normalized states; ``logits_last`` for sampling.
    ``attention`` picks how the document mask is applied (module docstring); it changes no weight."""

    def __init__(self, cfg: ModelConfig, attention: AttentionKind = "sdpa") -> None:
        super().__init__()
        if attention not in ("sdpa", "flex"):
            raise ValueError(f"attention must be 'sdpa' or 'flex', got {attention!r}")
        self.attention: AttentionKind = attention
        if cfg.d_model % cfg.n_head or (cfg.d_model // cfg.n_head) % 2:
            raise ValueError(f"d_model {cfg.d_model} must split into n_head {cfg.n_head} heads of even size")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.d_model)
        self.rope = Rotary(cfg.d_model // cfg.n_head, cfg.max_seq_len, cfg.rope_theta)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.down.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def num_params(self) -> dict[str, int]:
        total = sum(p.numel() for p in self.parameters())  # tied: the embedding is counted once
        emb = self.embed.weight.numel()
        return {"total": total, "embedding": emb, "non_embedding": total - emb}

    def hidden(self, tokens: torch.Tensor, segments: torch.Tensor | None = None,
               positions: torch.Tensor | None = None) -> torch.Tensor:
        B, T = tokens.shape
        if positions is None:
            positions = torch.arange(T, device=tokens.device).expand(B, T)
        mask: Mask = None
        if segments is not None:
            mask = document_block_mask(segments) if self.attention == "flex" else dense_document_mask(segments)
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, self.rope, positions, mask)
        return self.norm(x)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor, segments: torch.Tensor | None = None,
                positions: torch.Tensor | None = None, loss_chunk: int = 1024) -> torch.Tensor:
        return chunked_lm_loss(self.hidden(tokens, segments, positions), self.embed.weight, targets, loss_chunk)

    @torch.no_grad()
    def logits_last(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of the last position only: (B, V), float32."""
        return (self.hidden(tokens)[:, -1] @ self.embed.weight.t()).float()
