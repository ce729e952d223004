"""What-if: predict, from stage 1's signal store, what new filter thresholds do to the kept set and the
recipe, without re-running stage 1.

    .venv/bin/python report.py whatif --config C --set sources.web.filters.0.threshold=0.7
    .venv/bin/python report.py whatif --config C --drop-filter web:1 --json /tmp/whatif.json

The run must have been built with ``sampler.signals: full``. The prediction re-decides every stored
document with the filters' own ``decide`` functions (the code stage 1 runs, so a prediction cannot
drift from a rerun), then replays the sampler's quota code (:func:`.quota.run_quotas` with the same
``Taker``) over the stored documents in their sampling order with their stored token counts. So
weights, the target and the shortfall policy may change too. It prints each source's documents and
tokens against the run and the recipe; ``--json`` also lists the kept ids.

It refuses (exit 2, naming why) what the store cannot answer, rather than guess:
* a changed parameter that a filter does not re-decide (``DECIDE_KEYS``: quality.threshold,
  fineweb's three thresholds, langid.threshold), a filter added, a modifier (c4, pii) removed, a
  changed ``top_fraction`` (its pilot would move), or changed sources, extraction, length limits or seed;
* a source whose new quota needs documents the run never read (a streamed source stops at its quota;
  finite ones are read to the end of their first pass). A later pass (upsampling, ``max_epochs`` > 1) of
  a source read to its end is predicted: its order is the source's seeded order of that pass, read from
  the raw records (no extraction), over the stored documents.
``--apply`` then writes the predicted artifact (:mod:`.whatif_apply`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigError, build, to_plain
from ..filters import FILTERS
from ..pipeline import MIXED_RAW
from ..records import Reject
from ..runconfig import load_stage_config
from .config import MixSamplerConfig
from .quota import Taker, run_quotas
from .signals import read_store


class NeedsRerun(ConfigError):
    """The store cannot answer this what-if; the message says what to rerun."""


@dataclass
class _Step:
    stored: int  # index of the filter in the stored chain
    kind: str
    cfg: Any | None  # new config to re-decide with; None: the stored verdict stands


def _plan_chain(source: str, stored: list[dict[str, Any]], new: tuple[dict[str, Any], ...]) -> list[_Step]:
    """Align the new chain with the stored one: same filters in order, some removed, some re-parametrized."""
    steps: list[_Step] = []
    i = 0
    for j, spec in enumerate(new):
        kind = spec.get("type")
        while i < len(stored) and stored[i].get("type") != kind:
            _removable(source, stored[i], i)
            i += 1
        if i == len(stored):
            raise NeedsRerun(f"sources.{source}.filters[{j}] ({kind}) is not in the stored chain: a new filter "
                             "needs a stage-1 rerun (mix_sampler.py --force)")
        old = {k: v for k, v in stored[i].items() if k not in ("type", "pilot_threshold")}
        now = {k: v for k, v in spec.items() if k != "type"}
        changed = sorted(k for k in set(old) | set(now) if old.get(k) != now.get(k))
        if not changed:
            steps.append(_Step(i, kind, None))
        else:
            cls = FILTERS[kind]
            allowed = getattr(cls, "DECIDE_KEYS", ())
            bad = [k for k in changed if k not in allowed]
            if bad:
                raise NeedsRerun(f"sources.{source}.filters[{j}] ({kind}): {bad} change what is measured; the "
                                 f"store re-decides only {list(allowed) or 'nothing'} of this filter; rerun stage 1")
            steps.append(_Step(i, kind, build(cls.Config, now, f"sources.{source}.filters[{j}]({kind})")))
        i += 1
    for k in range(i, len(stored)):
        _removable(source, stored[k], k)
    # a top_fraction's threshold comes from a pilot of the documents that pass the filters before it: any
    # change there moves the pilot, so its stored threshold no longer holds
    tops = [k for k, f in enumerate(stored) if f.get("type") == "quality" and f.get("top_fraction") is not None]
    if tops:
        kept_before = [st.stored for st in steps if st.stored < tops[0]]
        changed_before = [st.kind for st in steps if st.stored < tops[0] and st.cfg is not None]
        if changed_before or len(kept_before) != tops[0]:
            raise NeedsRerun(f"sources.{source}: a filter before the quality top_fraction changed, which moves its "
                             "pilot threshold; rerun stage 1")
    return steps


def _removable(source: str, spec: dict[str, Any], i: int) -> None:
    if not hasattr(FILTERS[spec["type"]], "decide"):
        raise NeedsRerun(f"sources.{source}.filters[{i}] ({spec['type']}) may rewrite the text the later filters "
                         "see; removing it needs a stage-1 rerun")


def _decide(row: dict[str, Any], steps: list[_Step]) -> tuple[str, str]:
    """(filter, reason) of the first drop under the new chain, ("", "") kept."""
    signals: dict[str, Any] | None = None
    for st in steps:
        if st.cfg is None:
            verdict = row[f"verdict_{st.stored}"]
        else:
            if signals is None:
                signals = json.loads(row["signals"])
            verdict = FILTERS[st.kind].decide(signals, st.cfg)
        if verdict is None:
            raise NeedsRerun(f"document {row['id']}: filter {st.kind} did not run on it (store written with "
                             "sampler.signals=first_drop); rebuild stage 1 with --set sampler.signals=full")
        if verdict:
            return st.kind, verdict
    return "", ""


def _check_same_inputs(new: MixSamplerConfig, manifest: dict[str, Any]) -> None:
    old = manifest["config"]
    cur = to_plain(new)
    if cur["run"]["seed"] != old["run"]["seed"]:
        raise NeedsRerun("run.seed differs from the run's: the sampling order changes; rerun stage 1")
    for key in ("extract",):
        if cur[key] != old[key]:
            raise NeedsRerun(f"{key} differs from the run's: documents would be extracted differently; rerun stage 1")
    for key in ("min_chars", "max_chars", "token_counter", "demo_tiers"):
        if cur["sampler"][key] != old["sampler"][key]:
            raise NeedsRerun(f"sampler.{key} differs from the run's; rerun stage 1")
    from ..fsio import sha256_file

    for i in manifest.get("inputs", []):  # the stored scores are this model's: a rebuilt one scores differently
        if i["name"].startswith("quality_model:"):
            path = Path(i["path"])
            if not path.is_file() or sha256_file(path) != i["fingerprint"]:
                raise NeedsRerun(f"the quality model {path} is not the one the run scored with ({i['name']}); "
                                 "rerun stage 1")
    strip = ("filters", "weight", "max_epochs")
    olds = {s["name"]: {k: v for k, v in s.items() if k not in strip} for s in old["sources"]}
    for s in cur["sources"]:
        if olds.get(s["name"]) != {k: v for k, v in s.items() if k not in strip}:
            raise NeedsRerun(f"source {s['name']} is new or reads other data than the run's; rerun stage 1")


def _later_pass(cfg: MixSamplerConfig, name: str, epoch: int, rows: list[dict[str, Any]]) -> Iterator[int]:
    """Store positions in the order of pass ``epoch`` (an upsampling pass): the source's own seeded order of
    that pass, read from its raw records without extracting them (records the store lacks, invalid or
    withdrawn ones, are rejects in a rerun's later pass too, which take nothing)."""
    from ..sources import make_source

    pos = {(r["file"], r["line"], r["offset"], r["source_id"]): i for i, r in enumerate(rows)}
    s = next(x for x in cfg.sources if x.name == name)
    src = make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers, cfg.sampler.max_chars)
    try:
        if hasattr(src, "load") and getattr(src, "reads_up_front", True):
            src.load()
        for raw in src.iter_raw(epoch):
            i = pos.get((raw.file or "", raw.line, raw.offset, str(raw.source_id)))
            if i is not None:
                yield i
    finally:
        if hasattr(src, "close"):
            src.close()


def predict(new: MixSamplerConfig, drop: dict[str, set[int]] | None = None) -> dict[str, Any]:
    """The kept ids and tokens per source that stage 1 would produce under ``new``."""
    from ..artifact import read_manifest

    art = new.run.run_dir / MIXED_RAW
    man = read_manifest(art)
    if man is None:
        raise ConfigError(f"{art} is not a finished stage-1 artifact; run mix_sampler.py first")
    meta, tables = read_store(art)
    if meta["mode"] != "full":
        raise NeedsRerun(f"the store of {art} was written with sampler.signals={meta['mode']}; predictions need "
                         "full (every rule on every document): rebuild stage 1 with --set sampler.signals=full")
    _check_same_inputs(new, dict(man))
    sc = new.sampler
    takers: dict[str, Taker] = {}
    emitted: dict[str, list[dict[str, Any]]] = {}
    order: list[tuple[str, int]] = []  # (source, index in emitted[source]) in the sampler's emission order
    plans: dict[str, list[_Step]] = {}
    for s in new.sources:
        chain = tuple(f for i, f in enumerate(s.filters) if i not in (drop or {}).get(s.name, set()))
        steps = plans[s.name] = _plan_chain(s.name, meta["chains"][s.name], chain)
        rows = tables[s.name].to_pylist()
        read_to_end = meta["sources"][s.name]["first_pass_read_to_end"]
        emitted[s.name] = []

        def iter_epoch(epoch: int, name: str = s.name, n: int = len(rows), end: bool = read_to_end,
                       rows: list[dict[str, Any]] = rows, headroom: float | None = meta.get("signals_headroom")
                       ) -> Iterator[int]:
            if epoch > 1:
                if not end:
                    raise NeedsRerun(f"source {name} would need a second pass (upsampling) of a source the run did "
                                     "not read to its end; rerun stage 1")
                yield from _later_pass(new, name, epoch, rows)
                return
            yield from range(n)
            if not end:
                past = (f"its quota plus sampler.signals_headroom={headroom}" if headroom is not None else "its quota")
                raise NeedsRerun(f"source {name}: the run stopped reading at {past} ({n:,} documents evaluated) and "
                                 "this what-if needs more; rerun stage 1 (with a larger signals_headroom, or null to "
                                 "read the whole first pass)")

        def fetch(positions: list[int], name: str = s.name, rows: list[dict[str, Any]] = rows,
                  steps: list[_Step] = steps) -> list[dict | Reject]:
            out: list[dict | Reject] = []
            for p in positions:
                r = rows[p]
                kind, reason = _decide(r, steps)
                if kind:
                    out.append(Reject(name, r["source_id"], r["url"], reason, "", "", kind="filtered", filter=kind))
                elif r["post_check"]:
                    out.append(Reject(name, r["source_id"], r["url"], r["post_check"], "", ""))
                else:
                    out.append({"id": r["id"], "n_tokens": r["n_tokens"], "n_chars": r["n_chars"], "audit_trace": [],
                                "position": p})
            return out

        def emit(row: dict[str, Any], name: str = s.name) -> None:
            order.append((name, len(emitted[name])))
            emitted[name].append(row)

        takers[s.name] = Taker(s.name, iter_epoch, sc.unit, s.max_epochs, fetch, emit,
                               lambda rej: None, sc.batch_size, sc.max_reject_fraction)
    weights = {s.name: s.weight for s in new.sources}
    outcome = run_quotas(takers, weights, sc.target, sc.unit, sc.shortfall)
    result: dict[str, Any] = {"run": new.run.name, "unit": sc.unit, "target": sc.target, "sources": {}}
    for s in new.sources:
        keep = outcome[s.name]["keep"]
        rows = emitted[s.name] if keep is None else emitted[s.name][:keep]
        result["sources"][s.name] = {"docs": len(rows), "tokens": sum(r["n_tokens"] for r in rows),
                                     "ids": [r["id"] for r in rows], "weight": s.weight,
                                     "shortfall": outcome[s.name]["shortfall"]}
    # for --apply (whatif_apply.py): every emitted row with its store position, the emission order, the plans
    result["_internal"] = {"emitted": emitted, "order": order, "plans": plans, "takers": takers, "outcome": outcome,
                           "meta": meta, "tables": tables, "manifest": man}
    return result


def actual(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Docs, tokens and ids per source of the run's artifact."""
    from ..arrow_io import read_columns

    cols = read_columns(run_dir / MIXED_RAW, ["id", "source", "n_tokens"])
    out: dict[str, dict[str, Any]] = {}
    for i, src, n in zip(cols["id"], cols["source"], cols["n_tokens"]):
        e = out.setdefault(src, {"docs": 0, "tokens": 0, "ids": []})
        e["docs"] += 1
        e["tokens"] += n
        e["ids"].append(i)
    return out


def table(pred: dict[str, Any], run: dict[str, dict[str, Any]]) -> str:
    unit = pred["unit"]
    tot = sum(v[unit] for v in pred["sources"].values()) or 1
    tot_run = sum(v.get(unit, 0) for v in run.values()) or 1
    lines = [f"| source | recipe share | run docs | what-if docs | run tokens | what-if tokens | run share | "
             f"what-if share ({unit}) | added | removed |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    wsum = sum(v["weight"] for v in pred["sources"].values()) or 1
    for name, p in pred["sources"].items():
        r = run.get(name, {"docs": 0, "tokens": 0, "ids": []})
        added = len(set(p["ids"]) - set(r["ids"]))
        removed = len(set(r["ids"]) - set(p["ids"]))
        lines.append(f"| {name} | {p['weight'] / wsum:.1%} | {r['docs']:,} | {p['docs']:,} | {r['tokens']:,} | "
                     f"{p['tokens']:,} | {r.get(unit, 0) / tot_run:.1%} | {p[unit] / tot:.1%} | {added:,} | {removed:,} |")
    return "\n".join(lines)


def run_whatif(a: argparse.Namespace) -> None:
    """Predict, print the table against the run, and write --json."""
    drop: dict[str, set[int]] = {}
    for item in a.drop_filter:
        name, _, idx = item.partition(":")
        if not idx.isdigit():
            raise ConfigError(f"--drop-filter {item!r}: use SOURCE:INDEX, e.g. web:1")
        drop.setdefault(name, set()).add(int(idx))
    cfg = load_stage_config(MixSamplerConfig, a.config, a.overrides, quiet=True)
    pred = predict(cfg, drop)
    print(table(pred, actual(cfg.run.run_dir)))
    if a.json:
        Path(a.json).write_text(json.dumps({k: v for k, v in pred.items() if k != "_internal"}, indent=1),
                                encoding="utf-8")
    if a.apply:
        from .whatif_apply import apply_prediction

        man = apply_prediction(cfg, pred, a.overrides, a.drop_filter)
        print(f"applied: {cfg.run.run_dir / MIXED_RAW} rewritten from the signal store ({man['counters']['docs']:,} "
              f"documents, {man['counters']['whatif_applied']['rebuilt_docs']:,} of them re-read from their raw "
              f"records); reports in {cfg.run.report_dir}")
