"""Held-out metrics of a binary scorer, in plain Python (no scikit-learn in the venv).

``scores`` are the model's probability of the positive label; ``labels`` are 1 (positive) or 0.

* ROC AUC as the Mann-Whitney statistic: the probability that a random positive scores above a
  random negative, ties counting one half. Computed from midranks in O(n log n); equal to the area
  under the ROC curve traced through every distinct threshold (trapezoids at tied scores).
* Precision, recall and F1 of the positive class at one threshold (kept = score >= threshold, the
  filter's rule).
* Calibration by decile of score: for each bin [0, .1), [.1, .2) ... [.9, 1], the documents in it,
  their mean score and the share that really is positive. A calibrated model has the two close; a
  ranking filter (top fraction) only needs the order, but a fixed threshold needs calibration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    """Mann-Whitney AUC with midranks for ties; None when one class is absent (AUC is undefined)."""
    n = len(scores)
    if n != len(labels):
        raise ValueError(f"{n} scores but {len(labels)} labels")
    n_pos = sum(1 for y in labels if y)
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(n), key=lambda i: scores[i])
    rank_sum_pos = 0.0
    i = 0
    while i < n:  # a run of equal scores shares the mean of its ranks (1-based)
        j = i
        while j + 1 < n and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        midrank = (i + j) / 2 + 1
        rank_sum_pos += midrank * sum(1 for k in range(i, j + 1) if labels[order[k]])
        i = j + 1
    return (rank_sum_pos - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def prf(scores: Sequence[float], labels: Sequence[int], threshold: float) -> dict[str, Any]:
    """Precision, recall, F1 and accuracy of "positive when score >= threshold", with the counts."""
    tp = sum(1 for s, y in zip(scores, labels) if s >= threshold and y)
    fp = sum(1 for s, y in zip(scores, labels) if s >= threshold and not y)
    fn = sum(1 for s, y in zip(scores, labels) if s < threshold and y)
    tn = len(scores) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"threshold": threshold, "tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": round(precision, 4),
            "recall": round(recall, 4), "f1": round(f1, 4),
            "accuracy": round((tp + tn) / len(scores), 4) if scores else 0.0}


def calibration(scores: Sequence[float], labels: Sequence[int], bins: int = 10) -> list[dict[str, Any]]:
    """Per score bin: documents, mean score, observed positive share (None for an empty bin)."""
    rows = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, s in enumerate(scores) if lo <= s < hi or (b == bins - 1 and s >= hi)]
        rows.append({"bin": f"[{lo:.1f}, {hi:.1f}{']' if b == bins - 1 else ')'}", "docs": len(idx),
                     "mean_score": round(sum(scores[i] for i in idx) / len(idx), 4) if idx else None,
                     "positive_share": round(sum(labels[i] for i in idx) / len(idx), 4) if idx else None})
    return rows


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation between order statistics (numpy's default rule)."""
    if not values:
        raise ValueError("quantile of no values")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
