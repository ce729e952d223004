"""The FLOP count behind the report's MFU (model FLOPs utilization), so runs can be compared.

Per trained token, forward + backward (backward = 2 x forward):
- matmuls: 6 x the parameters that multiply activations: per layer qkv (3 d^2), the attention output
  (d^2), SwiGLU gate+up (2 d d_ff) and down (d_ff d), plus the tied output head (V d). The embedding
  lookup is a gather, not a matmul, and norms/RoPE are elementwise: not counted.
- attention: per layer, Q K^T and A V cost 2 d FLOPs each per (query, key) pair the mask lets
  through, forward; x 3 with the backward: 12 d per pair. Pairs are counted from the actual
  document lengths of the windows trained (sum of L (L + 1) / 2 per document, or T (T + 1) / 2 per
  window without the document mask), so a run on short documents is not credited with work the
  mask skips. Kernels compute more than that (whole 128 x 128 blocks on the diagonal); MFU counts
  useful work only.

Peak: the dense bf16 tensor-core figure of the device's datasheet (no 2:4 sparsity), or
``train.peak_tflops``. On one H200 this count gives 14.6% MFU for today's 117,146 tokens/s on
7-document windows, the issue's figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .model import ModelConfig

# Dense bf16 peak TFLOP/s per device (datasheets, SXM parts; PCIe/NVL parts are lower: set
# train.peak_tflops). Matched as a substring of torch.cuda.get_device_name(), first match wins.
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.5), ("H100", 989.5), ("H800", 989.5), ("GH200", 989.5),
    ("B200", 2250.0), ("A100", 312.0), ("A800", 312.0), ("L40S", 362.1), ("A10G", 70.0),
)


def matmul_params(cfg: ModelConfig) -> int:
    """Weights that multiply activations once per token, including the tied output head."""
    d = cfg.d_model
    return cfg.n_layer * (4 * d * d + 3 * d * cfg.d_ff) + cfg.vocab_size * d


def document_pairs(lengths: np.ndarray | list[int]) -> int:
    """(query, key) pairs causal attention within each document of these lengths lets through."""
    n = np.asarray(lengths, np.int64)
    return int((n * (n + 1) // 2).sum())


def flops_per_token(cfg: ModelConfig, pairs_per_token: float) -> dict[str, float]:
    """Training FLOPs per token (forward + backward), split into matmuls and attention."""
    mm = 6.0 * matmul_params(cfg)
    attn = 12.0 * cfg.n_layer * cfg.d_model * pairs_per_token
    return {"matmul": mm, "attention": attn, "total": mm + attn}


def peak_tflops(device_name: str | None, configured: float) -> tuple[float | None, str]:
    """(peak TFLOP/s of one device or None, where the figure comes from)."""
    if configured > 0:
        return configured, "train.peak_tflops"
    for key, tf in PEAK_BF16_TFLOPS:
        if device_name and key in device_name:
            return tf, f"{key} dense bf16 datasheet"
    return None, f"{device_name or 'this device'} is not in the peak table; set train.peak_tflops for an MFU"


def mfu_report(cfg: ModelConfig, pairs: int, tokens: int, tokens_per_s: float, devices: int,
               device_name: str | None, configured_peak: float, bf16: bool) -> dict[str, Any]:
    """The report's FLOP count and MFU for ``tokens`` trained tokens holding ``pairs`` attended pairs,
    at ``tokens_per_s`` over ``devices`` devices. The peak table is for bf16: an fp32 run gets an MFU
    only against a configured peak."""
    per_tok = flops_per_token(cfg, pairs / max(tokens, 1))
    peak, source = peak_tflops(device_name, configured_peak)
    if peak is not None and not bf16 and configured_peak <= 0:
        peak, source = None, "the peak table is for bf16 autocast; set train.peak_tflops for this dtype"
    achieved = tokens_per_s * per_tok["total"] / 1e12
    return {
        "flops_per_token": per_tok["total"], "matmul_flops_per_token": per_tok["matmul"],
        "attention_flops_per_token": per_tok["attention"], "matmul_params": matmul_params(cfg),
        "attended_pairs_per_token": pairs / max(tokens, 1), "tokens_counted": tokens,
        "achieved_tflops": achieved, "devices": devices, "peak_tflops_per_device": peak, "peak_source": source,
        "mfu": achieved / (peak * devices) if peak else None,
        "formula": "6 x matmul params (incl. tied head) + 12 x n_layer x d_model x attended (q, k) pairs per token",
    }
