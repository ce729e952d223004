"""Stage 5: train a small decoder-only transformer on the packed shards; loss, tokens/s, decodes.

    .venv/bin/python smoke_train.py --config configs/demo.yaml                  # one process (CPU or one GPU)
    .venv/bin/python smoke_train.py --config configs/demo.yaml --nproc 2        # 2 ranks, gloo on CPU
    .venv/bin/python smoke_train.py --config configs/gpu_8x.yaml --nproc 8      # 8 ranks, NCCL on cuda:0-7, bf16
    .venv/bin/python smoke_train.py --config configs/demo.yaml --set train.max_steps=50 --set train.doc_mask=false

--nproc N starts N ranks on this machine with no network rendezvous: they meet through a file store
in a private temp dir and their collectives use loopback only (minideepseek/train/launch.py; no port
is opened on another interface). Multi-node runs under torchrun are for trusted networks only
(docs/security.md).

Writes data/<run>/smoke_train/ (metrics.jsonl, batches.jsonl, checkpoint.pt, report) and
reports/<run>/smoke_train.{md,json} + smoke_train_loss.png. An interrupted run resumes from its last
checkpoint in data/<run>/smoke_train.ckpt/ (train.resume, default true). Exit codes: 0 pass,
1 a pass criterion failed (train.fail_on_criteria), 2 config or upstream error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

# Before torch is imported: transparent huge pages for the CPU allocator cut page faults ~60x and
# remove 2-3x run-to-run noise here (MEASURED_FACTS.md).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from minideepseek.cli import build_stage_parser, run_cli, setup_logging, stage_plan  # noqa: E402

RANK = int(os.environ.get("RANK", 0))


def _run(args: argparse.Namespace) -> None:
    # imported here, not at the top: --help must not pay for torch (seconds)
    from minideepseek.invocation import Invocation
    from minideepseek.train.stage import ARTIFACT, run_smoke_train

    plan, cfg = stage_plan(args, "smoke_train", quiet=RANK != 0)
    man = run_smoke_train(cfg, plan.upstream_hashes("smoke_train"), Invocation.from_args(args), force=args.force)
    args.outcome, args.fail_on_criteria = man, cfg.train.fail_on_criteria
    if RANK != 0:
        return
    if man.get("status") == "stopped":
        print(f"smoke_train: stopped after step {man['step']} (train.stop_at_step); checkpoints in {man['checkpoints']}; "
              f"rerun to resume")
        return
    c = man["counters"]
    print(f"smoke_train: {c['params']:,} params, steps 1-{c['steps']}, loss {c['first_loss']:.3f} -> "
          f"{c['last_loss']:.3f}, val {c['val_first']:.3f} -> {c['val_last']:.3f}, "
          f"{c['median_tokens_per_s']:,.0f} tok/s on {c['world_size']} rank(s): {'PASS' if c['passed'] else 'FAIL'} "
          f"({', '.join(k for k, ok in c['criteria'].items() if not ok) or 'all criteria met'}); "
          f"{cfg.run.run_dir / ARTIFACT}; report: {cfg.run.report_dir / 'smoke_train.md'}")


def build_parser() -> argparse.ArgumentParser:
    p = build_stage_parser("smoke_train.py", __doc__ or "", executor=False)
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="ranks on this machine (default 1): gloo on CPU, NCCL with one GPU each; no TCP rendezvous")
    return p


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    """``--nproc N``: validate the config, hold the run lock, start the ranks (train/launch.py)."""
    from minideepseek.config import build
    from minideepseek.runconfig import RunConfig, load_tree
    from minideepseek.train.launch import launch, strip_nproc

    out = {"rc": 0}

    def body(a: argparse.Namespace) -> None:
        run = build(RunConfig, load_tree(a.config, a.overrides).get("run") or {}, "run")
        # each rank runs the script this process runs (a wrapper such as tests/compiled_smoke_train.py
        # sets options before calling main: its ranks must get them too)
        started = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") and os.path.isfile(sys.argv[0]) else __file__
        out["rc"] = launch(os.path.abspath(started), strip_nproc(argv), a.nproc, run.run_dir)

    return run_cli(body, args) or out["rc"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.restart:  # stage 5's finished units are its checkpoints: --restart trains from step 0
        args.overrides.append("train.resume=false")
    if args.nproc < 1:
        print(f"error: --nproc {args.nproc}: give 1 or more ranks", file=sys.stderr)
        return 2
    if args.nproc > 1 and "RANK" not in os.environ:
        setup_logging(args.log_level)
        return _launch(args, argv)
    setup_logging(args.log_level if RANK == 0 else "WARNING")
    if RANK:
        for h in logging.getLogger().handlers:
            h.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [rank {RANK}] %(name)s: %(message)s",
                                             "%H:%M:%S"))
    args.outcome, args.fail_on_criteria = {}, True
    rc = run_cli(_run, args)
    if rc:
        return rc
    if args.outcome.get("counters", {}).get("passed") is False and args.fail_on_criteria:
        print("smoke_train: pass criteria failed (see the report); exit 1", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
