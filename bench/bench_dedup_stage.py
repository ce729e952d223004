"""The whole stage 2 (cross_source_dedup) at scale: N documents of real demo paragraphs, replicated
with seeded edits so that ~dup-rate of them are near-duplicates, written as a stage-1 artifact
and deduplicated by the real stage code. Prints wall time, peak RSS and bytes per document.

    .venv/bin/python bench/bench_dedup_stage.py --docs 1000000 --workdir /tmp/dedup_scale

Decontamination is off (it is a separate linear scan) and candidate pairs are verified with the
estimated Jaccard (exact verification re-reads both texts of every pair). The signature base hash
is "mix64" (datasketch-equivalent given its hashfunc); --base-hash sha1 gives seed-identical
signatures at ~1/4 of the speed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_minhash import find_corpus, paragraph_pool, scale_docs  # noqa: E402

from minideepseek.arrow_io import DatasetWriter  # noqa: E402
from minideepseek.config import build  # noqa: E402
from minideepseek.crossdedup.config import DedupStageConfig  # noqa: E402
from minideepseek.crossdedup.stage import run_dedup  # noqa: E402
from minideepseek.provenance import peak_rss_mb  # noqa: E402
from minideepseek.records import DOC_FEATURES, SCHEMA_VERSION, text_hash  # noqa: E402
from minideepseek.stage import StageRun  # noqa: E402

SOURCES = ["web", "code", "math", "academic", "zh"]


def make_upstream(run_dir: Path, n: int, seed: int) -> str:
    stage = StageRun("mix_sampler", "mixed_raw", run_dir, {"bench": n, "seed": seed}, [], SCHEMA_VERSION, seed)
    tmp = stage.begin()
    writer = DatasetWriter(tmp, DOC_FEATURES, 256 << 20)
    origin = np.empty(n, dtype=np.int64)
    k = 0
    for texts in scale_docs(paragraph_pool(find_corpus(), 50_000), n, 2000, 0.1, 0.03, seed, origin):
        rows = []
        for t in texts:
            src = SOURCES[k % len(SOURCES)]
            rows.append({"id": f"{src}/{k:08d}", "source": src, "text": t, "url": "", "license": "", "lang": None,
                         "lang_score": None, "n_chars": len(t), "n_tokens": len(t) // 4, "hash": text_hash(t),
                         "quality_signals": "{}", "stage": "mix_sampler", "audit_trace": [f"source:{src}:bench"]})
            k += 1
        writer.write_rows(rows)
    writer.close()
    sources = [{"name": s, "weight": 1 / len(SOURCES)} for s in SOURCES]
    stage.cfg = {"sources": sources}
    man = stage.commit({"docs": n})
    return man["config_hash"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--workdir", default="/tmp/dedup_scale")
    ap.add_argument("--base-hash", default="mix64", choices=["mix64", "sha1"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-granular", action="store_true",
                    help="document-level dedup only (url/lines/paragraphs/substrings off): the MinHash engine "
                         "alone, comparable with checkouts from before issue 19")
    args = ap.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.time()
    cfg = build(DedupStageConfig, {
        "run": {"name": "scale", "data_dir": str(work / "data"), "reports_dir": str(work / "reports")},
        "dedup": {"base_hash": args.base_hash, "verify": "estimated", "scurve_docs": 100, "num_proc": 2,
                  # issue 19's steps: lines/paragraphs on every source, substrings on the "code" one
                  "substrings": {"sources": ["code"]},
                  **({k: {"enabled": False} for k in ("urls", "lines", "paragraphs", "substrings")}
                     if args.no_granular else {})},
        "decontam": {"enabled": False}}, "bench")
    up_hash = make_upstream(cfg.run.run_dir, args.docs, args.seed)
    gen_s = time.time() - t0
    rss_gen = peak_rss_mb()
    t1 = time.time()
    man = run_dedup(cfg, {"mixed_raw": up_hash}, "bench", force=True)
    wall = time.time() - t1
    rep = json.loads((cfg.run.run_dir / "mixed_dedup" / "dedup_report.json").read_text())
    print(json.dumps({
        "docs": args.docs, "generate_and_write_s": round(gen_s, 1), "peak_rss_after_generation_mb": rss_gen,
        "dedup_stage_wall_s": round(wall, 1), "dedup_report_wall_s": rep["wall_s"],
        "peak_rss_mb_stage_process": man["peak_rss_mb"], "removed": rep["removed"],
        "candidate_pairs": rep["near"]["candidate_pairs"], "verified_pairs": rep["near"]["verified_pairs"],
        "bands_rows": [rep["params"]["bands"], rep["params"]["rows"]], "base_hash": args.base_hash,
        "index_bytes_per_doc": 4 * rep["params"]["num_perm"] + 8 * rep["params"]["bands"],
        "largest_clusters": rep["largest_clusters"][:5],
        # present from issue 14 on (absent when this script runs an older checkout)
        "policy": rep["near"].get("policy"), "residual": rep["near"].get("residual"),
        "p_at_threshold": (rep["near"].get("banding") or {}).get("p_at_threshold"),
        # issue 19: every finer-granularity step's wall / RSS next to the MinHash phase (same process)
        "near_phase_s": (rep.get("phases_s") or {}).get("near (signatures, candidates, verification)"),
        "granular_perf": (rep.get("granular") or {}).get("perf"),
        "granular_near_peak_rss_mb": (rep.get("granular") or {}).get("near_step_peak_rss_mb"),
    }, indent=2))


if __name__ == "__main__":
    main()
