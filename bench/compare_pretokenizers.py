"""Which pre-tokenizer compresses better: the seed's ByteLevel vs DeepSeek-V3's regex pre-split.

    .venv/bin/python bench/compare_pretokenizers.py [--run-dir data/demo] [--vocab 150000]

Trains both on exactly the training sample stage 3 used (``tokenizer/sample.json``) and evaluates
both on the same held-out documents with the stage's own metrics; prints tokens/char and
bytes/token per source side by side (lower tokens/char = better compression).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.arrow_io import iter_dataset_rows  # noqa: E402
from minideepseek.tokenizer.build import new_tokenizer, new_trainer  # noqa: E402
from minideepseek.tokenizer.config import TokenizerConfig  # noqa: E402
from minideepseek.tokenizer.evaluate import evaluate, ours  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default="data/demo")
    ap.add_argument("--vocab", type=int, default=150_000)
    args = ap.parse_args()
    run = Path(args.run_dir)
    sample = json.loads((run / "tokenizer" / "sample.json").read_text())
    train_ids = {i for s in sample.values() for i in s["train"]}
    held_of = {i: src for src, s in sample.items() for i in s["heldout"]}
    train, held = [], {src: [] for src in sample}
    for row in iter_dataset_rows(run / "mixed_dedup", columns=["id", "text"]):
        if row["id"] in train_ids:
            train.append(row["text"])
        elif row["id"] in held_of:
            held[held_of[row["id"]]].append(row["text"])
    results = {}
    for pre in ("bytelevel", "deepseek"):
        cfg = TokenizerConfig(vocab_size=args.vocab, pre_tokenizer=pre)
        tok = new_tokenizer(cfg)
        t0 = time.time()
        tok.train_from_iterator((train[i:i + 256] for i in range(0, len(train), 256)), trainer=new_trainer(cfg))
        ev = evaluate([ours(tok)], held, tok.get_vocab_size())
        results[pre] = (tok.get_vocab_size(), round(time.time() - t0, 1), ev)
    print(f"train docs {len(train):,}; held-out docs {sum(map(len, held.values())):,}")
    for pre, (v, s, ev) in results.items():
        print(f"{pre}: vocab {v:,}, trained in {s} s, round trip {ev['round_trip']['ours']}")
    print(f"{'source':<15} {'tok/char bytelevel':>19} {'tok/char deepseek':>18} {'bytes/tok bytelevel':>20} "
          f"{'bytes/tok deepseek':>19}")
    for src in held:
        a = results["bytelevel"][2]["per_source"].get(src, {}).get("ours")
        b = results["deepseek"][2]["per_source"].get(src, {}).get("ours")
        if a and b:
            print(f"{src:<15} {a['tokens_per_char']:>19.4f} {b['tokens_per_char']:>18.4f} {a['bytes_per_token']:>20.2f} "
                  f"{b['bytes_per_token']:>19.2f}")


if __name__ == "__main__":
    main()
