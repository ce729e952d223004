"""The data bill: project a run's measured cost (stages 1-4) to 1B, 70B and 15T packed tokens.

Everything comes from the run's own manifests and reports (``data/<run>/<artifact>/manifest.json``,
``reports/<run>/*.json``): per stage wall, peak RSS, CPUs, output bytes, and the funnel (filter keep
rate, dedup keep rate, our tokens per DeepSeek token, tokenizer sample share). The model, every
assumption of which is a CLI option (``.venv/bin/python report.py bill RUN --help``):

* **Work units.** Stage 1 reads raw documents (``target / ours_per_ds / dedup_keep / filter_keep``
  DeepSeek tokens), stage 2 sees the sampled tokens (``target / ours_per_ds / dedup_keep``), stage 3
  its training sample (``sample_ratio`` of the deduplicated text, optionally capped), stage 4 the
  packed tokens. Changing a keep rate (e.g. a real crawl keeps ~10%, the curated demo ~77%) changes
  how much stage 1 must read.
* **Time.** CPU-seconds per unit from the run (measured CPU-s for a scale-bench run, else ``wall x
  cpus x cpu_util``), grown as ``(units / run_units) ** exponent``: exponent 1 (linear) unless
  ``--exponent stage=x``; with a scale-bench fit (``--scale-fit``), ``fixed + marginal x units`` from
  the bench's sizes (its log-log exponents are bent below 1 by fixed costs at small sizes).
  Wall on N cores = CPU-s / (N x parallel_efficiency).
* **Memory.** Stages that stream stay flat at the run's peak RSS: stage 1 (its sources are spooled to
  disk, 8 bytes of memory per record: RSS exponent 0.04 over 10M-1B in the committed scale fit) and
  stage 4 (bench_pack: the same RSS at 1x and 10x the demo). Stages 2 and 3 grow: ``base + slope x
  units``, the run's RSS above ``--base-rss-mb`` scaled with the units (stage 2 holds the signatures,
  stage 3 the BPE trainer's word counts of its sample). A scale-bench fit (``--scale-fit``, by default
  the committed ``reports/examples/scale/fit.json``) gives stages 2-3 measured fixed + marginal MB, and the
  flat stages the larger of the run's peak and the fit's fixed part. Stage 3's sample stops growing at the
  run's ``tokenizer.max_train_chars``.
* **Storage.** Bytes per token of each artifact as the run wrote them; packed also at the bare
  4 bytes/token (uint32) floor.

Compared side by side with the seed's quoted figures (000: ~1B tokens / 500K documents on an 8-GPU
node: MinHash ~3 h, ~32 GB peak, raw ~8 GB, packed ~5 GB; 003 §六.3: per core and second 100 pages
extracted, 250K tokens tokenized, 1e8 hashes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import pipeline

# the data stages (1-4) of the registry: the smoke train is not part of the data bill
STAGES = tuple(s.artifact for s in pipeline.STAGES if s.executor)
SCRIPTS = {s.artifact: f"{i} {s.name}" for i, s in enumerate(pipeline.STAGES, start=1) if s.executor}
TARGETS = (1e9, 70e9, 15e12)
SEED = {  # 000_*.txt (the 1B example, "正式交付时应以运行日志为准") and 003_*.txt §六.3
    "tokens": 1.05e9, "docs": 500_000, "minhash_h": 3.0, "peak_gb": 32.0, "raw_gb": 8.0, "packed_gb": 5.0,
    "extract_pages_per_core_s": 100.0, "tokenize_tokens_per_core_s": 250_000.0, "hashes_per_core_s": 1e8,
}


@dataclass(frozen=True)
class BillAssumptions:
    targets: tuple[float, ...] = TARGETS  # packed tokens (ours)
    cores: tuple[int, ...] = (2, 64)  # wall shown for these core counts
    cpu_util: float = 1.0  # CPU busy share of the run's cores when CPU-s were not measured
    parallel_efficiency: float = 0.8  # how well a stage's CPU-s spread over N cores
    base_rss_mb: float = 250.0  # interpreter + libraries: the part of RSS that does not grow
    filter_keep: float | None = None  # None: the run's
    dedup_keep: float | None = None
    tokenizer_sample_ratio: float | None = None
    tokenizer_sample_cap_tokens: float | None = None  # a fixed-size tokenizer sample (None: no cap)
    exponents: dict[str, float] = field(default_factory=dict)  # per stage; default 1.0 or the fit's
    mem_streaming: tuple[str, ...] = (pipeline.MIXED_RAW, pipeline.PACKED)  # stages whose memory does not grow

    def __post_init__(self) -> None:
        for k in self.exponents:
            if k not in STAGES:
                raise ValueError(f"--exponent {k}=...: stage must be one of {STAGES}")
        for name in ("filter_keep", "dedup_keep", "tokenizer_sample_ratio"):
            v = getattr(self, name)
            if v is not None and not 0 < v <= 1:
                raise ValueError(f"--{name.replace('_', '-')} {v}: must be in (0, 1]")
        if not 0 < self.parallel_efficiency <= 1 or not 0 < self.cpu_util <= 1:
            raise ValueError("--parallel-efficiency and --cpu-util must be in (0, 1]")


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def run_facts(report_dir: Path, data_dir: Path | None) -> dict[str, Any]:
    """The measured inputs of the bill, from a run's manifests (preferred) and reports."""
    summary = {s["artifact"]: s for s in _read(report_dir / "summary.json").get("stages", [])}
    man = {a: _read(data_dir / a / "manifest.json") if data_dir else {} for a in STAGES}
    missing = [a for a in STAGES if not man[a] and not summary.get(a, {}).get("wall_s")]
    if missing:
        raise FileNotFoundError(f"no manifest or summary entry for {missing} under {data_dir} / {report_dir}: "
                                f"run stages 1-4 first (bash run_pipeline.sh)")
    stages = {}
    for a in STAGES:
        m, s = man[a], summary.get(a, {})
        stages[a] = {"wall_s": m.get("wall_s", s.get("wall_s")), "peak_rss_mb": m.get("peak_rss_mb", s.get("peak_rss_mb")),
                     "cpus": m.get("cpu_count") or 1, "bytes": (m.get("outputs") or {}).get("total_bytes")}
    mix = _read(report_dir / pipeline.report("source_mix.json"))
    filt = _read(report_dir / pipeline.report("filter_report.json"))
    dedup = _read(report_dir / pipeline.report("dedup_report.json"))
    pack = _read(report_dir / pipeline.report("packing_report.json"))
    ds_tokens = float(mix.get("totals", {}).get("tokens") or man[pipeline.MIXED_RAW].get("counters", {}).get("tokens", 0)
                      or sum(v.get("tokens", 0) for v in man[pipeline.MIXED_RAW]["counters"]["per_source"].values()))
    ft = filt.get("totals", {})
    filter_keep = 1 - ft["dropped"] / ft["evaluated"] if ft.get("evaluated") else 1.0
    dedup_keep = dedup["docs_out"] / dedup["docs_in"] if dedup.get("docs_in") else 1.0
    per_source = man[pipeline.MIXED_RAW].get("counters", {}).get("per_source", {})
    chars_sampled = float(sum(v.get("chars", 0) for v in per_source.values()))
    train_chars = float(man[pipeline.TOKENIZER].get("counters", {}).get("train_chars") or 0)
    dedup_chars = chars_sampled * dedup_keep
    # stage 3 reads at most tokenizer.max_train_chars (0 = no ceiling): its sample stops growing there
    tok_cfg = (man[pipeline.TOKENIZER].get("config") or {}).get("tokenizer") or {}  # not-an-artifact: the config section
    cap_chars = float(tok_cfg.get("max_train_chars") or 0)
    warc = [s["source"] for s in mix.get("sources", []) if s.get("type") == "warc"]
    return {
        **({"warc_sources": warc} if warc else {}),  # stage 1 read WARC records (decoded HTML), not extracted text
        "stages": stages, "ds_tokens_sampled": ds_tokens, "docs_sampled": dedup.get("docs_in"),
        "docs_evaluated": ft.get("evaluated"), "filter_keep": filter_keep, "dedup_keep": dedup_keep,
        "ours_tokens": float(pack.get("tokens_produced") or man[pipeline.PACKED]["counters"]["tokens_produced"]),
        "tokenizer_sample_ratio": train_chars / dedup_chars if dedup_chars else 1.0,
        "chars_sampled": chars_sampled, "num_perm": (dedup.get("params") or {}).get("num_perm", 128),
        "packed_bytes": stages[pipeline.PACKED]["bytes"] or (pack.get("shards") or {}).get("total_bytes"),
        "tokenizer_cap_tokens": cap_chars * ds_tokens / chars_sampled if cap_chars and chars_sampled else None,
    }


def _units(f: dict[str, Any], a: BillAssumptions, packed_tokens: float) -> dict[str, float]:
    """Work units (DeepSeek tokens in; ours for stage 4) of each stage for ``packed_tokens``."""
    ours_per_ds = f["ours_tokens"] / (f["ds_tokens_sampled"] * f["dedup_keep"])
    fk = a.filter_keep or f["filter_keep"]
    dk = a.dedup_keep or f["dedup_keep"]
    sampled = packed_tokens / ours_per_ds / dk
    sample = (a.tokenizer_sample_ratio or f["tokenizer_sample_ratio"]) * sampled * dk
    cap = a.tokenizer_sample_cap_tokens or f.get("tokenizer_cap_tokens")
    if cap:
        sample = min(sample, cap)
    return {pipeline.MIXED_RAW: sampled / fk, pipeline.MIXED_DEDUP: sampled, pipeline.TOKENIZER: sample,
            pipeline.PACKED: packed_tokens}


def project(f: dict[str, Any], a: BillAssumptions, fit: dict[str, Any] | None = None,
            measured: dict[str, Any] | None = None) -> dict[str, Any]:
    """The bill at each target: per stage CPU core-hours, wall on each core count, peak RSS; storage."""
    fit = fit or {}
    base = _units(f, BillAssumptions(), f["ours_tokens"])  # the run's own units (its keep rates)
    rows = []
    for target in a.targets:
        u = _units(f, a, target)
        stages = {}
        for s in STAGES:
            st = f["stages"][s]
            cpu_run = (measured or {}).get(s, {}).get("cpu_s") or st["wall_s"] * st["cpus"] * a.cpu_util
            e = a.exponents.get(s)
            if e is None:
                e = (fit.get(s) or {}).get("time_exponent")
            e = 1.0 if e is None else e
            cl = (fit.get(s) or {}).get("cpu_linear")  # [fixed CPU-s, CPU-s per unit]: the marginal cost
            cpu = cl[0] + cl[1] * u[s] if cl and s not in a.exponents else cpu_run * (u[s] / base[s]) ** e
            mf = (fit.get(s) or {}).get("rss_linear")  # [intercept_mb, mb_per_unit]
            if s in a.mem_streaming:  # flat: the run's peak, or the fit's fixed part where that is larger
                rss = max(st["peak_rss_mb"], mf[0] if mf else 0.0)
            elif mf:
                rss = mf[0] + mf[1] * u[s]
            else:
                rss = a.base_rss_mb + max(st["peak_rss_mb"] - a.base_rss_mb, 0) * u[s] / base[s]
            stages[s] = {"units": u[s], "core_h": cpu / 3600, "rss_gb": rss / 1024, "exponent": e,
                         "wall_h": {n: cpu / (n * a.parallel_efficiency) / 3600 for n in a.cores}}
        scale = u[pipeline.MIXED_DEDUP] / base[pipeline.MIXED_DEDUP]
        raw_bytes = f["stages"][pipeline.MIXED_RAW]["bytes"] or 0
        dedup_bytes = f["stages"][pipeline.MIXED_DEDUP]["bytes"] or 0
        storage = {
            "raw_gb": raw_bytes / f["filter_keep"] * u[pipeline.MIXED_RAW] / base[pipeline.MIXED_RAW] / 1e9,
            "mixed_raw_gb": raw_bytes * scale / 1e9,
            "dedup_gb": dedup_bytes * scale * (a.dedup_keep or f["dedup_keep"]) / f["dedup_keep"] / 1e9,
            "tokenizer_sample_gb": dedup_bytes / max(base[pipeline.MIXED_DEDUP] * f["dedup_keep"], 1)
            * u[pipeline.TOKENIZER] / 1e9,
            "packed_gb": (f["packed_bytes"] or 4 * f["ours_tokens"]) / f["ours_tokens"] * target / 1e9,
            "packed_uint32_gb": 4 * target / 1e9,
        }
        rows.append({"target_tokens": target, "units": u, "stages": stages,
                     "total_core_h": sum(v["core_h"] for v in stages.values()),
                     "total_wall_h": {n: sum(v["wall_h"][n] for v in stages.values()) for n in a.cores},
                     "peak_rss_gb": max(v["rss_gb"] for v in stages.values()), "storage": storage})
    return {"facts": f, "assumptions": {**a.__dict__, "targets": list(a.targets), "cores": list(a.cores)},
            "fit": fit or None, "measured": measured or None, "rows": rows, "per_core": per_core(f, measured, a)}


def per_core(f: dict[str, Any], measured: dict[str, Any] | None, a: BillAssumptions) -> dict[str, float]:
    """The run's per-core throughputs in the seed's units (003 §六.3)."""
    def cpu(s: str) -> float:
        st = f["stages"][s]
        return (measured or {}).get(s, {}).get("cpu_s") or st["wall_s"] * st["cpus"] * a.cpu_util

    out = {"tokenize_tokens_per_core_s": f["ours_tokens"] / cpu(pipeline.PACKED)}
    if f.get("docs_evaluated"):
        out["stage1_docs_per_core_s"] = f["docs_evaluated"] / cpu(pipeline.MIXED_RAW)
    if f.get("chars_sampled"):  # char 5-gram shingles ~ one per character, num_perm hashes each
        out["hashes_per_core_s"] = f["chars_sampled"] * f["num_perm"] / cpu(pipeline.MIXED_DEDUP)
    return out


def _gb(x: float) -> str:
    return f"{x:,.1f} GB" if x < 1e4 else f"{x / 1e3:,.0f} TB"


def _h(x: float) -> str:
    return f"{x * 60:,.1f} min" if x < 1 else f"{x:,.1f} h" if x < 1e4 else f"{x:,.3g} h"


def _t(x: float) -> str:
    return f"{x / 1e12:g}T" if x >= 1e12 else f"{x / 1e9:g}B" if x >= 1e9 else f"{x / 1e6:g}M"


_FIT = "CPU-s and RSS = fixed + marginal x units from the scale-bench fit"


def _fit_sentence(b: dict[str, Any]) -> str:
    """Which model the projection used, so a reader knows where each figure comes from."""
    if b["fit"]:
        return _FIT + (f" (`{b['fit_file']}`)" if b.get("fit_file") else "")
    return ("no scale fit: CPU-s grown with exponents 1.0 unless set; memory flat for the streaming stages "
            "(1 and 4) and linear in the units for stages 2-3")


def markdown(b: dict[str, Any], run: str) -> str:
    f, a = b["facts"], b["assumptions"]
    cores = a["cores"]
    lines = [f"# Data bill — run `{run}`", "",
             f"Measured on the run: {f['ds_tokens_sampled']:,.0f} DeepSeek tokens sampled, {f['ours_tokens']:,.0f} of "
             f"ours packed; filter keep {100 * f['filter_keep']:.1f}% of {f['docs_evaluated'] or 0:,} documents, dedup keep "
             f"{100 * f['dedup_keep']:.2f}%, tokenizer sample {100 * f['tokenizer_sample_ratio']:.0f}% of the text. "
             f"Time from {'measured CPU-seconds (scale bench)' if b['measured'] else 'wall x CPUs x cpu_util'}; growth "
             f"{_fit_sentence(b)}. "
             f"Assumptions: "
             f"`{json.dumps({k: v for k, v in a.items() if v not in (None, {}, ())})}`.", "",
             "| stage | run wall s | run peak RSS MB | " + " | ".join(f"{_t(r['target_tokens'])}: core-h / RSS"
                                                           for r in b["rows"]) + " |",
             "|---|---:|---:|" + "---:|" * len(b["rows"])]
    for s in STAGES:
        st = f["stages"][s]
        lines.append(f"| {SCRIPTS[s]} | {st['wall_s']} | {st['peak_rss_mb']} | " + " | ".join(
            f"{r['stages'][s]['core_h']:,.1f} / {_gb(r['stages'][s]['rss_gb'])}" for r in b["rows"]) + " |")
    lines += ["", "| projected to | core-hours | " + " | ".join(f"wall on {n} cores" for n in cores)
              + " | peak RSS | raw (before filters) | mixed_raw | dedup | tokenizer sample | packed (as written) "
              "| packed uint32 |", "|---|---:|" + "---:|" * (len(cores) + 7)]
    for r in b["rows"]:
        s = r["storage"]
        lines.append(f"| {_t(r['target_tokens'])} tokens | {r['total_core_h']:,.1f} | "
                     + " | ".join(_h(r["total_wall_h"][n]) for n in cores)
                     + f" | {_gb(r['peak_rss_gb'])} | {_gb(s['raw_gb'])} | {_gb(s['mixed_raw_gb'])} | "
                     f"{_gb(s['dedup_gb'])} | {_gb(s['tokenizer_sample_gb'])} | {_gb(s['packed_gb'])} | "
                     f"{_gb(s['packed_uint32_gb'])} |")
    one = min(b["rows"], key=lambda r: abs(r["target_tokens"] - SEED["tokens"]))
    pc = b["per_core"]
    n8 = max(cores)
    lines += ["", f"## Against the seed's figures (at {_t(one['target_tokens'])} tokens)", "",
              "| figure | seed (000 / 003 §六.3) | ours (projected from this run) |", "|---|---:|---:|",
              f"| MinHash dedup wall | ~{SEED['minhash_h']:g} h (8-GPU node) | "
              f"{_h(one['stages'][pipeline.MIXED_DEDUP]['wall_h'][n8])} "
              f"on {n8} cores, {_h(one['stages'][pipeline.MIXED_DEDUP]['wall_h'][min(cores)])} on {min(cores)} |",
              f"| peak memory | ~{SEED['peak_gb']:g} GB | {_gb(one['peak_rss_gb'])} (largest stage) |",
              f"| raw data | ~{SEED['raw_gb']:g} GB (crawl) | {_gb(one['storage']['raw_gb'])} (extracted text before "
              f"filters; HTML is larger) |",
              f"| packed | ~{SEED['packed_gb']:g} GB (1.05B tokens) | {_gb(one['storage']['packed_gb'])} as written "
              f"({_gb(one['storage']['packed_uint32_gb'])} of uint32 ids) |",
              f"| tokenize per core | {SEED['tokenize_tokens_per_core_s']:,.0f} tokens/s | "
              f"{pc['tokenize_tokens_per_core_s']:,.0f} tokens/s (stage 4 incl. pack+write) |"]
    if "hashes_per_core_s" in pc:
        lines.append(f"| MinHash hashes per core | {SEED['hashes_per_core_s']:.0e}/s | {pc['hashes_per_core_s']:.2e}/s "
                     f"(all of stage 2 counted) |")
    if "stage1_docs_per_core_s" in pc:
        lines.append(f"| extraction per core | {SEED['extract_pages_per_core_s']:g} pages/s | "
                     f"{pc['stage1_docs_per_core_s']:,.1f} docs/s (all of stage 1: read"
                     f"{', WARC records decoded' if b['facts'].get('warc_sources') else ''}, extract, filter, count) |")
    big = b["rows"][-1]
    lines += ["", f"At {_t(big['target_tokens'])}: the seed's tokenize constant gives "
              f"{big['target_tokens'] / SEED['tokenize_tokens_per_core_s'] / 3600:,.0f} core-hours; ours "
              f"{big['stages'][pipeline.PACKED]['core_h']:,.0f}. Seed's uint32 storage for 15T: 60 TB; ours "
              f"{_gb(big['storage']['packed_uint32_gb'])} of ids, {_gb(big['storage']['packed_gb'])} as written.", "",
              "Limits: a run's keep rates are those of its corpus (the demo is curated documentation: a crawl "
              "keeps far less, set `--filter-keep`); memory of stages 1-3 is extrapolated linearly from one run "
              "unless a scale-bench fit is given; a single machine cannot hold the projected RSS of the larger "
              "targets: those stages then need the executor (Ray) or sharding, which this bill does not price."]
    return "\n".join(lines) + "\n"
