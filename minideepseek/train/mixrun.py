"""Stage 5 with ``pack.by_source`` data: the mixture sampler built from the packed manifest and the
config, the epoch check (seed 003 §五.1), and ``mixture.{json,md}`` from the batches actually trained.

When: the packed manifest has a ``by_source`` table. The schedule is ``train.mixture``, or, when it
is empty, one phase with the recipe weights stage 1 recorded in mixed_raw's manifest (renormalized
over the sources present in the packed data). Mixed packed data keeps today's loader.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from .. import pipeline
from ..config import ConfigError
from ..packing.stage import recipe_weights
from .config import TrainConfig
from .loader import SamplePlan
from .mixture import MixtureSampler, epochs_table

log = logging.getLogger(__name__)

MIXTURE_FILES = tuple(r for r in pipeline.stage(pipeline.SMOKE_TRAIN).reports if r.startswith("mixture."))  # the registry's
WARN_EPOCHS = 4.0  # seed 003 §五.1: past ~4 epochs repetition starts to cost (data-constrained regime)


def source_of_samples(plan: SamplePlan, table: dict[str, Any], samples: np.ndarray) -> np.ndarray:
    """Index (in sorted source names) of each sample's source, from the blocks' per-source ranges."""
    names = sorted(table)
    bounds = np.array([table[n]["block_range"][1] for n in names], np.int64)
    return np.searchsorted(bounds, np.asarray(samples, np.int64) // plan.windows, side="right")


def source_ranges(packed: dict[str, Any]) -> list[tuple[int, int]] | None:
    """The per-source block ranges of by_source packed data (None for mixed data)."""
    table = packed.get("by_source")
    return [tuple(table[n]["block_range"]) for n in sorted(table)] if table else None  # type: ignore[misc]


def build_mixture(tc: TrainConfig, plan: SamplePlan, packed: dict[str, Any], run_dir: Path,
                  world: int) -> MixtureSampler | None:
    table = packed.get("by_source")
    if not table:
        if tc.mixture:
            raise ConfigError("train.mixture needs per-source packed data; set pack.by_source=true and rerun "
                              "pack_shuffle.py (or remove train.mixture)")
        return None
    names = sorted(table)
    src = source_of_samples(plan, table, plan.train_samples)
    sources = {n: plan.train_samples[src == i] for i, n in enumerate(names)}
    if tc.mixture:
        per_step = tc.micro_batch * tc.grad_accum * world * tc.seq_len  # training tokens per optimizer step
        schedule = [(ph.fraction(tc.max_steps, per_step), dict(ph.weights)) for ph in tc.mixture]
    else:
        rec = {n: w for n, w in recipe_weights(run_dir).items() if n in table and len(sources[n])}
        total = sum(rec.values())
        if not total:
            raise ConfigError(f"{run_dir / pipeline.MIXED_RAW} records no recipe weights for {names}; set train.mixture")
        weights = {n: w / total for n, w in rec.items()}
        weights[max(weights)] += 1.0 - sum(weights.values())  # exact sum 1 after the division
        schedule = [(1.0, weights)]
    sampler = MixtureSampler(sources, schedule, seed=plan.seed, max_steps=tc.max_steps, micro_batch=tc.micro_batch,
                             grad_accum=tc.grad_accum, world=world)
    ep = epochs_table(sampler, unique_tokens(sampler, tc.seq_len), tc.seq_len, WARN_EPOCHS)
    for n, r in ep.items():
        if r["epochs"] > tc.max_epochs_per_source:
            raise ConfigError(f"source {n} would be read {r['epochs']:.1f} times (> train.max_epochs_per_source="
                              f"{tc.max_epochs_per_source}): lower its weight, lower train.max_steps, pack more "
                              f"of it, or raise train.max_epochs_per_source")
        if r["over_warning"]:
            log.warning("source %s: %.1f epochs planned (above %s: repetition starts to cost)", n, r["epochs"],
                        WARN_EPOCHS)
    return sampler


def unique_tokens(sampler: MixtureSampler, seq_len: int) -> dict[str, int]:
    return {n: int(len(sampler.sources[n])) * seq_len for n in sampler.names}


def mixture_report(sampler: MixtureSampler, plan: SamplePlan, table: dict[str, Any], batches: list[dict[str, Any]],
                   seq_len: int, window_steps: int) -> dict[str, Any]:
    """Realized token shares from the trained batches (``batches.jsonl``: every rank's samples per
    step), per phase, and per window of ``window_steps`` steps, against the schedule."""
    names = sampler.names
    per_step = sampler.micro_batch * sampler.grad_accum * sampler.world
    steps = [b["step"] for b in batches]
    counts = np.zeros((len(steps), len(names)), np.int64)
    for j, b in enumerate(batches):
        flat = np.array([s for rank in b["samples"] for s in rank], np.int64)
        counts[j] = np.bincount(source_of_samples(plan, table, flat), minlength=len(names))[:len(names)]
    phases, windows = [], []
    worst_phase = worst_window = 0.0
    for p, ph in enumerate(sampler.phases):
        lo_step, hi_step = sampler.phase_start(p) // per_step, ph.end_slot // per_step
        rows = [j for j, s in enumerate(steps) if lo_step < s <= hi_step]
        c = counts[rows].sum(axis=0)
        share = c / c.sum() if c.sum() else np.zeros(len(names))
        dev = float(np.abs(share - ph.weights).max()) if c.sum() else 0.0
        worst_phase = max(worst_phase, dev)
        phases.append({"phase": p, "steps": [lo_step + 1, hi_step], "tokens": int(c.sum()) * seq_len,
                       "target": dict(zip(names, ph.weights.tolist())),
                       "realized": dict(zip(names, [round(float(x), 6) for x in share])),
                       "max_deviation_pp": round(100 * dev, 4)})
        for w0 in range(0, len(rows), window_steps):
            part = rows[w0:w0 + window_steps]
            if len(part) < window_steps:
                break  # only full windows (the bound is stated for W slots)
            cw = counts[part].sum(axis=0)
            d = float(np.abs(cw / cw.sum() - ph.weights).max())
            worst_window = max(worst_window, d)
            windows.append({"phase": p, "steps": [steps[part[0]], steps[part[-1]]],
                            "max_deviation_pp": round(100 * d, 4),
                            "share": dict(zip(names, [round(float(x), 6) for x in cw / cw.sum()]))})
    total = counts.sum(axis=0)
    W = window_steps * per_step
    active = max(int(np.count_nonzero(ph.weights)) for ph in sampler.phases)
    delta = 1 / (2 * active - 2) if active > 1 else 1.0
    ep = epochs_table(sampler, unique_tokens(sampler, seq_len), seq_len, WARN_EPOCHS)
    consumed = {n: round(float(total[i]) / len(sampler.sources[n]), 4) if len(sampler.sources[n]) else 0.0
                for i, n in enumerate(names)}
    return {
        "sources": names, "schedule": [{"until_step": p["steps"][1], "weights": p["target"]} for p in phases],
        "slots_per_step": per_step, "seq_len": seq_len,
        "phases": phases, "max_phase_deviation_pp": round(100 * worst_phase, 4),
        "window": {"steps": window_steps, "slots": W, "bound_pp": round(100 * 2 * (1 - delta) / W, 4),
                   "max_deviation_pp": round(100 * worst_window, 4), "windows": windows},
        "realized_total": {n: int(total[i]) * seq_len for i, n in enumerate(names)},
        "epochs": {n: {**ep[n], "consumed": consumed[n]} for n in names},
    }


def mixture_markdown(r: dict[str, Any]) -> str:
    names = r["sources"]
    lines = ["# Training mixture", "",
             "Realized shares are counted from the batches actually trained (every rank's samples, "
             "`batches.jsonl`), not from the plan. One sample = one window of "
             f"{r['seq_len']} tokens; {r['slots_per_step']} samples per step.", "",
             "## Per phase", "",
             "| phase | steps | source | target | realized | deviation |", "|---|---|---|---:|---:|---:|"]
    for p in r["phases"]:
        for n in names:
            t, z = p["target"][n], p["realized"][n]
            lines.append(f"| {p['phase']} | {p['steps'][0]}-{p['steps'][1]} | {n} | {100 * t:.2f}% | {100 * z:.2f}% | "
                         f"{100 * (z - t):+.2f} pp |")
    w = r["window"]
    lines += ["", f"Max deviation per phase: **{r['max_phase_deviation_pp']} pp**. Per window of {w['steps']} steps "
              f"({w['slots']} samples): max **{w['max_deviation_pp']} pp** over {len(w['windows'])} windows "
              f"(bound {w['bound_pp']} pp).", "",
              "## Epochs per source (seed 003 §五.1: w_i·D/U_i)", "",
              "| source | unique tokens U | planned epochs | consumed epochs | > 4 |", "|---|---:|---:|---:|---|"]
    for n in names:
        e = r["epochs"][n]
        lines.append(f"| {n} | {e['unique_tokens']:,} | {e['epochs']:.3f} | {e['consumed']:.3f} | "
                     f"{'WARNING' if e['over_warning'] else ''} |")
    if r.get("val_loss_by_source"):
        lines += ["", "## Final validation loss per source (held-out blocks of that source)", "",
                  "| source | val loss | tokens | held-out blocks |", "|---|---:|---:|---:|"]
        for n, v in r["val_loss_by_source"].items():
            vl = "—" if v["val_loss"] is None else f"{v['val_loss']:.4f}"
            lines.append(f"| {n} | {vl} | {v['tokens']:,} | {v['held_out_blocks']} |")
    return "\n".join(lines) + "\n"


def val_loss_by_source(model: Any, plan: SamplePlan, table: dict[str, Any], tc: TrainConfig, device: Any,
                       amp: Any) -> dict[str, dict[str, Any]]:
    """The final model's token-mean loss on each source's held-out samples (the held-out blocks are
    single-source with by_source packing, so this costs one extra pass over the validation set)."""
    import torch

    from .trainer import to_device

    names = sorted(table)
    src = source_of_samples(plan, table, plan.val_samples)
    out: dict[str, dict[str, Any]] = {}
    model.eval()
    with torch.no_grad():
        for i, n in enumerate(names):
            mine = plan.val_samples[src == i]
            tot, cnt = 0.0, 0
            for j in range(0, len(mine), tc.micro_batch):
                x, y, seg, pos = to_device(plan.gather(mine[j:j + tc.micro_batch], tc.doc_mask), device, tc.doc_mask)
                with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
                    loss = model.forward(x, y, seg, pos, tc.loss_chunk)  # eager: the step may be compiled
                k = int((y != -100).sum())
                tot += float(loss) * k
                cnt += k
            out[n] = {"val_loss": round(tot / cnt, 6) if cnt else None, "tokens": cnt,
                      "held_out_blocks": int(len(np.unique(mine // plan.windows)))}
    model.train()
    return out


def write_mixture(stage: Any, sampler: MixtureSampler, plan: SamplePlan, table: dict[str, Any],
                  batches: list[dict[str, Any]], tc: TrainConfig, val: dict[str, Any] | None = None) -> None:
    """mixture.{json,md} into the stage's temp dir (deterministic on CPU: part of the artifact)."""
    from ..fsio import write_json_atomic, write_text_atomic

    # W = a tenth of the run (at least one step): what a reader of the loss curve would call "a while"
    r = mixture_report(sampler, plan, table, batches, tc.seq_len, max(1, tc.max_steps // 10))
    r["val_loss_by_source"] = val or {}
    write_json_atomic(stage.tmp_dir / "mixture.json", r)
    write_text_atomic(stage.tmp_dir / "mixture.md", mixture_markdown(r))
    plot_mixture(r, stage.tmp_dir / "mixture.png")


def plot_mixture(r: dict[str, Any], path: Any) -> bool:
    """Realized share of every source per window of W steps (solid) against the schedule's weights
    (dashed, one step per phase); a phase switch is a vertical line. False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=100)
    wins = r["window"]["windows"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, n in enumerate(r["sources"]):
        c = colors[k % len(colors)]
        if wins:
            ax.plot([w["steps"][1] for w in wins], [100 * w["share"][n] for w in wins], "o-", ms=3, color=c,
                    label=f"{n} realized (per {r['window']['steps']} steps)")
        xs, ys = [], []
        for p in r["phases"]:
            xs += [p["steps"][0] - 1, p["steps"][1]]
            ys += [100 * p["target"][n]] * 2
        ax.plot(xs, ys, "--", color=c, lw=1, label=f"{n} target")
    for p in r["phases"][1:]:
        ax.axvline(p["steps"][0] - 0.5, color="grey", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("share of training tokens (%)")
    ax.set_title(f"Training mixture: max deviation {r['max_phase_deviation_pp']} pp per phase, "
                 f"{r['window']['max_deviation_pp']} pp per window")
    ax.grid(alpha=0.3)
    # below the axes, not inside them: inside, the legend covered a source's line
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True
