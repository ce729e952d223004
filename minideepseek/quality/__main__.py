"""Train a fastText quality classifier (model + card + held-out report); report what it did in a run.

    .venv/bin/python -m minideepseek.quality train --positives good.jsonl --negatives bad.jsonl --out models/q
    .venv/bin/python -m minideepseek.quality train --config configs/quality/demo_classifier.yaml [--set fasttext.epoch=3]
    .venv/bin/python -m minideepseek.quality build --config configs/demo.yaml    # what stage 1 does first
    .venv/bin/python -m minideepseek.quality report --config configs/demo.yaml   # rebuild quality_report.md

--config names a small YAML holding the keys of QualityTrainConfig (out, positives, negatives, text_field,
group_field, run_dir, rule, label, held_out, seed, max_chars, threshold, fasttext: {...}); the flags and
--set override it. The held-out split is by group (component, else URL host): no group is on both sides.
"""

from __future__ import annotations

import argparse

from ..classifier.data import QualityTrainConfig
from ..cli import run_cli, setup_logging
from ..config import apply_overrides, build, load_yaml


def build_config(args: argparse.Namespace) -> QualityTrainConfig:
    data = load_yaml(args.config) if args.config else {}
    sets = list(args.overrides)
    for key, value in (("positives", args.positives), ("negatives", args.negatives)):
        if value:
            data[key] = list(value)
    for key in ("out", "run_dir", "seed"):
        v = getattr(args, key)
        if v is not None:
            data[key] = v
    data = apply_overrides(data, sets)
    return build(QualityTrainConfig, data, "quality train")


def _train(args: argparse.Namespace) -> None:
    from ..classifier.train import CARD_FILE, REPORT, train_model

    cfg = build_config(args)
    card = train_model(cfg)
    auc = card["metrics"]["roc_auc"]
    print(f"quality model: {cfg.out}/{card['model_file']} (held-out ROC AUC "
          f"{'undefined' if auc is None else f'{auc:.4f}'} on {card['split']['held_out_docs']:,} documents in "
          f"{len(card['split']['held_out_groups'])} unseen groups); card: {cfg.out}/{CARD_FILE}; report: "
          f"{cfg.out}/{REPORT}.md")


def _report(args: argparse.Namespace) -> None:
    from ..pipeline import MIXED_RAW
    from ..runconfig import load_stage_config
    from ..sampling.config import MixSamplerConfig
    from ..sampling.quality_report import write_quality_report

    cfg = load_stage_config(MixSamplerConfig, args.config, args.overrides, quiet=True)
    path = write_quality_report(cfg.run.run_dir / MIXED_RAW, cfg.run.report_dir, cfg.run.name,
                                {s.name: s.filters for s in cfg.sources})
    print(f"quality report: {path}")


def _build(args: argparse.Namespace) -> None:
    import time

    from ..runconfig import load_stage_config
    from ..sampling.config import MixSamplerConfig
    from ..sampling.quality_build import ensure_models

    cfg = load_stage_config(MixSamplerConfig, args.config, args.overrides, quiet=True)
    t0 = time.perf_counter()
    refs = ensure_models(cfg, force=args.force)
    for r in refs:
        print(f"{r.name}: {r.path} (sha256 {r.fingerprint[:16]}) in {time.perf_counter() - t0:.1f} s")
    if not refs:
        print(f"{args.config}: no quality filter")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=".venv/bin/python -m minideepseek.quality", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a classifier and write model.bin, model_card.json and its report",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--config", default=None, help="YAML with the trainer's keys (optional)")
    t.add_argument("--positives", nargs="+", default=None, metavar="JSONL", help="positive documents")
    t.add_argument("--negatives", nargs="+", default=None, metavar="JSONL", help="negative documents")
    t.add_argument("--run-dir", dest="run_dir", default=None, help="a run (data/<run>) to label with the config's rule")
    t.add_argument("--out", default=None, help="output folder for the model, card and report")
    t.add_argument("--seed", type=int, default=None, help="split and training seed (default 1234)")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key, e.g. --set fasttext.epoch=3 (repeatable)")
    t.add_argument("--log-level", default="INFO", metavar="LEVEL")
    b = sub.add_parser("build", help="build (or reuse) the models a pipeline config's quality filters train: (what "
                                     "stage 1 does first)")
    b.add_argument("--config", default="configs/demo.yaml", help="the pipeline config")
    b.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--force", action="store_true", help="retrain even when the model's build key matches")
    b.add_argument("--log-level", default="INFO", metavar="LEVEL")
    r = sub.add_parser("report", help="reports/<run>/quality_report.md from a run's signal store (signals: full)")
    r.add_argument("--config", default="configs/demo.yaml", help="the run's pipeline config")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("--log-level", default="INFO", metavar="LEVEL")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    if args.command == "report":
        return run_cli(_report, args, validate=False)
    if args.command == "build":
        return run_cli(_build, args, validate=False)
    # validate=False: --config is the trainer's own YAML, not a pipeline config
    return run_cli(_train, args, validate=False)


if __name__ == "__main__":
    raise SystemExit(main())
