"""``report.py whatif ... --apply``: write the stage-1 artifact a what-if predicts, as a ``--force`` rerun
of stage 1 with the same change would, without rerunning stage 1.

    .venv/bin/python report.py whatif --config C --set sources.web.filters.7.threshold=0.8 --apply

What decides: the prediction (:mod:`.whatif`): every stored document re-decided with the filters' own
``decide`` and the quota replayed over the store. Nothing is re-scored to decide. What is written:

* the data shards: sources in config order, each in sampling order, cut where the quota stops, as
  stage 1's assembly does. A document kept before and after, under a chain of the same filters (only
  re-decided thresholds changed), is copied from the old artifact's row (no extraction, no scoring).
  A document the run dropped and the what-if keeps, and every document of a source whose chain lost a
  filter (its audit trace and signals name the chain), is re-read from its raw record and run through
  the new chain (its text is the chain's output; the store holds no text): those alone are
  re-extracted, and their verdict must agree with the store's (else the command stops). Ids a source
  reused get their ``~k`` in the sampler's emission order, as in a rerun. Tested: the shards are
  byte-identical to a ``--force`` rerun's.
* the signal store, re-decided (each row's verdicts, decision and the chains in ``meta.json``); a dropped
  filter's signal keys stay in the ``signals`` JSON (nothing reads them);
* ``source_mix.{json,md}`` and ``quality_report.{json,md}`` rebuilt from the above. ``filter_report.*``
  and ``rejects.jsonl`` are not rewritten (their examples and snippets come from documents' texts the
  store does not hold): they are left out of the new artifact, and ``whatif_applied`` in the manifest
  says so; rerun stage 1 for them.

The manifest is the one stage 1 writes for the new config (its config hash and inputs), so a later
``mix_sampler.py`` with the changed config finds the artifact up to date and the later stages rebuild
from it; the run's config file must carry the change (``--set`` on every later command, or an edit).
It is written under the stage contract (tmp dir, manifest last, atomic swap: :class:`StageRun`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import pipeline
from ..arrow_io import DatasetWriter, iter_dataset_rows
from ..config import ConfigError
from ..fsio import write_json_atomic, write_text_atomic
from ..records import DOC_FEATURES, SCHEMA_VERSION, Reject, copy_epoch, copy_id, is_copy
from ..sources import make_source
from ..stage import StageRun
from .config import MixSamplerConfig
from .process import ProcessSettings, process_batch
from .quality_report import quality_chains, write_quality_report
from .report import build_source_mix, source_mix_markdown
from .signals import META, STORE_DIR

log = logging.getLogger(__name__)

SPEC = pipeline.stage("mix_sampler")
DUP_TRACE = "sampler:duplicate_source_id"


def _strip_dup(row: dict[str, Any]) -> dict[str, Any]:
    """A row as emitted before the sampler made its reused id unique."""
    trace = list(row["audit_trace"])
    if trace and trace[-1] == DUP_TRACE:
        trace = trace[:-1]
        row = {**row, "id": row["id"].rsplit("~", 1)[0]}
    return {**row, "audit_trace": trace}


def _old_rows(art: Path, sources: set[str]) -> dict[tuple[str, str, str, int], dict[str, Any] | None]:
    """The old artifact's originals by (source, id before ~k, url, n_chars); None where that key is ambiguous."""
    out: dict[tuple[str, str, str, int], dict[str, Any] | None] = {}
    for row in iter_dataset_rows(art):
        if row["source"] not in sources or is_copy(row["id"]):
            continue
        row = _strip_dup(row)
        key = (row["source"], row["id"], row["url"] or "", row["n_chars"])
        out[key] = None if key in out else row
    return out


def _reread(cfg: MixSamplerConfig, source: str, want: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Rows of the store positions ``want`` (position -> store row), from their raw records through the new chain."""
    s = next(x for x in cfg.sources if x.name == source)
    by_loc = {(r["file"], r["line"], r["offset"], r["source_id"]): p for p, r in want.items()}
    src = make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers, cfg.sampler.max_chars)
    raws, positions = [], []
    try:
        for raw in src.iter_raw(1):
            p = by_loc.pop((raw.file or "", raw.line, raw.offset, str(raw.source_id)), None)
            if p is not None:
                raws.append(raw)
                positions.append(p)
                if not by_loc:
                    break
    finally:
        if hasattr(src, "close"):
            src.close()
    if by_loc:
        raise ConfigError(f"whatif --apply: {len(by_loc):,} raw records of source {source} are gone from its input "
                          "(the source changed since the run); rerun stage 1")
    settings = ProcessSettings(source=s.name, min_chars=cfg.sampler.min_chars, max_chars=cfg.sampler.max_chars,
                               extract=cfg.extract, filters=s.filters, lang=s.lang)
    out = {}
    for p, item in zip(positions, process_batch((raws, settings)), strict=True):
        if isinstance(item, Reject):
            raise ConfigError(f"whatif --apply: document {want[p]['id']} re-read from its raw record is dropped "
                              f"({item.filter or ''} {item.reason}) although the store's decision keeps it; the "
                              "store does not match the source any more: rerun stage 1")
        item.pop("_mods", None)
        item.pop("_store", None)
        item["n_tokens"] = want[p]["n_tokens"]
        out[p] = item
    return out


def _restore_table(table: pa.Table, steps: list[Any]) -> pa.Table:
    """The store table under the new chain: verdict columns in the new chain's order, the decision re-made."""
    from .whatif import _decide

    rows = table.to_pylist()
    out = []
    for r in rows:
        kind, reason = _decide(r, steps)
        new = {k: v for k, v in r.items() if not k.startswith("verdict_")}
        sig = json.loads(r["signals"]) if any(st.cfg is not None for st in steps) else {}
        for j, st in enumerate(steps):
            new[f"verdict_{j}"] = r[f"verdict_{st.stored}"] if st.cfg is None else _verdict(st, sig)
        new.update(chain_keep=not kind, filter=kind, reason=reason)
        out.append(new)
    from .signals import _schema

    return pa.Table.from_pylist(out, schema=_schema(len(steps)))


def _verdict(step: Any, signals: dict[str, Any]) -> str:
    from ..filters import FILTERS

    return FILTERS[step.kind].decide(signals, step.cfg)


def _picked_rows(cfg: MixSamplerConfig, it: dict[str, Any], old: dict[tuple, dict[str, Any]],
                 same_shape: dict[str, bool]) -> tuple[dict[str, list[dict[str, Any] | None]], dict[str, int]]:
    """Each source's emitted rows in emission order: the old artifact's row where the document is unchanged,
    else re-read and re-extracted from its raw record; upsampled copies renamed as the Taker names them."""
    emitted, tables = it["emitted"], it["tables"]
    rows_by_source: dict[str, list[dict[str, Any] | None]] = {}
    rebuilt_by_source: dict[str, int] = {}
    for name, em in emitted.items():
        store = tables[name].to_pylist()
        want: dict[int, dict[str, Any]] = {}
        picked: list[dict[str, Any] | None] = []
        keep = it["outcome"][name]["keep"]
        for i, e in enumerate(em):
            r = store[e["position"]]
            if keep is not None and i >= keep:  # cut by the quota: never written, only its id takes part in ~k
                picked.append({"id": e["id"], "audit_trace": []})
                continue
            row = old.get((name, r["id"], r["url"] or "", r["n_chars"])) if same_shape[name] else None
            if row is None:
                want[e["position"]] = r
            picked.append(row)
        if want:
            got = _reread(cfg, name, want)
            picked = [row if row is not None else got[em[i]["position"]] for i, row in enumerate(picked)]
            rebuilt_by_source[name] = len(got)
        # an upsampled copy: its original's row under the copy's id, as the Taker makes it
        for i, e in enumerate(em):
            k = copy_epoch(e["id"])
            if k > 1 and picked[i] is not None and "text" in picked[i]:  # type: ignore[operator]
                row = picked[i]
                assert row is not None
                picked[i] = {**row, "id": copy_id(row["id"], k),
                             "audit_trace": [*row["audit_trace"], f"sampler:upsample_epoch={k}"]}
        rows_by_source[name] = picked
    return rows_by_source, rebuilt_by_source


def _unique_ids(order: list[tuple[str, int]], rows_by_source: dict[str, list[dict[str, Any] | None]]) -> Counter:
    """Ids made unique in the sampler's emission order, as stage 1's collector does; renames per source."""
    seen: set[str] = set()
    dup: Counter = Counter()
    for name, i in order:
        row = dict(rows_by_source[name][i])  # type: ignore[arg-type]
        if row["id"] in seen:
            k = 2
            while f"{row['id']}~{k}" in seen:
                k += 1
            row["id"] = f"{row['id']}~{k}"
            row["audit_trace"] = [*row["audit_trace"], DUP_TRACE]
            dup[name] += 1
        seen.add(row["id"])
        rows_by_source[name][i] = row
    return dup


def _write_rows(tmp: Path, cfg: MixSamplerConfig, it: dict[str, Any],
                rows_by_source: dict[str, list[dict[str, Any] | None]]) -> tuple[DatasetWriter, list, dict[str, Counter]]:
    """The documents, source by source up to each quota's cut, as stage 1 writes them; realized counts."""
    writer = DatasetWriter(tmp, DOC_FEATURES, cfg.sampler.max_shard_bytes)
    realized: dict[str, Counter] = {}
    for s in cfg.sources:
        keep = it["outcome"][s.name]["keep"]
        rows = rows_by_source[s.name] if keep is None else rows_by_source[s.name][:keep]
        c: Counter = Counter()
        for row in rows:
            assert row is not None
            c["docs"] += 1
            c["tokens"] += row["n_tokens"]
            c["chars"] += row["n_chars"]
            c[f"epoch_{copy_epoch(row['id'])}"] += 1
            writer.append(row)
        if keep is not None and keep < len(rows_by_source[s.name]):
            c["dropped_by_shrink"] = len(rows_by_source[s.name]) - keep
        writer.flush()
        realized[s.name] = c
    return writer, writer.close(), realized


def _write_store(tmp: Path, cfg: MixSamplerConfig, it: dict[str, Any]) -> None:
    """The signal store, re-decided under the new chains (a top fraction keeps its stored pilot threshold)."""
    import pyarrow.parquet as pq

    tables, plans, meta = it["tables"], it["plans"], it["meta"]
    (tmp / STORE_DIR).mkdir()
    chains = {}
    for s in cfg.sources:
        pq.write_table(_restore_table(tables[s.name], plans[s.name]), str(tmp / STORE_DIR / f"{s.name}.parquet"),
                       compression="zstd")
        stored = meta["chains"][s.name]
        chains[s.name] = [{**s.filters[j], **({"pilot_threshold": stored[st.stored]["pilot_threshold"]}
                                               if "pilot_threshold" in stored[st.stored] else {})}
                          for j, st in enumerate(plans[s.name])]
    write_json_atomic(tmp / STORE_DIR / META, {**meta, "chains": chains,
                                               "weights": {s.name: s.weight for s in cfg.sources}})


def _stage_run(cfg: MixSamplerConfig) -> StageRun:
    """Stage 1's contract with the inputs a real run of this config would record (sources, models, deletions)."""
    from .quality_build import ensure_models
    from .stage import deletion_input

    inputs = [make_source(s, cfg.run.seed, cfg.run.cache_path, cfg.sampler.demo_tiers, cfg.sampler.max_chars).input_ref()
              for s in cfg.sources]
    inputs += ensure_models(cfg)
    deletions = deletion_input(cfg)
    if deletions is not None:
        inputs.append(deletions)
    return StageRun(SPEC.name, SPEC.artifact, cfg.run.run_dir, cfg, inputs, SCHEMA_VERSION, cfg.run.seed)


def apply_prediction(cfg: MixSamplerConfig, pred: dict[str, Any], overrides: list[str],
                     drop_filter: list[str]) -> Any:
    """Write the predicted artifact under the stage contract; returns its manifest."""
    from .stage import _resolved_chain

    it = pred["_internal"]
    old_art = cfg.run.run_dir / SPEC.artifact
    old_man = it["manifest"]
    # the new config's own chains must be the predicted ones (a --drop-filter is not a config: refuse it here)
    if drop_filter:
        raise ConfigError("whatif --apply: --drop-filter is a prediction only; to apply it, remove the filter from "
                          "the config (or --set sources.NAME.filters=[...]) so the new artifact's config says so")
    sources = {s.name: s for s in cfg.sources}
    same_shape = {n: len(it["plans"][n]) == len(it["meta"]["chains"][n]) for n in sources}
    old = _old_rows(old_art, {n for n, ok in same_shape.items() if ok})
    rows_by_source, rebuilt_by_source = _picked_rows(cfg, it, old, same_shape)
    dup = _unique_ids(it["order"], rows_by_source)
    stage = _stage_run(cfg)

    def build(tmp: Path) -> Any:
        writer, shards, realized = _write_rows(tmp, cfg, it, rows_by_source)
        _write_store(tmp, cfg, it)
        rejects = {n: Counter(c) for n, c in (old_man.get("counters", {}).get("rejects") or {}).items()}
        mix = build_source_mix(cfg, it["takers"], it["outcome"], realized, {n: rejects.get(n, Counter()) for n in sources})
        mix["ingestion"] = json.loads((old_art / "source_mix.json").read_text(encoding="utf-8")).get("ingestion", {})
        write_json_atomic(tmp / "source_mix.json", mix)
        write_text_atomic(tmp / "source_mix.md", source_mix_markdown(mix))
        resolved = {s.name: _resolved_chain(s.filters, None) for s in cfg.sources}
        if quality_chains(resolved):
            write_quality_report(tmp, tmp, cfg.run.name, resolved)
        oc = old_man.get("counters", {})
        counters = {
            "docs": writer.num_rows, "shards": len(shards), "rejects": oc.get("rejects", {}),
            "per_source": {n: dict(sorted(c.items())) for n, c in realized.items()},
            "duplicate_source_ids": dict(sorted(dup.items())),
            "filtered": {n: sum(t.stats.filtered.values()) for n, t in it["takers"].items()},
            "file_problems": oc.get("file_problems", []), "empty_sources": oc.get("empty_sources", []),
            "whatif_applied": {"from_fingerprint": old_man.get("fingerprint"), "overrides": list(overrides),
                               "rebuilt_docs": sum(rebuilt_by_source.values()), "rebuilt_by_source": rebuilt_by_source,
                               "not_rewritten": ["filter_report.json", "filter_report.md", "rejects.jsonl"]},
        }
        return stage.commit(counters, extra=({"token_counter": old_man["token_counter"]}
                                             if "token_counter" in old_man else None))

    return stage.execute(build, cfg.run.report_dir, SPEC.reports, force=True)
