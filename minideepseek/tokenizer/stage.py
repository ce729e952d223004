"""Stage 3 driver: ``mixed_dedup`` -> ``data/<run>/tokenizer/`` (tokenizer.json + HF config files)
and ``reports/<run>/tokenizer_eval.{json,md}``.

The training sample is streamed to the trainer (``train_from_iterator`` over a generator that reads
the memory-mapped dataset), so memory holds the trainer's pair counts, not the corpus.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from .. import pipeline
from ..arrow_io import iter_dataset_rows, read_columns, shard_paths
from ..config import ConfigError
from ..fsio import write_json_atomic, write_text_atomic
from ..invocation import Command
from ..mapped import take_texts
from ..pipeline import producer
from ..progress import Heartbeat
from ..provenance import peak_rss_mb
from ..sizing import Sizing
from ..stage import InputRef, Manifest, StageRun, require_upstream
from .build import new_tokenizer, new_trainer
from .config import LOSSLESS_NORMALIZERS, SPECIAL_TOKENS, TokenizerConfig, TokenizerStageConfig
from .evaluate import combine, deepseek, evaluate_candidate, normalizer_changes, ours, qwen, token_samples
from .report import eval_markdown
from .sample import component_of, stratified_split

log = logging.getLogger(__name__)

# the stage's identity is the registry's (minideepseek/pipeline.py), written once
SPEC = pipeline.stage("train_tokenizer")
STAGE, ARTIFACT, REPORTS = SPEC.name, SPEC.artifact, SPEC.reports
(UPSTREAM,) = SPEC.upstream
SCHEMA_VERSION = 1
# Resume inside the stage (minideepseek/units.py): the units are the BPE training ("train": one call into the
# tokenizers library, so a kill inside it redoes it whole, reading of the sample included) and the evaluation of
# each held-out split by each tokenizer ("eval=<split>.<tokenizer>": its figures are the unit's state). The
# sample collection is no unit: it is streamed into the trainer and takes 0.3 s of the demo's 37 s training
# (measured), the trainer's own reading (pre-splitting and counting, ~15 s) being part of the training.
TRAIN_UNIT = "train"
COLLECT_DOCS = 2_000  # training documents per sample-collection task (--executor ray)


def _texts(src: Path, wanted: set[int], batch: int = 256, executor: Any = None) -> Iterator[list[str]]:
    """The training texts in dataset order, ``batch`` at a time. With a Ray executor the sample is
    collected by tasks (``COLLECT_DOCS`` rows each, read from the shared dataset) and re-batched here,
    so the trainer sees the same stream either way: training itself runs in this process, as the
    library requires."""
    if executor is not None and executor.kind == "ray":
        idx = np.array(sorted(wanted), dtype=np.int64)
        shards = [str(p.resolve()) for p in shard_paths(src)]  # a Ray worker's cwd is not ours
        chunks = ((shards, idx[s:s + COLLECT_DOCS]) for s in range(0, len(idx), COLLECT_DOCS))
        stream: Iterator[str] = (t for texts in executor.map(take_texts, chunks) for t in texts)
    else:
        stream = (row["text"] for i, row in enumerate(iter_dataset_rows(src, columns=["text"])) if i in wanted)
    buf: list[str] = []
    for text in stream:
        buf.append(text)
        if len(buf) >= batch:
            yield buf
            buf = []
    if buf:
        yield buf


def hf_config_files(out: Path, model_max_length: int = 4096) -> None:
    """tokenizer_config.json + special_tokens_map.json: what PreTrainedTokenizerFast reads."""
    special = {"eos_token": "<|endoftext|>", "pad_token": "<|pad|>", "unk_token": "<|unk|>"}
    added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                      "special": True} for i, t in enumerate(SPECIAL_TOKENS)}
    write_json_atomic(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False, "add_bos_token": False, "add_eos_token": False,
        "added_tokens_decoder": added, **special})
    write_json_atomic(out / "special_tokens_map.json", special)


def run_tokenizer(cfg: TokenizerStageConfig, upstream: dict[str, str], command: Command,
                  force: bool = False, executor: Any = None, restart: bool = False) -> Manifest:
    run_dir = cfg.run.run_dir
    up = require_upstream(run_dir, UPSTREAM, producer(UPSTREAM).script, upstream[UPSTREAM], command)
    inputs = [InputRef(name=UPSTREAM, path=str(run_dir / UPSTREAM), fingerprint=up["fingerprint"])]
    stage = StageRun(STAGE, ARTIFACT, run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)
    return stage.execute(lambda tmp: _build(cfg, run_dir / UPSTREAM, tmp, stage, executor), cfg.run.report_dir,
                         REPORTS, force, restart=restart)


def heldout_texts(src: Path, splits: dict[str, Any], n_chars: list[int], cap: int
                  ) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, dict[str, int]]]]:
    """Both held-out splits' texts (split -> source -> texts, dataset order) and what they cover. With
    ``cap`` > 0 each (split, source) keeps documents while its characters are under ``cap`` (a prefix
    in dataset order, at least one document), chosen from the metadata: only the chosen rows are read."""
    pick: dict[tuple[str, str], list[int]] = {}
    coverage: dict[str, dict[str, dict[str, int]]] = {"component": {}, "random": {}}
    for name, s in splits.items():
        for kind, idx in (("random", s.heldout), ("component", s.heldout_component)):
            take, chars = [], 0
            for i in sorted(idx):
                if cap and take and chars >= cap:
                    break
                take.append(i)
                chars += n_chars[i]
            pick[(kind, name)] = take
            coverage[kind][name] = {"docs": len(take), "chars": chars, "heldout_docs": len(idx),
                                    "heldout_chars": int(sum(n_chars[i] for i in idx))}
    where = {i: key for key, idx in pick.items() for i in idx}
    order = np.array(sorted(where), dtype=np.int64)
    texts = take_texts(([str(p) for p in shard_paths(src)], order)) if len(order) else []
    held: dict[str, dict[str, list[str]]] = {"component": {n: [] for n in splits}, "random": {n: [] for n in splits}}
    for i, t in zip(order.tolist(), texts):
        kind, name = where[i]
        held[kind][name].append(t)
    return held, coverage


def load_split_texts(tc: TokenizerConfig, seed: int, src: Path
                     ) -> tuple[list[str], dict[str, dict[str, list[str]]], dict[str, Any]]:
    """The training texts and both held-out splits' texts (split -> source -> texts), read from ``src``
    (what the benches use to measure exactly the stage's split and evaluation)."""
    meta = read_columns(src, ["source", "n_chars", "url", "audit_trace"])
    comps = [component_of(t[0] if t else "", u or "") for t, u in zip(meta["audit_trace"], meta["url"])]
    splits, _ = stratified_split(tc, seed, meta["source"], meta["n_chars"], comps)
    train_idx = {i for s in splits.values() for i in s.train}
    train = [t for batch in _texts(src, train_idx) for t in batch]
    held, _ = heldout_texts(src, splits, meta["n_chars"], tc.eval_max_chars)
    return train, held, {"splits": splits}


def _build(cfg: TokenizerStageConfig, src: Path, tmp: Path, stage: StageRun, executor: Any = None) -> Manifest:
    tc = cfg.tokenizer
    splits, sample_stats, ids, n_chars, train_idx = _sample(cfg, src)
    train_chars = sum(v["train_chars"] for v in sample_stats.values())
    tok, why_not, sizing, train_s, rss = _train(tc, src, tmp, train_idx, train_chars, executor, stage.units)
    final_vocab = tok.get_vocab_size()
    reached = why_not is None
    # "heldout" lists both held-out splits' ids (what a withdrawal scans); the components are named apart
    write_json_atomic(tmp / "sample.json", {
        name: {"train": [ids[i] for i in s.train], "heldout": [ids[i] for i in sorted(s.heldout + s.heldout_component)],
               "heldout_components": s.components_heldout}
        for name, s in splits.items()})
    report = _evaluate(tc, src, tok, splits, n_chars, stage.units)
    report = {"vocab_size_target": tc.vocab_size, "vocab_size_final": final_vocab, "reached_target": reached,
              "why_not": why_not, "pre_tokenizer": tc.pre_tokenizer, "normalizer": tc.normalizer,
              "lossless": tc.normalizer in LOSSLESS_NORMALIZERS, "special_tokens": list(SPECIAL_TOKENS),
              "sample": sample_stats, **report, "tokens": token_samples(tok)}
    write_json_atomic(tmp / "tokenizer_eval.json", report)
    write_text_atomic(tmp / "tokenizer_eval.md", eval_markdown(report))
    counters = {"vocab_size": final_vocab, "vocab_target": tc.vocab_size, "reached_target": reached,
                "train_docs": len(train_idx), "train_chars": train_chars,
                "heldout_docs": sum(len(s.heldout) + len(s.heldout_component) for s in splits.values()),
                "sample_per_source": sample_stats,
                "round_trip": report["round_trip"]}
    return stage.commit(counters, extra={"training_s": round(train_s, 2), "training_peak_rss_mb": rss,
                                         "sizing": sizing})


def _sample(cfg: TokenizerStageConfig, src: Path) -> tuple[dict[str, Any], dict[str, Any], list[str], list[int],
                                                            set[int]]:
    """The stratified training / held-out split of ``mixed_dedup`` (per source; whole components held out)."""
    meta = read_columns(src, ["id", "source", "n_chars", "url", "audit_trace"])
    sources, n_chars, ids = meta["source"], meta["n_chars"], meta["id"]
    comps = [component_of(t[0] if t else "", u or "") for t, u in zip(meta["audit_trace"], meta["url"])]
    splits, sample_stats = stratified_split(cfg.tokenizer, cfg.run.seed, sources, n_chars, comps)
    train_idx = {i for s in splits.values() for i in s.train}
    log.info("%s: training sample %s docs (%s chars), held out %s docs at random and %s docs of %s whole "
             "components", STAGE, f"{len(train_idx):,}", f"{sum(v['train_chars'] for v in sample_stats.values()):,}",
             f"{sum(v['heldout_docs'] for v in sample_stats.values()):,}",
             f"{sum(v['heldout_component_docs'] for v in sample_stats.values()):,}",
             sum(len(v["components_heldout"]) for v in sample_stats.values()))
    return splits, sample_stats, ids, n_chars, train_idx


def _train(tc: Any, src: Path, tmp: Path, train_idx: set[int], train_chars: int,
           executor: Any, units: Any = None) -> tuple[Any, str | None, list[dict[str, Any]], float, Any]:
    """BPE on the training sample, saved; returns the tokenizer, why it fell short of the vocabulary target
    (None: it did not), the sizing note, the training time and peak RSS. Short and not allowed: an error.
    A killed run's finished training (unit "train") is read back from its tokenizer.json."""
    if units is not None and units.done(TRAIN_UNIT):
        st = units.get(TRAIN_UNIT) or {}
        log.info("%s: the BPE training of the killed run is reused (%s)", STAGE, tmp / "tokenizer.json")
        return (Tokenizer.from_file(str(tmp / "tokenizer.json")), st["why_not"], st["sizing"], st["train_s"],
                st["peak_rss_mb"])
    tok = new_tokenizer(tc)
    t0 = time.time()
    texts = _texts(src, train_idx, executor=executor)
    with Heartbeat(STAGE, "BPE training", len(train_idx), after="computing merges", logger=log) as hb:  # progress
        tok.train_from_iterator(hb.count(texts, len), trainer=new_trainer(tc), length=len(train_idx))
    log.info("%s: BPE training done in %.1f s", STAGE, time.time() - t0)
    train_s = time.time() - t0
    rss = peak_rss_mb()
    final_vocab = tok.get_vocab_size()
    reached = final_vocab >= tc.vocab_size
    why_not = None if reached else (
        f"the training sample ({train_chars:,} chars) has only {final_vocab:,} distinct merges + alphabet with "
        f"frequency >= {tc.min_frequency}; add text (a larger sampler.target_tokens) or lower tokenizer.vocab_size")
    if not reached and not tc.allow_smaller_vocab:
        # fail before anything is written: a silently smaller vocabulary would change every downstream shape
        raise ConfigError(f"{STAGE}: vocab {final_vocab:,} < tokenizer.vocab_size {tc.vocab_size:,}: {why_not}; "
                          "or accept it with --set tokenizer.allow_smaller_vocab=true")
    sizing = [] if reached else [Sizing(STAGE, "tokenizer.vocab_size", tc.vocab_size, final_vocab,
                                        f"the {train_chars:,}-character training sample has no more merges with "
                                        f"frequency >= {tc.min_frequency}").announce().to_json()]
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, f"special token {t} must have id {i}"
    tok.save(str(tmp / "tokenizer.json"))
    hf_config_files(tmp)
    if units is not None:
        units.finish(TRAIN_UNIT, {"why_not": why_not, "sizing": sizing, "train_s": train_s, "peak_rss_mb": rss,
                                  "vocab_size": final_vocab})
    return tok, why_not, sizing, train_s, rss


def _evaluate(tc: Any, src: Path, tok: Any, splits: dict[str, Any], n_chars: list[int],
              units: Any = None) -> dict[str, Any]:
    """The held-out evaluation (ours, and the reference tokenizers when configured): the report's figures.
    Each (split, tokenizer)'s figures are a unit: a resumed run reuses those a killed run recorded."""
    held, coverage = heldout_texts(src, splits, n_chars, tc.eval_max_chars)
    capped = [f"{k}/{n}" for k, v in coverage.items() for n, c in v.items() if c["docs"] < c["heldout_docs"]]
    if capped:
        log.info("%s: evaluating at most %s characters per held-out split and source (tokenizer.eval_max_chars): "
                 "%s capped", STAGE, f"{tc.eval_max_chars:,}", ", ".join(capped))
    log.info("%s: evaluating on the held-out docs (ours%s) ...", STAGE,
             " vs DeepSeek-V3 and Qwen2.5" if tc.eval_reference else "")
    loaders: dict[str, Callable[[], Any]] = {"ours": lambda: ours(tok, tc.normalizer)}
    if tc.eval_reference:
        loaders.update({"deepseek_v3": deepseek, "qwen2.5": qwen})  # qwen: None when its package is missing
    loaded: dict[str, Any] = {}  # a reference tokenizer is loaded once, and only when something is left for it
    evs: dict[str, Any] = {}
    for k, h in held.items():
        texts = {n: t for n, t in h.items() if t}
        parts = []
        for name, load in loaders.items():
            unit = f"eval={k}.{name}"
            if units is not None and units.done(unit):
                parts.append((units.get(unit) or {})["figures"])
                continue
            if name not in loaded:
                loaded[name] = load()
            if loaded[name] is None:
                continue
            parts.append(evaluate_candidate(loaded[name], texts))
            if units is not None:
                units.finish(unit, {"figures": parts[-1]})
        evs[k] = combine(parts, tok.get_vocab_size())
    all_held = {n: held["component"][n] + held["random"][n] for n in splits}
    names = list(dict.fromkeys(n for e in evs.values() for n in e["round_trip"]))  # the candidates, in order
    round_trip = {name: {"ok": sum(e["round_trip"].get(name, {}).get("ok", 0) for e in evs.values()),
                         "docs": sum(e["round_trip"].get(name, {}).get("docs", 0) for e in evs.values())}
                  for name in names}
    return {
        # "per_source"/"vocab_utilization" keep the random split (what earlier runs reported, so the
        # dashboard compares like with like); "splits" has both
        "per_source": evs["random"]["per_source"], "round_trip": round_trip,
        "vocab_utilization": evs["random"]["vocab_utilization"], "vocab_seen": evs["random"]["vocab_seen"],
        "splits": {k: {"per_source": e["per_source"], "round_trip": e["round_trip"]} for k, e in evs.items()},
        "normalizer_changes": normalizer_changes(all_held, tc.normalizer),
        # what the figures above were measured on: per split and source, documents/characters evaluated
        # of those held out (fewer where tokenizer.eval_max_chars capped it)
        "eval_coverage": {"max_chars": tc.eval_max_chars, "capped": capped, "splits": coverage},
    }


def summary_line(cfg: Any, man: dict[str, Any]) -> str:
    """The one line the stage script prints when it is done."""
    c = man["counters"]
    return (f"tokenizer: vocab {c['vocab_size']:,} (target {c['vocab_target']:,}) from {c['train_docs']:,} docs in "
            f"{cfg.run.run_dir / ARTIFACT}; report: {cfg.run.report_dir / 'tokenizer_eval.md'}")
