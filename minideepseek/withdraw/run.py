"""Carry out one deletion request end to end (``withdraw.py`` is the CLI).

Order, each step safe to interrupt:
1. resolve the request on ``mixed_raw`` (+ upsampled copies and duplicate groups), refuse a request
   that matches more than ``withdraw.max_docs`` documents, take each document's n-gram fingerprint
   and the "before" figures, then log the ticket as ``accepted`` (with the resolution);
2. rewrite ``mixed_raw``, ``mixed_dedup``, ``tokenizer`` (sample list only, unless a retrain is
   required and allowed) and ``packed`` (touched shards only) — each into ``<artifact>.tmp-<pid>``,
   manifest last, renamed into place; an artifact whose manifest already lists the ticket is done;
3. the smoke-train model saw the withdrawn tokens: its artifact and reports are removed (rerun
   stage 5) — unless no packed block changed, in which case its manifest is re-pointed;
4. verify (``verify.py``), write the ticket record, impact note and release note, log ``applied``.
A kill anywhere leaves the ticket ``accepted`` but not ``applied``; rerunning the same request (or
``withdraw.py --resume``) picks it up from the recorded resolution.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import numpy as np

from .. import pipeline, runlock
from ..arrow_io import iter_dataset_rows, read_columns
from ..artifact import live_suffix, publish_reports, read_manifest, restore_interrupted_swap
from ..config import ConfigError
from ..edits import ArtifactEdit, EditContext, bases_of, copy_artifact
from ..fsio import atomic_writer, write_json_atomic, write_text_atomic
from ..invocation import Invocation, venv_python
from ..pipeline import PACKED, SMOKE_TRAIN, TOKENIZER, Plan
from ..tickets import Selector, TicketLog, now_utc, ticket_id
from ..upstream import verify_before_use
from .config import WithdrawStageConfig
from .locate import Location, locate, resolve
from .notes import impact_markdown, release_note
from .verify import token_grams, verify, word_grams

log = logging.getLogger(__name__)

EXIT_OK, EXIT_NOT_FOUND, EXIT_TRACES = 0, 3, 4  # 1 = crash (Python's), 2 = config error


def crash_point(name: str) -> None:
    """Fault injection for the kill tests: ``MINIDEEPSEEK_CRASH_AT=packed:before_swap`` SIGKILLs this
    process there, exactly as an operator's kill -9 or an OOM kill would."""
    if os.environ.get("MINIDEEPSEEK_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


class Withdrawal:
    def __init__(self, cfg: WithdrawStageConfig, config_path: str, overrides: list[str]) -> None:
        self.cfg = cfg
        self.wc = cfg.withdraw
        self.run_dir = cfg.run.run_dir
        self.report_dir = cfg.run.report_dir
        self.config_path = config_path
        self.overrides = overrides
        self.plan = Plan(config_path, overrides)
        self.command = Invocation(config=config_path, overrides=tuple(overrides))  # for hints and upstream checks
        self.log = TicketLog(cfg.run.deletion_log_path)
        self.records = self.run_dir / "withdrawals"

    # ---- entry points -------------------------------------------------------------------------
    def request(self, selectors: list[Selector], who: str, why: str, retrain_tokenizer: bool = False,
                dry_run: bool = False) -> int:
        if not selectors:
            raise ConfigError("name what to withdraw: --id, --url, --hash, --text or --source (repeatable)")
        with runlock.hold(self.run_dir):  # no stage may write this run while it is edited (and no 2nd withdrawal)
            return self._request(selectors, who, why, retrain_tokenizer, dry_run)

    def _verify(self, dry_run: bool = False) -> None:
        """Every artifact is checked against its manifest before anything is read or rewritten: a damaged
        shard must be refused here, not re-hashed into a "verified" withdrawal."""
        if not dry_run:  # a dry run writes nothing: not even the recovery of an interrupted swap
            for art in pipeline.artifacts():
                restore_interrupted_swap(self.run_dir / art)
        verify_before_use(self.run_dir, pipeline.artifacts(), self.command)

    def _request(self, selectors: list[Selector], who: str, why: str, retrain_tokenizer: bool,
                 dry_run: bool) -> int:
        self._verify(dry_run)
        t = ticket_id(selectors)
        state = self.log.tickets().get(t)
        if state is not None and state.applied is not None:
            if not dry_run:
                self.log.append({"event": "repeat", "ticket": t, "who": who, "why": why, "when": now_utc()})
            print(f"ticket {t} was already applied on {state.applied['when']} ({len(state.docs or [])} documents); "
                  f"nothing to do. Release note: {self.report_dir / 'release_note.md'}")
            return EXIT_OK
        if state is not None:
            log.info("ticket %s was accepted but not finished (interrupted run); resuming", t)
            return self._apply(t, state.docs or [], retrain_tokenizer)
        other = [x for x, st in self.log.tickets().items() if st.pending]
        if other:  # finish it first: its recorded figures assume the artifacts it saw
            raise ConfigError(f"ticket {other[0]} was interrupted and is not finished; run "
                              f"`{venv_python()} withdraw.py --resume` first, then repeat this request. Nothing changed.")
        docs = resolve(self.run_dir, selectors, t, self.wc.duplicates)
        if not docs:
            what = ", ".join(f"--{s.kind} {s.value!r}" for s in selectors)
            if dry_run:
                print(f"no document in {self.run_dir / pipeline.MIXED_RAW} matches {what} (dry run: nothing written)")
                return EXIT_NOT_FOUND
            self.log.append({"event": "not_found", "ticket": t, "selectors": [s.to_json() for s in selectors],
                             "who": who, "why": why, "when": now_utc()})
            print(f"no document in {self.run_dir / pipeline.MIXED_RAW} matches {what}; nothing changed "
                  f"(logged as not_found in {self.log.path})")
            return EXIT_NOT_FOUND
        direct = [d for d in docs if d["via"].startswith("selector:")]
        if len(direct) > self.wc.max_docs and not any(s.kind == "source" for s in selectors):
            raise ConfigError(f"the request matches {len(direct):,} documents, more than withdraw.max_docs="
                              f"{self.wc.max_docs}; check the selector (a short fragment or broad URL prefix?) or "
                              f"raise it with --set withdraw.max_docs={len(direct)}. Nothing changed.")
        loc = locate(self.run_dir, {d["id"] for d in docs})
        if dry_run:
            print(json.dumps({"ticket": t, "docs": docs, "location": loc.to_json()}, indent=2))
            return EXIT_OK
        self._prepare(t, docs, loc)
        self.log.append({"event": "accepted", "ticket": t, "selectors": [s.to_json() for s in selectors],
                         "who": who, "why": why, "when": now_utc(),
                         "docs": docs})
        crash_point("accepted")
        return self._apply(t, docs, retrain_tokenizer)

    def resume(self, retrain_tokenizer: bool = False) -> int:
        with runlock.hold(self.run_dir):
            pending = [(t, s) for t, s in self.log.tickets().items() if s.pending]
            if not pending:
                print(f"no interrupted withdrawal in {self.log.path}")
                return EXIT_OK
            rc = EXIT_OK
            for t, s in pending:
                self._verify()
                rc = max(rc, self._apply(t, s.docs or [], retrain_tokenizer))
            return rc

    # ---- step 1: fingerprints and "before" figures ---------------------------------------------
    def _prepare(self, t: str, docs: list[dict[str, Any]], loc: Location) -> None:
        """Everything verification and the notes need later, saved before any artifact changes."""
        self.records.mkdir(parents=True, exist_ok=True)
        ids = {d["id"]: k for k, d in enumerate(docs)}
        texts: dict[str, str] = {}
        for row in iter_dataset_rows(self.run_dir / pipeline.MIXED_RAW, columns=["id", "text"]):
            if row["id"] in ids:
                texts[row["id"]] = row["text"]
        arrays: dict[str, np.ndarray] = {}
        lens: dict[str, int] = {}
        tok = self.tokenizer()
        for d in docs:
            k = ids[d["id"]]
            arrays[f"w{k}"], arrays[f"wn{k}"] = word_grams(texts[d["id"]], self.wc.ngram)
            if tok is not None:
                from ..tokenizer.io import encode_docs

                flat, ln = encode_docs(tok, [texts[d["id"]]])
                lens[d["id"]] = int(ln[0])  # tokens + EOT, as packed
                arrays[f"t{k}"], arrays[f"tn{k}"] = token_grams(flat[:-1], self.wc.token_ngram)
        with atomic_writer(self.records / f"{t}.npz") as fh:  # temp file + rename, never through a link
            np.savez(fh, **arrays)
        in_dedup = []
        dedup_dir = self.run_dir / pipeline.MIXED_DEDUP
        if read_manifest(dedup_dir) is not None:
            in_dedup = [r["id"] for r in iter_dataset_rows(dedup_dir, columns=["id"]) if r["id"] in ids]
        # where the smoke train read them, from the step ledger, while the packed data it trained on is there
        from ..train.blame import training_summary  # torch only when a withdrawal gets this far

        training = training_summary(self.run_dir, [d["id"] for d in docs])
        write_json_atomic(self.records / f"{t}.before.json", {
            "figures": figures(self.run_dir), "location": loc.to_json(), "packed_lengths": lens,
            "in_dedup": in_dedup, "training": training})

    def tokenizer(self):  # type: ignore[no-untyped-def]
        path = self.run_dir / TOKENIZER / "tokenizer.json"
        if read_manifest(self.run_dir / TOKENIZER) is None or not path.is_file():
            return None
        from ..tokenizer.io import load_tokenizer

        return load_tokenizer(path)

    # ---- step 2-4 ------------------------------------------------------------------------------
    def _apply(self, t: str, docs: list[dict[str, Any]], retrain_tokenizer: bool) -> int:
        before = json.loads((self.records / f"{t}.before.json").read_text(encoding="utf-8"))
        loc = before["location"]
        ids = {d["id"] for d in docs}
        bases = bases_of(ids)
        # artifacts and reports name the ticket, never the ids: those live only in the audit trail
        # (ticket log, withdrawals/, release note), which verification does not count as a trace. No
        # timestamp either: reports count toward the fingerprint, which must not depend on the clock.
        entry = {"ticket": t, "summary": f"{len(ids)} document(s) withdrawn (see the release note)"}
        decision = self._retrain_decision(t, loc[TOKENIZER])
        ctx = EditContext(t, ids, bases, entry, docs, decision, before)
        results: dict[str, dict[str, Any]] = {}
        rebuilt: tuple[str, ...] = ()
        editable = [s for s in pipeline.STAGES if s.remove_ids]
        for spec in editable:  # each stage's own hook, in run order (an artifact's inputs are edited first)
            if spec.artifact in rebuilt:
                continue
            if spec.artifact == TOKENIZER and decision["retrain_required"] and retrain_tokenizer:
                rebuilt = self._retrain(t)
                decision["retrained"] = True
                continue
            ed = self.edit(spec.artifact, t)
            got = ed.begin()  # None: this artifact already lists the ticket (a resumed run)
            results[spec.artifact] = pipeline.hook(spec)(self, ctx, ed, *got) if got else ed.recorded()
        # decided from where the documents were before, so a resumed run decides the same way
        blocks_changed = decision["retrained"] or bool(loc["packed_blocks"])
        smoke = self._smoke_train(t, entry, blocks_changed)
        # `report.py blame` answers quote documents and describe the old packed data: query results, not
        # artifacts, so they go (rerun the query) rather than being edited
        if (self.report_dir / "blame").is_dir():
            shutil.rmtree(self.report_dir / "blame")
            log.warning("withdraw %s: removed %s (report.py blame results of the data before the withdrawal)", t,
                        self.report_dir / "blame")
        for spec in editable:
            if read_manifest(self.run_dir / spec.artifact) is not None:
                publish_reports(self.run_dir / spec.artifact, self.report_dir, spec.reports)

        fp = np.load(self.records / f"{t}.npz")
        prints = [{"words": fp[f"w{k}"], "word_n": int(fp[f"wn{k}"]),
                   "tokens": fp[f"t{k}"] if f"t{k}" in fp else None, "token_n": int(fp[f"tn{k}"]) if f"tn{k}" in fp else 0}
                  for k in range(len(docs))]
        # after a retrain the token ids changed: the packed blocks are decoded and scanned for words instead
        tok = self.tokenizer() if decision["retrained"] else None
        result = verify(self.run_dir, self.report_dir, docs, prints, self.wc.containment, decoded_with=tok,
                        exclude={self.log.path.resolve()})
        state = self.log.tickets()[t]
        shards = {a: r.get("shards", []) for a, r in results.items() if r.get("shards")}
        record = {"ticket": t, "selectors": [s.to_json() for s in state.selectors], "who": state.who,
                  "why": state.why, "accepted": state.when, "applied": now_utc(), "docs": docs, "location": loc,
                  "before": before["figures"], "after": figures(self.run_dir), "shards": shards,
                  "repack": results.get(PACKED, {}).get("repack", {}), TOKENIZER: decision, SMOKE_TRAIN: smoke,
                  "training": before.get("training"), "verification": result}
        write_json_atomic(self.records / f"{t}.json", record)
        out = self.report_dir / "withdrawals"
        write_json_atomic(out / f"{t}.json", record)
        write_text_atomic(out / f"{t}.md", impact_markdown(record))
        write_text_atomic(self.report_dir / "release_note.md", release_note(self._all_records()))
        self._summary()
        self.log.append({"event": "applied", "ticket": t, "when": record["applied"],
                         "verification": "pass" if result["pass"] else f"{len(result['traces'])} trace(s)"})
        print(impact_markdown(record, brief=True))
        return EXIT_OK if result["pass"] else EXIT_TRACES

    def _retrain_decision(self, t: str, tk: dict[str, Any]) -> dict[str, Any]:
        """Cumulative: every training document withdrawn since the tokenizer was trained counts
        (many small requests add up), against the size of the sample it was trained on."""
        man = read_manifest(self.run_dir / TOKENIZER) or {"counters": {}, "withdrawals": []}
        earlier = sum(w.get("train_docs_withdrawn", 0) for w in man.get("withdrawals", []) if w["ticket"] != t)
        trained_on = man["counters"].get("train_docs") or tk["train_total"]
        total = earlier + len(tk["train"])
        share = total / trained_on if trained_on else 0.0
        return {"train_docs_withdrawn": len(tk["train"]), "train_docs_withdrawn_total": total, "train_docs": trained_on,
                "heldout_docs_withdrawn": len(tk["heldout"]), "share": round(share, 6),
                "threshold": self.wc.retrain_share, "retrain_required": share >= self.wc.retrain_share,
                "retrained": False}

    def _all_records(self) -> list[dict[str, Any]]:
        recs = []
        for p in sorted(self.records.glob("wd-*.json")):
            if not p.name.endswith(".before.json"):
                recs.append(json.loads(p.read_text(encoding="utf-8")))
        return sorted(recs, key=lambda r: (r["accepted"], r["ticket"]))

    def _summary(self) -> None:
        from ..summary import main as summary_main

        args = [self.config_path] + [x for o in self.overrides for x in ("--set", o)]
        summary_main(args)

    # ---- per artifact --------------------------------------------------------------------------
    def edit(self, art: str, t: str) -> ArtifactEdit:
        return ArtifactEdit(self.run_dir, art, t, on_swap=crash_point)

    def commit(self, ed: ArtifactEdit, man: dict[str, Any], tmp: Path, entry: dict[str, Any],
               counters: dict[str, Any], input_updates: dict[str, str], result: dict[str, Any] | None = None) -> None:
        """``ed.commit`` with this run's clock and ticket log (the input a first withdrawal adds)."""
        ed.commit(man, tmp, entry, counters, input_updates, result, new_input_path=self.log.path, when=now_utc())

    def fingerprint(self, art: str) -> str:
        man = read_manifest(self.run_dir / art)
        assert man is not None, art
        return man.fingerprint

    def deletion_log_fingerprint(self) -> str:
        """The ticket log's fingerprint: mixed_raw's new input (stage 1 excludes what the log withdrew)."""
        fp = self.log.fingerprint()
        assert fp is not None  # a ticket was accepted before any artifact is edited
        return fp

    def present(self, art: str, ids: set[str]) -> set[str]:
        """Which of ``ids`` are rows of ``art`` now (a document may already be gone: an overlapping
        ticket, a rebuild that honoured the log): counters move by what is really removed."""
        return {i for i in read_columns(self.run_dir / art, ["id"])["id"] if i in ids}

    def _retrain(self, t: str) -> tuple[str, ...]:
        """Retrain the tokenizer and re-pack everything (asked for with --retrain-tokenizer); returns the
        artifacts it rebuilt."""
        from ..packing.stage import run_pack
        from ..tokenizer.stage import run_tokenizer

        log.warning("withdraw %s: retraining the tokenizer and re-packing every shard (--retrain-tokenizer)", t)
        plan = self.plan
        run_tokenizer(plan.config(TOKENIZER, quiet=False), plan.upstream_hashes(TOKENIZER),
                      self.command, force=True)
        run_pack(plan.config(PACKED, quiet=False), plan.upstream_hashes(PACKED), self.command, force=True)
        return TOKENIZER, PACKED

    def _smoke_train(self, t: str, entry: dict[str, Any], blocks_changed: bool) -> str:
        art = self.run_dir / SMOKE_TRAIN
        for stray in self.run_dir.glob(f"{SMOKE_TRAIN}.withdrawn-*"):
            if not live_suffix(stray.name, ".withdrawn-"):  # never another live process's
                shutil.rmtree(stray, ignore_errors=True)
        man = read_manifest(art)
        if man is None:
            return "absent (removed, or never run)"
        if blocks_changed:
            gone = art.with_name(f"{SMOKE_TRAIN}.withdrawn-{os.getpid()}")
            os.rename(art, gone)  # one atomic step: never a half-deleted artifact that still has a manifest
            shutil.rmtree(gone)
            for name in pipeline.stage(SMOKE_TRAIN).reports:
                (self.report_dir / name).unlink(missing_ok=True)
            log.warning("withdraw %s: removed %s: its model was trained on withdrawn tokens; rerun stage 5 "
                        "(`bash run_pipeline.sh --from smoke_train`)", t, art)
            return "removed (trained on withdrawn tokens; rerun stage 5)"
        ed = self.edit(SMOKE_TRAIN, t)
        got = ed.begin()
        if got is None:
            return "unchanged"
        man, tmp = got
        copy_artifact(art, tmp, set())
        self.commit(ed, man, tmp, entry, {},
                     {PACKED: self.fingerprint(PACKED), TOKENIZER: self.fingerprint(TOKENIZER)})
        return "kept (no packed block held a withdrawn token)"


def figures(run_dir: Path) -> dict[str, Any]:
    """The figures a release note compares before/after, read from manifests and reports."""
    out: dict[str, Any] = {}
    raw = read_manifest(run_dir / pipeline.MIXED_RAW)
    if raw:
        mix = json.loads((run_dir / pipeline.MIXED_RAW / pipeline.report("source_mix.json")).read_text())
        out[pipeline.MIXED_RAW] = {"docs": raw["counters"]["docs"], "tokens": mix["totals"]["tokens"],
                            "share_tokens": {r["source"]: r["share_tokens"] for r in mix["sources"]},
                            "max_abs_deviation_pp": mix["totals"]["max_abs_deviation_pp"]}
    dd = read_manifest(run_dir / pipeline.MIXED_DEDUP)
    if dd:
        out[pipeline.MIXED_DEDUP] = {"docs": dd["counters"]["docs_out"]}
    tk = read_manifest(run_dir / TOKENIZER)
    if tk:
        out[TOKENIZER] = {"vocab_size": tk["counters"].get("vocab_size"), "sha256": next(
            (f["sha256"] for f in tk["outputs"]["files"] if f["path"] == "tokenizer.json"), None)}
    pk = read_manifest(run_dir / PACKED)
    if pk:
        c = pk["counters"]
        out[PACKED] = {k: c.get(k) for k in ("docs", "blocks", "tokens_produced", "tokens_in_blocks",
                                               "packing_efficiency", "dropped_tail_tokens", "pad_tokens")}
        rep = json.loads((run_dir / PACKED / pipeline.report("packing_report.json")).read_text())
        out[PACKED]["token_share"] = {s: v["token_share"] for s, v in rep["per_source"].items()}
        out[PACKED]["shards"] = {f["path"]: f["sha256"] for f in pk["outputs"]["files"] if f["path"].endswith(".arrow")}
    out[SMOKE_TRAIN] = read_manifest(run_dir / SMOKE_TRAIN) is not None
    return out
