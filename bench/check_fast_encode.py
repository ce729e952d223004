"""Identity of the fast encoder (tiktoken, ``minideepseek/tokenizer/fast_encode.py``) with HF
``tokenizers`` on the WHOLE demo corpus: every raw record of every domain (HTML, roff, TeX, code,
Chinese, ANSI escapes: before extraction, so harder than what stage 4 sees) and, if the run has one,
every document of its ``mixed_dedup``.

    .venv/bin/python bench/check_fast_encode.py                      # the demo run's tokenizer
    .venv/bin/python bench/check_fast_encode.py --tokenizer PATH --no-mixed

Exit 1 on any difference. The CI test (tests/test_fast_encode.py) checks a sample of the corpus with
a freshly trained tokenizer; this is the whole-corpus check (~3-5 minutes on 2 busy cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek.demo_corpus.build import DOMAINS, build_demo_corpus  # noqa: E402
from minideepseek.fastbpe import compare_ids  # noqa: E402
from minideepseek.packing.config import PackStageConfig  # noqa: E402
from minideepseek.runconfig import load_stage_config  # noqa: E402
from minideepseek.tokenizer.io import load_tokenizer  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--tokenizer", help="tokenizer.json (default: the config's run)")
    p.add_argument("--no-mixed", action="store_true", help="skip the run's mixed_dedup")
    args = p.parse_args()
    run_dir = load_stage_config(PackStageConfig, args.config, quiet=True).run.run_dir
    tok = load_tokenizer(Path(args.tokenizer) if args.tokenizer else run_dir / "tokenizer" / "tokenizer.json")
    corpus = build_demo_corpus()
    results = {}
    for d in DOMAINS:
        texts = [r["raw"] for r in corpus.iter_domain(d)]
        t0 = time.perf_counter()
        results[f"raw:{d}"] = {**compare_ids(tok, texts), "s": round(time.perf_counter() - t0, 1)}
        print(json.dumps({d: results[f"raw:{d}"]}), flush=True)
    if not args.no_mixed and (run_dir / "mixed_dedup").is_dir():
        import datasets

        texts = datasets.load_from_disk(str(run_dir / "mixed_dedup"))["text"]
        results["mixed_dedup"] = compare_ids(tok, texts)
        print(json.dumps({"mixed_dedup": results["mixed_dedup"]}), flush=True)
    total = {k: sum(r[k] for r in results.values()) for k in ("docs", "chars", "tokens", "mismatched_docs")}
    print(json.dumps({"vocab": tok.get_vocab_size(), "total": total}))
    return 1 if total["mismatched_docs"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
