"""Cross-entropy through the tied output projection, a chunk of positions at a time.

With a 150K vocabulary the logits of one micro-batch are the biggest tensor of the step: B=8, T=4096
gives 8 x 4096 x 150K x 4 bytes = 19.7 GB in float32, and autograd would keep it (and its softmax)
for the backward. ``ChunkedLMLoss`` never builds it: for each chunk of ``chunk`` positions it forms
that chunk's logits, takes the loss *and* its gradients with respect to the hidden states and the
output weight right there in the forward, and frees the logits. The backward only scales the stored
gradients by the incoming gradient. That is the same arithmetic as the full loss (one matmul
forward, two backward; no recomputation, unlike wrapping each chunk in ``torch.utils.checkpoint``),
and memory holds one chunk's logits (chunk x V floats, 390 MB at 1024 x 95K) plus one weight-sized
gradient buffer. Equality with ``full_lm_loss`` (loss and both gradients) is tested.

Under bf16 autocast the chunk matmuls run in bf16 and the softmax in float32; the weight gradient is
accumulated in float32.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

IGNORE = -100  # target of positions that predict nothing (last token of a block, padding)


def _acc_dtype(h: torch.Tensor) -> torch.dtype:
    """Softmax and accumulation dtype: float32, or float64 when the inputs are (exact tests)."""
    return torch.float64 if h.dtype == torch.float64 else torch.float32


class ChunkedLMLoss(torch.autograd.Function):
    """Mean next-token cross-entropy of ``h @ weight.T`` over targets != IGNORE, chunked."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,  # type: ignore[override]
                chunk: int) -> torch.Tensor:
        acc = _acc_dtype(h)
        n_valid = (targets != IGNORE).sum().clamp(min=1)
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device)
        total = torch.zeros((), dtype=acc, device=h.device)
        for lo in range(0, h.shape[0], chunk):
            hc, tc = h[lo:lo + chunk], targets[lo:lo + chunk]
            valid = tc != IGNORE
            safe = torch.where(valid, tc, 0)
            logits = (hc @ weight.t()).to(acc)
            lse = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(1, safe[:, None]).squeeze(1)
            total += ((lse - picked) * valid).sum()
            # d loss / d logits = (softmax - onehot) / n_valid, zero on ignored rows; in place on logits
            probs = logits.sub_(lse[:, None]).exp_()
            probs[torch.arange(len(tc), device=tc.device), safe] -= 1.0
            probs.mul_((valid.to(acc) / n_valid)[:, None])
            g = probs.to(weight.dtype) if not torch.is_autocast_enabled() else probs
            grad_h[lo:lo + chunk] = (g @ weight).to(h.dtype)
            grad_w += (g.t() @ hc).to(acc)
            del logits, probs, g
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        return total / n_valid

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None


def chunked_lm_loss(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Mean cross-entropy of ``h (..., d)`` projected by ``weight (V, d)`` against ``targets (...)``.

    Under ``torch.no_grad`` (evaluation) no gradient buffers are made: just the chunked loss."""
    h2, t2 = h.reshape(-1, h.shape[-1]), targets.reshape(-1)
    if not (torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad)):
        total = torch.zeros((), dtype=_acc_dtype(h), device=h.device)
        for lo in range(0, h2.shape[0], chunk):
            logits = (h2[lo:lo + chunk] @ weight.t()).to(total.dtype)
            total += F.cross_entropy(logits, t2[lo:lo + chunk], ignore_index=IGNORE, reduction="sum")
        return total / (t2 != IGNORE).sum().clamp(min=1)
    return ChunkedLMLoss.apply(h2, weight, t2, chunk)


def full_lm_loss(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The reference: materializes all logits (what the chunked loss must equal)."""
    logits = (h.reshape(-1, h.shape[-1]) @ weight.t()).to(_acc_dtype(h))
    return F.cross_entropy(logits, targets.reshape(-1), ignore_index=IGNORE)
