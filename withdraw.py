"""Withdraw documents from a finished run: every stage's artifacts, down to the packed token blocks.

    .venv/bin/python withdraw.py --id fineweb_edu/0123456789abcdef --who "legal@example.org" --why "takedown #12"
    .venv/bin/python withdraw.py --url 'https://docs.python.org/3.11/library/*' --why "license change"
    .venv/bin/python withdraw.py --text "a distinctive passage of at least twenty characters"
    .venv/bin/python withdraw.py --hash "$(.venv/bin/python -m minideepseek.tickets hash page.txt)" --dry-run   # show only
    .venv/bin/python withdraw.py --source arxiv --set withdraw.max_docs=1000
    .venv/bin/python withdraw.py --resume                                              # finish an interrupted one
    bash run_pipeline.sh withdraw --id ...                                   # then rerun what went stale

Selectors combine (any match withdraws). The request is logged in data/<run>/deletion_requests.jsonl
(who/what/when/why); the same request twice is a logged no-op. Only the shards holding a withdrawn
document are rewritten; reports are refreshed; reports/<run>/release_note.md lists what was removed,
where, and the figures before and after; verification scans every artifact for the documents' ids,
hashes and n-grams. Exit codes: 0 done (verified), 2 bad request/config, 3 nothing matched
(nothing changed), 4 done but verification found traces (listed in the impact note).
"""

from __future__ import annotations

import argparse

from minideepseek.cli import run_cli, setup_logging, stage_parser


def _run(args: argparse.Namespace) -> int:
    # imported here, not at the top: --help must not pay for datasets/tokenizers
    from minideepseek.runconfig import load_stage_config
    from minideepseek.tickets import SELECTOR_KINDS, Selector
    from minideepseek.withdraw.config import WithdrawStageConfig
    from minideepseek.withdraw.run import Withdrawal

    cfg = load_stage_config(WithdrawStageConfig, args.config, args.overrides, quiet=True)
    w = Withdrawal(cfg, args.config, args.overrides)
    if args.resume:
        return w.resume(args.retrain_tokenizer)
    selectors = [Selector(kind, v) for kind in SELECTOR_KINDS for v in getattr(args, kind) or []]
    return w.request(selectors, args.who, args.why, args.retrain_tokenizer, args.dry_run)


def build_parser() -> argparse.ArgumentParser:
    p = stage_parser("withdraw.py", __doc__ or "", force=False)  # a withdrawal edits artifacts: nothing to force
    g = p.add_argument_group("what to withdraw (repeatable, combined with OR)")
    g.add_argument("--id", action="append", help="document id (its upsampled #eK copies follow)")
    g.add_argument("--url", action="append", help="url/origin, exact; a trailing * makes it a prefix")
    g.add_argument("--hash", action="append", help="the document's `hash` (sha256 of its normalized text)")
    g.add_argument("--text", action="append", help=">= 20-character fragment (compared normalized)")
    g.add_argument("--source", action="append", help="a whole recipe source")
    p.add_argument("--who", default="", help="who asked (recorded in the ticket log)")
    p.add_argument("--why", default="", help="why (recorded in the ticket log)")
    p.add_argument("--dry-run", action="store_true", help="resolve and locate only; change nothing")
    p.add_argument("--resume", action="store_true", help="finish interrupted withdrawals from the ticket log")
    p.add_argument("--retrain-tokenizer", action="store_true",
                   help="when the withdrawn share of the tokenizer's training sample reaches withdraw.retrain_share, "
                        "retrain it and re-pack everything (never done without this flag)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    setup_logging(args.log_level)
    rc = {"rc": 0}

    def body(a: argparse.Namespace) -> None:
        rc["rc"] = _run(a)

    err = run_cli(body, args)
    return err or rc["rc"]


if __name__ == "__main__":
    raise SystemExit(main())
