"""How much training text stage 3 needs to reach its vocabulary: final vocab vs sample size.

    .venv/bin/python bench/vocab_curve.py [--run-dir data/demo] [--config configs/demo.yaml]
        [--fractions 0.6,0.75] [--seed 7]

Draws stage 3's own training sample from ``<run-dir>/mixed_dedup`` (the config's tokenizer
section and run seed, so both held-out splits stay out), then, for each fraction, trains the
configured tokenizer on that seeded share of every source's training documents and prints the
final vocabulary. BPE stops below ``vocab_size`` when no pair is left with frequency >=
``min_frequency``; this is how the demo's mix size was chosen. Results also go to bench/out/.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minideepseek.arrow_io import iter_dataset_rows, read_columns  # noqa: E402
from minideepseek.runconfig import load_stage_config  # noqa: E402
from minideepseek.tokenizer.build import new_tokenizer, new_trainer  # noqa: E402
from minideepseek.tokenizer.config import TokenizerStageConfig  # noqa: E402
from minideepseek.tokenizer.sample import component_of, stratified_split  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default="data/demo")
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--fractions", default="0.6,0.75")
    ap.add_argument("--seed", type=int, default=7, help="seed of the per-source subsample")
    args = ap.parse_args()
    scfg = load_stage_config(TokenizerStageConfig, args.config, [])
    tc, src = scfg.tokenizer, Path(args.run_dir) / "mixed_dedup"
    meta = read_columns(src, ["source", "n_chars", "url", "audit_trace"])
    comps = [component_of(t[0] if t else "", u or "") for t, u in zip(meta["audit_trace"], meta["url"])]
    splits, _ = stratified_split(tc, scfg.run.seed, meta["source"], meta["n_chars"], comps)
    train = {name: sorted(int(i) for i in s.train) for name, s in splits.items()}
    wanted = {i for ids in train.values() for i in ids}
    texts = {i: row["text"] for i, row in enumerate(iter_dataset_rows(src, columns=["text"])) if i in wanted}
    rows = []
    for frac in (float(f) for f in args.fractions.split(",")):
        rng = random.Random(args.seed)  # same order for every fraction: smaller samples nest in larger
        chosen: list[int] = []
        for name in sorted(train):
            ids = list(train[name])
            rng.shuffle(ids)
            chosen += ids[: round(len(ids) * frac)]
        docs = [texts[i] for i in sorted(chosen)]
        t0 = time.perf_counter()
        tok = new_tokenizer(tc)
        tok.train_from_iterator(docs, trainer=new_trainer(tc))
        row = {"fraction": frac, "docs": len(docs), "chars": sum(map(len, docs)),
               "vocab": tok.get_vocab_size(), "target": tc.vocab_size, "seconds": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print(f"fraction {frac:.2f}: {row['docs']:,} docs, {row['chars'] / 1e6:.1f}M chars -> vocab "
              f"{row['vocab']:,} of {tc.vocab_size:,} ({row['seconds']} s)", flush=True)
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / "vocab_curve.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
