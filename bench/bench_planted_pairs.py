"""Planted near-duplicate pairs from the demo corpus's own documents, through the real stage 2.

For each of the five domains (web_en, code, math, academic, zh), each edit kind (word substitution,
typos, inserted navigation lines, truncation, deleted sentences) and each exact-Jaccard bin
[L, L + width) for L in --levels, --per-cell documents get an edited twin whose exact Jaccard on
stage 2's shingle sets lands in the bin (minideepseek/crossdedup/planted.py). Stage 2 runs on all
of them with its default configuration and with each --compare variant; printed per config: recall
(share of pairs with one member removed) per bin next to 1-(1-J^r)^b, recall at J >= threshold,
false removals (a removal whose named kept partner is below the threshold), candidate/verified
pairs, stage wall time, the residual check, and whether the removed set equals the default's.

    .venv/bin/python bench/bench_planted_pairs.py                  # ~1,000 pairs, a few minutes
    .venv/bin/python bench/bench_planted_pairs.py --per-cell 1 --compare ""   # quick look

Documents are the extracted text of the cached demo corpus (python -m minideepseek.demo_corpus),
cut into pieces of 800-6,000 characters at paragraph breaks so that the big academic papers give
several base documents.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_minhash import DOMAINS, find_corpus  # noqa: E402

from minideepseek.crossdedup.planted import build_pairs, run_stage, score  # noqa: E402
from minideepseek.extract import extract_text  # noqa: E402

VARIANTS = {
    "datasketch_9x13": {"banding": "datasketch"},
    "sha1": {"base_hash": "sha1"},
    "transitive": {"cluster": "transitive"},
}


def pieces(text: str, lo: int = 800, hi: int = 6000) -> list[str]:
    out, cur = [], ""
    for para in text.split("\n\n"):
        if cur and len(cur) + len(para) > hi:
            if len(cur) >= lo:
                out.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    if lo <= len(cur) <= hi:
        out.append(cur)
    return [p for p in out if len(p) <= hi]


def load_docs(root: Path, seed: int, per_domain: int) -> dict[str, list[str]]:
    docs: dict[str, list[str]] = {}
    for d in DOMAINS:
        path = root / f"{d}.jsonl.gz"
        if not path.exists():
            continue
        out: list[str] = []
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                try:
                    text = extract_text(row["raw"], row["format"])
                except Exception:  # noqa: BLE001 - a document the extractor rejects is not a base document
                    continue
                out.extend(pieces(text))
        rng = np.random.default_rng([seed, len(d)])
        docs[d] = [out[i] for i in rng.permutation(len(out))[:per_domain]]
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="0.5,0.55,0.6,0.65,0.7,0.75,0.8,0.85,0.9,0.95")
    ap.add_argument("--width", type=float, default=0.05)
    ap.add_argument("--per-cell", type=int, default=4, help="pairs per (domain, edit kind, level)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--compare", default=",".join(VARIANTS), help=f"other configs to run: {','.join(VARIANTS)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "planted_pairs.json"))
    args = ap.parse_args()
    levels = [float(x) for x in args.levels.split(",")]
    t0 = time.time()
    need = args.per_cell * len(levels) * 5 * 3  # documents that fail to land in a bin are skipped
    docs = load_docs(find_corpus(), args.seed, need)
    pairs, stats = build_pairs(docs, levels, args.per_cell, args.seed, width=args.width)
    print(f"{len(pairs)} pairs from {', '.join(f'{d}: {len(v)}' for d, v in docs.items())} base docs; "
          f"{stats} ({time.time() - t0:.0f} s)", flush=True)
    results = {}
    removed_sets = {}
    for name in ["default", *[v for v in args.compare.split(",") if v]]:
        with tempfile.TemporaryDirectory() as work:
            t = time.time()
            rep, removed = run_stage(pairs, Path(work), {"threshold": args.threshold, **VARIANTS.get(name, {})},
                                     args.seed)
            s = score(pairs, rep, removed, args.threshold, levels, args.width)
            s["stage_wall_s"] = round(time.time() - t, 1)
        removed_sets[name] = {x["id"] for x in removed}
        s["same_removed_set_as_default"] = removed_sets[name] == removed_sets["default"]
        s["removed_differs_from_default"] = len(removed_sets[name] ^ removed_sets["default"])
        results[name] = s
        print(f"\n== {name}: {s['bands']} x {s['rows']}; recall at J >= {args.threshold}: "
              f"{s['recall_at_or_above_threshold']} of {s['pairs_at_or_above_threshold']} pairs; false removals "
              f"{s['false_removals']} (min removal J {s['min_removal_jaccard']}); candidates {s['candidate_pairs']:,}, "
              f"verified {s['verified_pairs']:,}; stage {s['stage_wall_s']} s; residual edges between kept "
              f"{s['residual']['verified_edges_between_kept']}, estimated missed "
              f"{s['residual'].get('estimated_missed_near_dups')}; same removed set as default: "
              f"{s['same_removed_set_as_default']}", flush=True)
        print("| J bin | pairs | removed share | P(candidate) theory |")
        for x in s["bins"]:
            print(f"| {x['bin']} | {x['pairs']} | {x['removed_share']:.3f} | {x['p_candidate_theory']:.3f} |")
        print("recall by edit kind (J >= threshold):", s["recall_by_kind"])
        print("recall by domain (J >= threshold):", s["recall_by_domain"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"pairs": len(pairs), "stats": stats, "results": results}, indent=1))
    print(f"\nwritten {args.out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
