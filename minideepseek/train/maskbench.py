"""The document-mask benchmark the smoke train reports: what attending only within a document costs.

Kept apart from the training loop (``trainer.py``): it measures, it does not train. The smoke-train
stage runs it after the last step (``train.bench_steps``) and puts its figures in the report.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np
import torch

from .config import TrainConfig
from .loader import Batch, SamplePlan
from .model import GPT, AttentionKind
from .trainer import to_device


def bench_doc_mask(model: GPT, plan: SamplePlan, tc: TrainConfig, device: torch.device, amp: torch.dtype | None,
                   steps: int) -> dict[str, Any]:
    """Tokens/s of forward+backward with and without the document mask on the same micro-batches.

    The micro-batches are windows that hold more than one document (where the mask differs from
    plain causal attention), taken in epoch-0 order. Runs alternate between the variants and each
    variant's fastest step counts, so a busy shared machine hits all alike. The mask is applied the
    way training applies it (``model.attention``); with FlexAttention, the dense SDPA mask (the path
    before it) is timed too. The eager model (``model.forward``) in every variant: a compiled step
    would need a graph of its own per variant. No optimizer step: the weights are unchanged."""
    order = plan.epoch_order(0)[: 64 * tc.micro_batch * steps]
    docs = plan.documents_per_sample(order)
    multi = order[docs > 1]
    pool = multi if len(multi) >= tc.micro_batch * steps else order
    batches = [plan.gather(pool[i * tc.micro_batch:(i + 1) * tc.micro_batch]) for i in range(steps)]
    trained_with: AttentionKind = model.attention
    # (variant name, attention path, mask on)
    variants: list[tuple[str, AttentionKind, bool]] = [("with_mask", trained_with, True), ("without_mask", "sdpa", False)]
    if trained_with == "flex":
        variants.append(("dense_mask", "sdpa", True))
    best = {name: float("inf") for name, _, _ in variants}
    ctx = (lambda: torch.autocast(device.type, dtype=amp)) if amp else contextlib.nullcontext

    def one(b: Batch, attention: AttentionKind, mask: bool) -> float:
        model.attention = attention
        x, y, seg, pos = to_device(b, device, mask)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.time()
        with ctx():
            loss = model.forward(x, y, seg, pos, tc.loss_chunk)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        model.zero_grad(set_to_none=True)
        return time.time() - t0

    try:
        for _, attention, mask in variants:  # warm up every path (FlexAttention compiles its kernel here)
            one(batches[0], attention, mask)
        for b in batches:
            for name, attention, mask in variants:
                best[name] = min(best[name], one(b, attention, mask))
    finally:
        model.attention = trained_with
    n = tc.micro_batch * tc.seq_len
    used = np.concatenate([b.samples for b in batches])
    out = {"steps": steps, "tokens_per_step": n, "attention": trained_with, "eager": True,
           **{name: n / t for name, t in best.items()},
           "multi_doc_windows": bool(pool is multi),
           "docs_per_window_in_bench": float(plan.documents_per_sample(used).mean()),
           "multi_doc_share": float(np.mean(docs > 1)), "share_sampled_windows": len(order)}
    return out
