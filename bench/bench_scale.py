"""Stages 1-4 at several corpus sizes, with the production settings, and how each stage's cost grows.

    nice -n 5 .venv/bin/python bench/bench_scale.py --sizes 1e7,1e8           # what was run here (~1 h)
    .venv/bin/python bench/bench_scale.py --sizes 1e7,1e8,1e9                   # the issue's sizes (hours)
    setsid nohup .venv/bin/python bench/bench_scale.py --sizes 1e9 --resume &   # again after a kill: resumes
    .venv/bin/python report.py bill scale_8000000 --reports-dir bench/out/scale/8000000/reports \\
        --data-dir bench/out/scale/8000000/data --scale-fit bench/out/scale/fit.json

**The scale corpus is recombined demo text, not new text.** For a size of N DeepSeek tokens, each of the
demo corpus's five domains gets ``weight x N x raw chars/token x SLACK`` characters of documents built
from its own raw records (so a source keeps its character: HTML stays HTML, Chinese stays Chinese),
where raw chars/token is what stage 1's own extraction, filters and token counter keep of a pilot of
``PILOT_DOCS`` such documents, taken at its upper bound (ratio + ``PILOT_SIGMAS`` standard errors: a source
that runs dry breaks the recipe's shares, a larger corpus only costs build time; ``pilot_yield``, in
``scale_stats.json``). The domains are written by two forked workers (each domain has its own seed, so the
files do not depend on which worker wrote them). Seeded:

* *unique* documents: a window of 30-70% of one record's paragraphs, then a window of another record of
  the same component, with ``--swap`` (8%) of the words (or CJK characters) replaced by words of the
  same domain: the edits keep two derivations of one record below the dedup threshold most of the time;
* *exact* duplicates (``--exact``, 2%): a copy of an earlier generated document under a new id;
* *near* duplicates (``--near``, 3%): a copy of an earlier document with 2% of its words replaced
  (character 5-gram Jaccard ~0.85, above the 0.8 threshold).

The planted rates are stated; the measured dedup rate is higher because the larger sizes reuse each demo
record several times (the reuse factor is in the results). The corpus is written in the demo corpus's
own format into ``bench/out/scale/<N>/cache`` and the stages read it through ``MINIDEEPSEEK_CACHE`` with
``configs/demo.yaml`` (filters on, tokenizer 150K target with allow_smaller_vocab for the small sizes, its sample
ratio, the default dedup), production shard size (64 MiB).

Per stage: wall, CPU-seconds (the stage process and all its children, from rusage), peak RSS of the
whole process tree (sampled every 0.2 s), bytes written (its artifact), throughput (docs/s, MB/s,
tokens/s). ``fit.json``: per stage, the exponent of wall / CPU-s / RSS against size (least squares in
log-log) and a linear RSS fit in the bill's units, read by ``report.py bill --scale-fit``.
"""

from __future__ import annotations

import argparse
import calendar
import gzip
import json
import math
import multiprocessing
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek import pipeline  # noqa: E402
from minideepseek.bill import STAGES, BillAssumptions, _units, run_facts  # noqa: E402
from minideepseek.demo_corpus.build import (  # noqa: E402
    DERIVED_ENV,
    DOMAINS,
    MANIFEST,
    DemoCorpus,
    build_demo_corpus,
    record_hashes,
)
from minideepseek.fsio import sha256_file  # noqa: E402

SCRIPTS = {a: pipeline.stage(a).script for a in STAGES}
PUBLISH = ROOT / "reports" / "examples" / "scale"  # the committed example (--publish only)
WEIGHTS = {"web_en": 0.40, "code": 0.25, "math": 0.15, "academic": 0.10, "zh": 0.10}  # configs/demo.yaml
PILOT_DOCS = 1_000  # recombined documents per domain whose stage-1 yield sizes the corpus
# The yield varies a lot from document to document (a Chinese pilot of 2,000 documents read 7.1 to 8.5 raw
# characters per kept token over two seeds, 400 documents 7.0 to 11.0), so the corpus is sized by the pilot's
# ratio plus PILOT_SIGMAS standard errors, times SLACK
PILOT_SIGMAS = 3.0
SLACK = 1.12  # and above that: a 10M check of this sizing still ran one source (arxiv, 179 documents) 1.8% short
_WORD = re.compile(r"[A-Za-z]{3,}|[\u4e00-\u9fff]")
_WORD_SPLIT = re.compile(f"({_WORD.pattern})")  # split() keeps the words, at the odd indices
GENERATOR = 2  # the recombination's version: a corpus of another version (or other rates) is rebuilt


def _swap(text: str, rate: float, pool: list[str], rng: random.Random) -> str:
    """``text`` with each word (or CJK character) replaced, with probability ``rate``, by a pool word of the
    same script. The words are split out in C (``_WORD_SPLIT``: words at the odd indices) and only the
    replaced ones are visited, the gaps between them drawn geometrically: one Python step per replaced
    word instead of a callback per word (the corpus build was ~5 MB/s of text, most of it here)."""
    if rate <= 0:
        return text
    parts = _WORD_SPLIT.split(text)
    n = len(parts) // 2
    log_keep = math.log1p(-min(rate, 1 - 1e-12))
    i = int(math.log(1.0 - rng.random()) / log_keep)  # words kept before the first replaced one
    while i < n:
        w, j = rng.choice(pool), 2 * i + 1
        if ("\u4e00" <= w[0] <= "\u9fff") == ("\u4e00" <= parts[j] <= "\u9fff"):
            parts[j] = w
        i += 1 + int(math.log(1.0 - rng.random()) / log_keep)
    return "".join(parts)


def _window(paras: list[str], rng: random.Random) -> list[str]:
    n = len(paras)
    k = max(1, int(n * rng.uniform(0.3, 0.7)))
    s = rng.randrange(0, n - k + 1)
    return paras[s:s + k]


class _Recombiner:
    """One domain's document stream: recombined unique documents with planted exact/near copies."""

    def __init__(self, recs: list[dict], rng: random.Random, args: argparse.Namespace) -> None:
        self.recs, self.rng, self.args = recs, rng, args
        self.by_comp: dict[str, list[dict]] = {}
        for r in recs:
            self.by_comp.setdefault(r["component"], []).append(r)
        self.pool = [m.group(0) for r in recs[:300] for m in _WORD.finditer(r["raw"][:20_000])] or ["data"]
        self.made: list[dict] = []
        self.n_exact = self.n_near = 0

    def next(self) -> dict:
        rng, args, made = self.rng, self.args, self.made
        u = rng.random()
        if made and u < args.exact:
            rec, self.n_exact = {**rng.choice(made)}, self.n_exact + 1
        elif made and u < args.exact + args.near:
            base = rng.choice(made)
            rec, self.n_near = {**base, "raw": _swap(base["raw"], 0.02, self.pool, rng)}, self.n_near + 1
        else:
            a = rng.choice(self.recs)
            b = rng.choice(self.by_comp[a["component"]])
            paras = _window(a["raw"].split("\n\n"), rng) + _window(b["raw"].split("\n\n"), rng)
            rec = {**a, "raw": _swap("\n\n".join(paras), args.swap, self.pool, rng)}
            if len(made) < 2_000 or rng.random() < 0.05:  # the pool duplicates are drawn from
                made.append(rec)
        i = self.n_exact + self.n_near + len(made)
        return {**rec, "doc_key": f"{rec['doc_key']}#s{i}", "url": f"{rec.get('url', '')}#s{i}"}


def fixed_quality_models(config: str) -> list[str]:
    """Build (or reuse) the config's quality classifiers from the pinned demo corpus, as a demo run's
    stage 1 does, and return the ``--set``s that make the scale runs use those models as fixed files.

    Left with ``train:``, stage 1 would see a different corpus (the recombined one), call its model
    stale and retrain it over the whole recombined web source, into the same ``model:`` path as the
    demo's. A run at scale applies the classifier the demo built; it does not make a new one."""
    from minideepseek.runconfig import load_stage_config
    from minideepseek.sampling.config import MixSamplerConfig
    from minideepseek.sampling.quality_build import ensure_models

    cfg = load_stage_config(MixSamplerConfig, ROOT / config, quiet=True)
    ensure_models(cfg)
    return [f"sources.{s.name}.filters.{i}.train=''" for s in cfg.sources for i, f in enumerate(s.filters)
            if f.get("type") == "quality" and f.get("train")]


def _ratio_se(x: list[int], y: list[int]) -> tuple[float, float]:
    """sum(x) / sum(y) and its standard error (the ratio estimator's, by the delta method)."""
    n, sy = len(x), sum(y)
    r = sum(x) / max(sy, 1)
    if n < 2 or sy == 0:
        return r, 0.0
    var = sum((a - r * b) ** 2 for a, b in zip(x, y)) / (n - 1) / n
    return r, math.sqrt(var) / (sy / n)


def pilot_yield(config: str, domain_recs: dict[str, list[dict]], args: argparse.Namespace) -> dict[str, Any]:
    """Raw characters per DeepSeek token that stage 1 keeps, per domain, measured by running stage 1's own
    per-document path (extraction, validation, the source's filters, the token counter) over
    ``PILOT_DOCS`` recombined documents. Recombined pages are not demo pages (a window of an HTML file's
    paragraphs extracts to less text than the file), so the demo's own yield undersized the corpus: at
    the 1B size every source ran out and 79% of the target was sampled."""
    from minideepseek.records import Reject
    from minideepseek.runconfig import load_stage_config
    from minideepseek.sampling.config import MixSamplerConfig
    from minideepseek.sampling.process import ProcessSettings, process_one
    from minideepseek.sources.demo import demo_record_to_raw
    from minideepseek.tokencount import TokenCounter

    cfg = load_stage_config(MixSamplerConfig, ROOT / config, quiet=True)
    counter = TokenCounter(cfg.sampler.token_counter)
    out: dict[str, Any] = {}
    for s in cfg.sources:
        d = getattr(s, "domain", None)
        if d not in domain_recs:
            continue
        gen = _Recombiner(domain_recs[d], random.Random(f"{args.seed}:{d}:pilot"), args)
        settings = ProcessSettings(source=s.name, min_chars=cfg.sampler.min_chars, max_chars=cfg.sampler.max_chars,
                                   extract=cfg.extract, filters=s.filters, lang=s.lang)
        raws, kept = [], []  # per document: raw characters, and the text stage 1 kept ('' for a reject)
        for _ in range(PILOT_DOCS):
            r = gen.next()
            raws.append(len(r["raw"]))
            row = process_one(demo_record_to_raw(r, s.lang), settings)  # what the demo source hands stage 1
            kept.append("" if isinstance(row, Reject) else row["text"])
        toks = [n if t else 0 for t, n in zip(kept, counter.count([t or "x" for t in kept]))]
        ratio, se = _ratio_se(raws, toks)
        out[d] = {"docs": PILOT_DOCS, "kept_docs": sum(1 for t in kept if t), "raw_chars": sum(raws),
                  "kept_tokens": sum(toks), "raw_chars_per_token": round(ratio, 3),
                  "raw_chars_per_token_se": round(se, 3),
                  # what the corpus is sized by: a source that runs dry breaks the recipe's shares, a
                  # corpus too large only costs build time, so the yield is taken at its upper bound
                  "raw_chars_per_token_upper": round(ratio + PILOT_SIGMAS * se, 3)}
    return out


_BUILD: dict[str, Any] = {}  # what the forked domain writers read (the demo records are not pickled over)


def _write_domain(d: str) -> dict[str, Any]:
    """One domain's file of the scale corpus (run in a forked worker: domains are seeded apart, so building
    them in parallel writes the same files as one after another)."""
    root, manifest, tokens, args = (_BUILD[k] for k in ("root", "manifest", "tokens", "args"))
    recs = _BUILD["recs"][d]
    gen = _Recombiner(recs, random.Random(f"{args.seed}:{d}:{tokens}"), args)
    want = WEIGHTS[d] * tokens * _BUILD["pilot"][d]["raw_chars_per_token_upper"] * SLACK
    chars = docs = 0
    path = root / manifest["domains"][d]["file"]
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        while chars < want:
            rec = gen.next()
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            chars += len(rec["raw"])
            docs += 1
    demo_chars = sum(len(r["raw"]) for r in recs)
    return {"docs": docs, "chars": chars, "exact": gen.n_exact, "near": gen.n_near,
            "reuse_factor": round(chars / demo_chars, 2), "file_bytes": path.stat().st_size,
            "file_sha256": sha256_file(path)}


def build_scale_corpus(out: Path, tokens: float, args: argparse.Namespace) -> dict[str, Any]:
    """The demo corpus recombined to ~``tokens`` DeepSeek tokens (after filters), in its own format, one
    domain per worker (two: this machine's cores). A corpus built earlier is reused when it was built by
    this generator with the same settings. The config's quality models must exist
    (``fixed_quality_models``, called once per bench): the pilot's chain scores with the demo's classifier."""
    src = build_demo_corpus()
    root = out / "cache" / "demo_corpus" / src.root.name
    planted = {"exact": args.exact, "near": args.near, "swap": args.swap, "generator": GENERATOR, "seed": args.seed,
               "pilot_docs": PILOT_DOCS, "pilot_sigmas": PILOT_SIGMAS, "slack": SLACK}
    if (root / MANIFEST).is_file():
        stats = json.loads((root / "scale_stats.json").read_text())
        if stats.get("planted") == planted:
            return stats
        print(f"  {root}: built with {stats.get('planted')}, not {planted}: rebuilding it", flush=True)
    shutil.rmtree(out / "cache", ignore_errors=True)
    root.mkdir(parents=True)
    manifest = json.loads(json.dumps(src.manifest))
    # text records only: the corpus's few invalid-UTF-8 files (raw_b64) are stage 1's reject path,
    # tested on their own, and have no text to recombine
    domain_recs = {d: recs for d in DOMAINS if (recs := [r for r in src.iter_domain(d) if r.get("raw") is not None])}
    pilot = pilot_yield(args.config, domain_recs, args)
    stats: dict[str, Any] = {"planted": planted, "pilot": pilot, "domains": {}}
    _BUILD.update(recs=domain_recs, root=root, manifest=manifest, tokens=tokens, args=args, pilot=pilot)
    # the largest domain first, so the other worker takes the rest meanwhile
    order = sorted(domain_recs, key=lambda d: -WEIGHTS[d] * pilot[d]["raw_chars_per_token_upper"])
    with multiprocessing.get_context("fork").Pool(min(2, len(order))) as pool:
        built = dict(zip(order, pool.map(_write_domain, order, chunksize=1)))
    _BUILD.clear()
    for d in domain_recs:  # in the demo corpus's domain order, whatever order they finished in
        b = built[d]
        stats["domains"][d] = {k: b[k] for k in ("docs", "chars", "exact", "near", "reuse_factor")}
        # the corpus loader checks every cached domain file against its manifest (issue 21)
        manifest["domains"][d].update({"n_docs": b["docs"], "n_bytes": b["chars"], "n_invalid_utf8": 0,
                                       "file_bytes": b["file_bytes"], "file_sha256": b["file_sha256"]})
    # a derived corpus: each component's records as now written (what the loader checks them against), the
    # demo-corpus records they were made from (checked against the repo's pins) and the opt-in it needs
    made = record_hashes(DemoCorpus(root, manifest))
    sources = {}
    for info in manifest["components"]:
        if info.get("status") != "ok":
            continue
        sources[info["component"]] = {"version": info["version"], "content_sha256": info["content_sha256"]}
        if info["component"] in made:
            info["content_sha256"], info["n_docs"] = made[info["component"]]
        else:  # only invalid-UTF-8 records (not recombined): the component is absent from the derived corpus
            info["status"], info["content_sha256"], info["n_docs"] = "not_derived", None, 0
    manifest["derived"] = {"by": "bench/bench_scale.py", "from": str(src.root), "from_components": sources,
                           "recipe": stats["planted"], "target_tokens": tokens}
    manifest["scale_bench"] = stats
    (root / "scale_stats.json").write_text(json.dumps(stats, indent=1))
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1))  # last: marks the build complete
    return stats


def _du(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def _machine_cpu() -> tuple[float, float] | None:
    """(busy, steal) CPU-seconds of the whole machine since boot, from /proc/stat (None elsewhere)."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / hz, steal / hz


def run_stage(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, float]:
    """Run one stage; its wall, CPU-s and the process tree's peak RSS, sampled every 0.2 s.

    CPU-s is the larger of rusage(children) (the stage and the descendants it waited for) and the sum,
    over every process of the tree seen, of its last sampled user+system time: a multiprocessing
    forkserver's workers are not our descendants in rusage terms (measured: 15 CPU-s for a 350 s,
    two-process stage 1), so the sampled sum is what counts there (it misses <= 0.2 s per process).

    Beside it, what the machine did meanwhile: its busy CPU-seconds less the stage's (``other_cpu_s``:
    other processes, this monitor included) and the CPU-seconds the hypervisor stole (``steal_s``). A
    stage that ran slower than its size says only these tell a busy or oversubscribed machine from a
    stage that grows faster than its work."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0 = _machine_cpu()
    t0 = time.perf_counter()
    cpu_seen: dict[int, float] = {}
    with open(log, "w") as fh:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        proc = psutil.Process(p.pid)
        peak = 0
        while p.poll() is None:
            try:
                tree = [proc, *proc.children(recursive=True)]
            except psutil.Error:
                tree = []
            rss = 0
            for x in tree:
                try:
                    with x.oneshot():
                        rss += x.memory_info().rss
                        ct = x.cpu_times()
                        cpu_seen[x.pid] = ct.user + ct.system
                except psutil.Error:
                    pass
            peak = max(peak, rss)
            time.sleep(0.2)
    wall = time.perf_counter() - t0
    m1 = _machine_cpu()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}); see {log}")
    rusage_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    cpu = max(rusage_cpu, sum(cpu_seen.values()))
    machine = {} if m0 is None or m1 is None else {
        "machine_busy_cpu_s": round(m1[0] - m0[0], 1), "other_cpu_s": round(max(0.0, m1[0] - m0[0] - cpu), 1),
        "steal_s": round(m1[1] - m0[1], 1)}
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_rusage_s": round(rusage_cpu, 2), "cpu_sampled_s": round(sum(cpu_seen.values()), 2),
            "processes": len(cpu_seen), "peak_rss_tree_mb": round(peak / 2**20, 1), **machine}


def _killed_run(data: Path, stage: str, log: Path) -> dict[str, Any] | None:
    """What a killed run of ``stage`` left for ``--continue-killed``: its finished units and how long it had
    run (its log's first timestamp to its newest unit file), or None when nothing resumable is there.

    The wall of a continued stage is then the continued part only; the earlier part is a lower bound of
    what it ran (from its start to its last finished unit), so the whole stage took at least the sum."""
    tmps = [p for p in sorted((data).glob(f"{stage}.tmp-*")) if (p / "_units").is_dir()]
    if not tmps:
        return None
    units = max(tmps, key=lambda p: len(list((p / "_units").glob("*.json"))))
    files = list((units / "_units").glob("*.json"))
    last = max(f.stat().st_mtime for f in files)
    start = None
    if log.is_file():  # "HH:MM:SS" of its first line, on the day of the key file (the run's first minutes)
        first = log.read_text(errors="replace").split(" ", 1)[0]
        day = time.strftime("%Y-%m-%d", time.gmtime((units / "_units" / "key.json").stat().st_mtime))
        try:
            start = calendar.timegm(time.strptime(f"{day} {first}", "%Y-%m-%d %H:%M:%S"))
        except ValueError:
            start = None
    if start is None:
        start = (units / "_units" / "key.json").stat().st_mtime
    return {"units_finished": len(files) - 1, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
            "last_unit_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last)),
            "wall_s_at_least": round(last - start, 1)}


def _lower_bound_wall(m: dict[str, Any]) -> None:
    """A continued stage's wall is the killed part (at least) plus the continued part: a lower bound.

    Also the migration for a measurement recorded before this rule (its ``continued_killed_run`` has no
    ``continued_wall_s`` and its ``wall_s`` is the continued part's): idempotent, and the rates per second
    are rescaled to the whole wall. Its CPU-s and peak RSS are the continued part's only, so it has no
    tokens per CPU-second and ``fit`` leaves its CPU-s out."""
    k = m["continued_killed_run"]
    if "continued_wall_s" in k:
        return
    k["continued_wall_s"] = cont = m["wall_s"]
    m["wall_s"] = round(k["wall_s_at_least"] + cont, 2)
    m["wall_is_lower_bound"] = True
    t = m.get("throughput")
    if t:  # written by measure_size after this; present only in a measurement being migrated
        for key, nd in (("docs_per_s", 1), ("mb_per_s", 2), ("tokens_per_s", None)):
            if t.get(key):
                t[key] = round(t[key] * cont / m["wall_s"], nd)
        t["tokens_per_cpu_s"] = None


def measure_size(tokens: float, args: argparse.Namespace, quality_sets: list[str]) -> dict[str, Any]:
    out = ROOT / "bench" / "out" / "scale" / str(int(tokens))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    corpus = build_scale_corpus(out, tokens, args)
    build_s = time.perf_counter() - t0
    name = f"scale_{int(tokens)}"
    env = {**os.environ, "MINIDEEPSEEK_CACHE": str(out / "cache"), DERIVED_ENV: "1"}
    sets = ["--set", f"run.name={name}", "--set", f"run.data_dir={out / 'data'}",
            "--set", f"run.reports_dir={out / 'reports'}", "--set", f"sampler.target_tokens={int(tokens)}",
            "--set", "pack.max_shard_bytes=67108864",
            # the smallest sizes have too little text for 150K merges (the guard would stop stage 3);
            # the final vocabulary is in each size's tokenizer report
            "--set", "tokenizer.allow_smaller_vocab=true"]
    for q in [*quality_sets, *args.set]:
        sets += ["--set", q]
    data, reports = out / "data" / name, out / "reports" / name
    stages: dict[str, Any] = {}
    for a in STAGES:
        done = out / f"{a}.measured.json"  # one file per finished stage: a long size resumes stage by stage
        earlier = json.loads(done.read_text()) if args.resume and done.is_file() else None
        # a stage measured under other --set settings is measured again, not mixed into this size's figures
        if earlier is not None and earlier.get("extra_sets", []) == args.set and (data / a / "manifest.json").is_file():
            stages[a] = earlier
            print(f"  {int(tokens):>12,} {a:<12} measured earlier ({done})", flush=True)
            continue
        done.unlink(missing_ok=True)
        before = _du(data / a)
        killed = _killed_run(data, a, out / f"{a}.log") if args.continue_killed else None
        if killed:  # the killed run's log is kept beside the continued run's
            os.replace(out / f"{a}.log", out / f"{a}.killed.log")
        # --restart: a stage killed earlier (a size that outlived a session) is measured whole, not resumed
        # from its finished units, unless --continue-killed says to finish it (its earlier part is recorded)
        restart = [] if killed else ["--restart"]
        m = run_stage([sys.executable, SCRIPTS[a], "--config", args.config, *sets, "--force", *restart], env,
                      out / f"{a}.log")
        if killed:
            m["continued_killed_run"] = killed
            _lower_bound_wall(m)
        if args.set:
            m["extra_sets"] = args.set
        man = json.loads((data / a / "manifest.json").read_text())
        m["bytes_written"] = _du(data / a) - before if before == 0 else _du(data / a)
        m["manifest_peak_rss_mb"] = man.get("peak_rss_mb")
        m["git_commit"] = man.get("git_commit")
        stages[a] = m
        done.write_text(json.dumps(m, indent=1))
        print(f"  {int(tokens):>12,} {a:<12} {json.dumps(m)}", flush=True)
    f = run_facts(reports, data)
    units = _units(f, BillAssumptions(), f["ours_tokens"])
    for a in STAGES:
        stages[a]["units"] = units[a]
    mr = json.loads((data / "mixed_raw" / "manifest.json").read_text())["counters"]
    chars = sum(v["chars"] for v in mr["per_source"].values())
    thr = {"mixed_raw": (mr["docs"], chars, f["ds_tokens_sampled"]),
           "mixed_dedup": (f["docs_sampled"], chars, f["ds_tokens_sampled"]),
           "tokenizer": (None, f["tokenizer_sample_ratio"] * chars * f["dedup_keep"], None),
           "packed": (None, chars * f["dedup_keep"], f["ours_tokens"])}
    for a, (docs, ch, tok) in thr.items():
        w = stages[a]["wall_s"]
        stages[a]["throughput"] = {"docs_per_s": docs and round(docs / w, 1), "mb_per_s": round(ch / 1e6 / w, 2),
                                   "tokens_per_s": tok and round(tok / w),
                                   # per CPU-second: what the work costs, less bent by a loaded machine
                                   # (none for a continued stage: its CPU-s is the continued part's only)
                                   "tokens_per_cpu_s": None if stages[a].get("wall_is_lower_bound")
                                   else round((tok or f["ds_tokens_sampled"]) / stages[a]["cpu_s"])}
    mix = json.loads((reports / "source_mix.json").read_text())  # stage 1's own account of the recipe
    return {"target_tokens": tokens, **({"extra_sets": args.set} if args.set else {}),
            "corpus": corpus, "corpus_build_s": round(build_s, 1),
            "sampled_tokens": f["ds_tokens_sampled"], "packed_tokens": f["ours_tokens"],
            "mix": {"recipe_met": mix["recipe"]["met"], "tolerance_pp": mix["tolerance_pp"],
                    "max_abs_deviation_pp": mix["totals"]["max_abs_deviation_pp"],
                    "misses": [m["detail"] for m in mix["recipe"]["misses"]],
                    "short_sources": [x["source"] for x in mix["sources"] if x.get("shortfall")],
                    "share_tokens": {x["source"]: x["share_tokens"] for x in mix["sources"]}},
            "filter_keep": f["filter_keep"], "dedup_keep": f["dedup_keep"], "stages": stages}


def _slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2 or min(xs + ys) <= 0:
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((x - mx) ** 2 for x in lx)
    return round(sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / den, 3) if den else None


def _linear(u: list[float], y: list[float]) -> list[float] | None:
    """[intercept, slope >= 0] of y against u by least squares (None with fewer than two sizes)."""
    if len(u) < 2 or max(u) == min(u):
        return None
    mu, my = sum(u) / len(u), sum(y) / len(y)
    b = max(sum((x - mu) * (v - my) for x, v in zip(u, y)) / sum((x - mu) ** 2 for x in u), 0.0)
    return [round(my - b * mu, 2), b]


def fit(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Growth exponents per stage against the packed tokens, and RSS = a + b x units (least squares)."""
    out = {}
    xs = [r["packed_tokens"] for r in results]
    for a in STAGES:
        st = [r["stages"][a] for r in results]
        u = [s["units"] for s in st]
        rss = [s["peak_rss_tree_mb"] for s in st]
        # a stage continued after a kill has the continued part's CPU-s only: left out of the CPU fits
        whole = [(x, s) for x, s in zip(xs, st) if not s.get("wall_is_lower_bound")]
        out[a] = {"wall_exponent": _slope(xs, [s["wall_s"] for s in st]),
                  "time_exponent": _slope([x for x, _ in whole], [s["cpu_s"] for _, s in whole]),
                  "rss_exponent": _slope(xs, rss), "rss_linear": _linear(u, rss),
                  # CPU-s = fixed + marginal x units: at small sizes the fixed part (imports, models,
                  # reports) bends the log-log exponent below 1; the marginal cost is what scales
                  "cpu_linear": _linear([s["units"] for _, s in whole], [s["cpu_s"] for _, s in whole])}
        if len(whole) < len(st):
            out[a]["wall_is_lower_bound"] = True  # its wall exponent includes a lower-bound wall
    return out


def _per_cpu(r: dict[str, Any], a: str) -> int | str:
    """Tokens (ours for stage 4, DeepSeek's before) per CPU-second of the stage."""
    s = r["stages"][a]
    if s.get("wall_is_lower_bound"):
        return "n/a (continued)"
    return round((r["packed_tokens"] if a == "packed" else r["sampled_tokens"]) / s["cpu_s"])


def markdown(results: list[dict[str, Any]], fits: dict[str, Any]) -> str:
    lines = ["| size (packed tokens) | stage | wall s | CPU s | peak RSS tree MB | written MB | docs/s | MB/s | tokens/s "
             "| tokens per CPU-s |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for a in STAGES:
            s, t = r["stages"][a], r["stages"][a]["throughput"]
            ge = "≥ " if s.get("wall_is_lower_bound") else ""  # a stage continued after a kill
            lines.append(f"| {r['packed_tokens']:,.0f} | {SCRIPTS[a]} | {ge}{s['wall_s']} | {s['cpu_s']} | "
                         f"{s['peak_rss_tree_mb']} | {s['bytes_written'] / 2**20:,.1f} | {t['docs_per_s'] or ''} | "
                         f"{t['mb_per_s']} | {t['tokens_per_s'] or ''} | {_per_cpu(r, a)} |")
    lines += ["", "| stage | wall exponent | CPU-s exponent | RSS exponent | CPU-s fixed + per 1M units | RSS MB fixed "
              "+ per 1M units |", "|---|---:|---:|---:|---:|---:|"]
    for a in STAGES:
        f = fits[a]
        cl, rl = f.get("cpu_linear"), f.get("rss_linear")
        lines.append(f"| {SCRIPTS[a]} | {f['wall_exponent']} | {f['time_exponent']} | {f['rss_exponent']} | "
                     f"{cl and f'{cl[0]:.1f} + {cl[1] * 1e6:.2f}'} | {rl and f'{rl[0]:.0f} + {rl[1] * 1e6:.1f}'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="3e6,8e6", help="DeepSeek tokens per run, comma-separated")
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--exact", type=float, default=0.02)
    p.add_argument("--near", type=float, default=0.03)
    p.add_argument("--swap", type=float, default=0.08)
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--refit", action="store_true", help="recompute fit.json/results.md from results.json only")
    p.add_argument("--resume", action="store_true",
                   help="keep the stages a killed call already measured (their <stage>.measured.json and "
                        "artifact) and run the rest: a 1B size can span sessions")
    p.add_argument("--continue-killed", action="store_true",
                   help="finish a stage that an earlier call left killed from its finished units instead of "
                        "measuring it whole; the result records the killed part (units, at-least wall) beside "
                        "the continued part's own wall, so the stage's wall is a lower bound, said as such")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting added to the demo config's for every stage (e.g. sampler.signals_headroom=0.5); "
                        "recorded with the size and named wherever its figures are shown")
    p.add_argument("--corpus-only", action="store_true",
                   help="build each size's scale corpus and print where it is (and the environment the stages "
                        "need to read it) without running the stages: for bench/bench_resume.py at scale")
    p.add_argument("--publish", action="store_true",
                   help=f"also write the results to {PUBLISH.relative_to(ROOT)} (the committed example the docs' "
                        "scale figures are generated from); without it only bench/out/scale is written")
    args = p.parse_args()
    out = ROOT / "bench" / "out" / "scale"
    old = out / "results.json"  # sizes measured by an earlier call are kept (one size per call is fine)
    results = [r for r in json.loads(old.read_text())] if old.is_file() else []
    quality_sets = [] if args.refit else fixed_quality_models(args.config)  # built or reused once per call
    if args.corpus_only:
        for n in [float(x) for x in args.sizes.split(",")]:
            size = out / str(int(n))
            stats = build_scale_corpus(size, n, args)
            print(json.dumps({"target_tokens": n, "domains": stats["domains"]}))
            sets = [f"sampler.target_tokens={int(n)}", "tokenizer.allow_smaller_vocab=true",
                    *quality_sets]
            print(f"MINIDEEPSEEK_CACHE={size / 'cache'} {DERIVED_ENV}=1 (stages: "
                  + " ".join(f"--set {x}" for x in sets) + ")")
        return 0
    for n in [] if args.refit else [float(x) for x in args.sizes.split(",")]:
        results = sorted([r for r in results if r["target_tokens"] != n] + [measure_size(n, args, quality_sets)],
                         key=lambda r: r["target_tokens"])
        write_results(out, results, args.publish)
    if args.refit:
        write_results(out, results, args.publish)
    print((out / "results.md").read_text())
    return 0


def _backfill_commits(out: Path, results: list[dict[str, Any]]) -> None:
    """Each stage's commit, from its artifact's manifest (measurements from before it was recorded)."""
    for r in results:
        n = int(r["target_tokens"])
        for a, st in r["stages"].items():
            man = out / str(n) / "data" / f"scale_{n}" / a / "manifest.json"
            if not st.get("git_commit") and man.is_file():
                st["git_commit"] = json.loads(man.read_text()).get("git_commit")


def write_results(out: Path, results: list[dict[str, Any]], publish: bool = False) -> None:
    """results.json, fit.json and results.md into ``out`` and, with ``publish``, into the committed example
    that the docs' scale figures are generated from (``python -m minideepseek.readme_figures``), ``PUBLISH``."""
    _backfill_commits(out, results)
    for r in results:  # measurements recorded before continued stages were lower bounds
        for st in r["stages"].values():
            if st.get("continued_killed_run"):
                _lower_bound_wall(st)
    fits = fit(results)
    for d in (out, PUBLISH) if publish else (out,):
        d.mkdir(parents=True, exist_ok=True)
        (d / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        (d / "fit.json").write_text(json.dumps({"sizes": [r["target_tokens"] for r in results], "fit": fits},
                                               indent=1) + "\n")
        (d / "results.md").write_text(markdown(results, fits))


if __name__ == "__main__":
    raise SystemExit(main())
