"""Which normalizer + pre-tokenizer compresses best, measured on both held-out splits.

    .venv/bin/python bench/compare_pretokenizers.py [--run-dir data/demo] [--config configs/demo.yaml]
        [--variants none:deepseek,none:bytelevel,nfc:deepseek,nfkc:bytelevel] [--vocab 150000]

Draws stage 3's own split from ``<run-dir>/mixed_dedup`` (the config's tokenizer section and seed:
out-of-component held-out, random held-out, training sample), trains each variant on exactly that
training sample and prints, per source and split, tokens/char and ours/DeepSeek-V3 (lower = better
compression), the final vocabulary and the raw round trip. Results also go to bench/out/.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.runconfig import load_stage_config  # noqa: E402
from minideepseek.tokenizer.build import new_tokenizer, new_trainer  # noqa: E402
from minideepseek.tokenizer.config import TokenizerStageConfig  # noqa: E402
from minideepseek.tokenizer.evaluate import deepseek, evaluate, ours  # noqa: E402
from minideepseek.tokenizer.stage import load_split_texts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default="data/demo")
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--vocab", type=int, default=150_000)
    ap.add_argument("--variants", default="none:deepseek,none:bytelevel,nfc:deepseek,nfkc:bytelevel")
    args = ap.parse_args()
    scfg = load_stage_config(TokenizerStageConfig, args.config, [])
    base = dataclasses.replace(scfg.tokenizer, vocab_size=args.vocab)
    train, splits, _ = load_split_texts(base, scfg.run.seed, Path(args.run_dir) / "mixed_dedup")
    print(f"train docs {len(train):,} ({sum(map(len, train)):,} chars); held-out docs: "
          + ", ".join(f"{k} {sum(map(len, v.values())):,}" for k, v in splits.items()))
    ds = deepseek()
    results = {}
    for v in args.variants.split(","):
        norm, pre = v.split(":")
        cfg = dataclasses.replace(base, normalizer=norm, pre_tokenizer=pre)
        tok = new_tokenizer(cfg)
        t0 = time.time()
        tok.train_from_iterator((train[i:i + 256] for i in range(0, len(train), 256)), trainer=new_trainer(cfg))
        secs = round(time.time() - t0, 1)
        evs = {k: evaluate([ours(tok, norm), ds], held, tok.get_vocab_size()) for k, held in splits.items()}
        results[v] = {"vocab": tok.get_vocab_size(), "train_s": secs, "splits": evs}
        print(f"{v}: vocab {tok.get_vocab_size():,}, trained in {secs} s, raw round trip "
              + ", ".join(f"{k} {e['round_trip']['ours']['ok']}/{e['round_trip']['ours']['docs']}" for k, e in evs.items()))
    for k in splits:
        print(f"\n{k} held-out: tokens/char (ours/DeepSeek-V3)")
        print(f"{'source':<15}" + "".join(f"{v:>24}" for v in results) + f"{'deepseek_v3':>14}")
        for src in splits[k]:
            rows = [r["splits"][k]["per_source"].get(src, {}) for r in results.values()]
            if not all(rows):
                continue
            cells = "".join(f"{r['ours']['tokens_per_char']:>15.4f} ({r['ours']['vs_deepseek_tokens_per_char']:.3f})"
                            for r in rows)
            print(f"{src:<15}{cells}{rows[0]['deepseek_v3']['tokens_per_char']:>14.4f}")
    out = Path("bench/out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare_pretokenizers.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
