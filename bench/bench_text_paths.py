"""Stage 1's text paths made faster for issue 33, each timed against the plain version it replaced, in
this process, on the demo corpus's real records: ratios, and that the answers are the same.

    .venv/bin/python bench/bench_text_paths.py            # the demo corpus (built on first use)
    .venv/bin/python bench/bench_text_paths.py --rounds 3      # best of 3 (~9 min)

The paths (py-spy over stage 1 at 10M tokens of the scale corpus named them; the replaced forms are
reproduced here as the baseline, the tests in tests/test_fast_paths.py check the same equalities):

* PII: IPv4, dotted-quad and phone patterns with a leading lookahead; email and IPv6 tried only
  before their "@" / ":" (``PiiRedactor.find`` as a whole, against the module with those taken out);
* ``post_clean``: trailing blanks by ``rstrip`` per line, the 3+-blank-lines regex only when present;
  ``_BARE_SGR_RE`` with its lookahead;
* the token counter's added-token check (``AddedTokenFinder`` against the alternation regex).

A whole-stage A/B (stage 1 at 10M tokens, this commit against its parent) is in the closing note of
issue 33; this script is the part a reader can rerun in a minute.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek.demo_corpus.build import build_demo_corpus  # noqa: E402
from minideepseek.extract import _clean  # noqa: E402
from minideepseek.filters import pii  # noqa: E402
from minideepseek.tokencount import AddedTokenFinder, deepseek_tokenizer_path  # noqa: E402

DOMAINS = ("web_en", "code", "math", "academic", "zh")


def _without_lookahead(rx: re.Pattern[str]) -> re.Pattern[str]:
    """``rx`` as it was before the speed work: without its leading ``(?=...)``."""
    lead = re.match(r"\(\?=[^)]*\)", rx.pattern)
    return re.compile(rx.pattern[lead.end():], rx.flags)


def _plain_pii() -> Callable[[str], Any]:
    """``PiiRedactor.find`` with the patterns as they were (no lookahead, finditer over the whole text)."""
    import types

    plain = types.ModuleType("pii_plain")
    plain.__dict__.update(pii.__dict__)
    for name in ("IPV4_RE", "_DOTTED_QUAD", "PHONE_RE"):
        setattr(plain, name, _without_lookahead(getattr(pii, name)))
    plain._finditer_before = lambda rx, text, anchor, reach: rx.finditer(text)
    # find() reads its globals from its module: a copy of the function bound to the plain namespace
    find = types.FunctionType(pii.PiiRedactor.find.__code__, plain.__dict__, "find")
    red = pii.PiiRedactor()
    return lambda t: find(red, t)


def _plain_post_clean(text: str) -> str:
    text = re.sub(r"[^\S\n]+$", "", text, flags=re.MULTILINE)
    text = _clean._MANY_BLANKS_RE.sub("\n\n\n", text)
    text = text.strip("\n")
    return text if text.strip() else ""


def _time(f: Callable[[str], Any], texts: list[str], rounds: int) -> tuple[float, list[Any]]:
    best, out = float("inf"), []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = [f(t) for t in texts]
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=1, help="best of N per path (one round: ~3 min on 2 cores)")
    args = p.parse_args()
    src = build_demo_corpus()
    texts = [r["raw"] for d in DOMAINS for r in src.iter_domain(d) if r.get("raw")]
    chars = sum(map(len, texts))
    print(f"{len(texts):,} demo records, {chars / 1e6:.1f}M characters; best of {args.rounds}")
    added = {a["content"] for a in json.loads(deepseek_tokenizer_path().read_text())["added_tokens"]}
    alternation = re.compile("|".join(map(re.escape, sorted(added, key=len, reverse=True))))
    plain_sgr = _without_lookahead(_clean._BARE_SGR_RE)
    finder = AddedTokenFinder(added)
    red = pii.PiiRedactor()
    cases = [
        ("pii find", _plain_pii(), red.find),
        ("post_clean", _plain_post_clean, _clean.post_clean),
        ("bare SGR residue", lambda t: plain_sgr.sub("", t), lambda t: _clean._BARE_SGR_RE.sub("", t)),
        ("added-token check", lambda t: alternation.search(t) is not None, finder.contains),
    ]
    print(f"{'path':<20} {'plain s':>8} {'fast s':>8} {'speedup':>8}  same")
    rows = []
    for name, plain, fast in cases:
        tp, a = _time(plain, texts, args.rounds)
        tf, b = _time(fast, texts, args.rounds)
        rows.append({"path": name, "plain_s": round(tp, 3), "fast_s": round(tf, 3), "speedup": round(tp / tf, 2),
                     "same": a == b})
        print(f"{name:<20} {tp:8.3f} {tf:8.3f} {tp / tf:7.2f}x  {a == b}")
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
