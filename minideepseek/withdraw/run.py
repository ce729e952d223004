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

from ..arrow_io import iter_dataset_rows, read_columns
from ..config import ConfigError
from ..crossdedup.index import INDEX_DIR, INDEX_FILES, filter_index
from ..packing.config import PackStageConfig
from ..runconfig import load_stage_config
from ..stage import (
    MANIFEST,
    artifact_fingerprint,
    list_files,
    publish_reports,
    read_manifest,
    restore_interrupted_swap,
    swap_into_place,
    write_json_atomic,
    write_text_atomic,
)
from .config import WithdrawStageConfig
from .locate import Location, iter_batches, locate, resolve, shard_paths
from .notes import impact_markdown, release_note
from .refresh import (
    bases_of,
    packed_stats,
    refresh_mixed_dedup,
    refresh_mixed_raw,
    refresh_packed,
    refresh_tokenizer,
)
from .rewrite import copy_artifact, filter_dataset, filter_jsonl, repack_shards
from .tickets import Selector, TicketLog, now_utc, ticket_id
from .verify import token_grams, verify, word_grams

log = logging.getLogger(__name__)

ARTIFACTS = ("mixed_raw", "mixed_dedup", "tokenizer", "packed", "smoke_train")
REPORTS = {
    "mixed_raw": ("source_mix.json", "source_mix.md", "filter_report.json", "filter_report.md"),
    "mixed_dedup": ("dedup_report.json", "dedup_report.md", "contamination_report.json", "contamination_report.md",
                    "data_profile.json", "data_profile.md"),
    "tokenizer": ("tokenizer_eval.json", "tokenizer_eval.md"),
    "packed": ("packing_report.json", "packing_report.md"),
}
SMOKE_REPORTS = ("smoke_train.json", "smoke_train.md", "smoke_train_loss.png")
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
        self.log = TicketLog(cfg.run.deletion_log_path)
        self.records = self.run_dir / "withdrawals"

    # ---- entry points -------------------------------------------------------------------------
    def request(self, selectors: list[Selector], who: str, why: str, retrain_tokenizer: bool = False,
                dry_run: bool = False) -> int:
        if not selectors:
            raise ConfigError("name what to withdraw: --id, --url, --hash, --text or --source (repeatable)")
        refuse_by_source(self.run_dir)
        for art in ARTIFACTS:
            restore_interrupted_swap(self.run_dir / art)
        t = ticket_id(selectors)
        state = self.log.tickets().get(t)
        if state is not None and state.applied is not None:
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
                              f"`python withdraw.py --resume` first, then repeat this request. Nothing changed.")
        docs = resolve(self.run_dir, selectors, t, self.wc.duplicates)
        if not docs:
            self.log.append({"event": "not_found", "ticket": t, "selectors": [s.to_json() for s in selectors],
                             "who": who, "why": why, "when": now_utc()})
            what = ", ".join(f"--{s.kind} {s.value!r}" for s in selectors)
            print(f"no document in {self.run_dir / 'mixed_raw'} matches {what}; nothing changed "
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
        refuse_by_source(self.run_dir)
        pending = [(t, s) for t, s in self.log.tickets().items() if s.pending]
        if not pending:
            print(f"no interrupted withdrawal in {self.log.path}")
            return EXIT_OK
        rc = EXIT_OK
        for t, s in pending:
            for art in ARTIFACTS:
                restore_interrupted_swap(self.run_dir / art)
            rc = max(rc, self._apply(t, s.docs or [], retrain_tokenizer))
        return rc

    # ---- step 1: fingerprints and "before" figures ---------------------------------------------
    def _prepare(self, t: str, docs: list[dict[str, Any]], loc: Location) -> None:
        """Everything verification and the notes need later, saved before any artifact changes."""
        self.records.mkdir(parents=True, exist_ok=True)
        ids = {d["id"]: k for k, d in enumerate(docs)}
        texts: dict[str, str] = {}
        for row in iter_dataset_rows(self.run_dir / "mixed_raw", columns=["id", "text"]):
            if row["id"] in ids:
                texts[row["id"]] = row["text"]
        arrays: dict[str, np.ndarray] = {}
        lens: dict[str, int] = {}
        tok = self._tokenizer()
        for d in docs:
            k = ids[d["id"]]
            arrays[f"w{k}"], arrays[f"wn{k}"] = word_grams(texts[d["id"]], self.wc.ngram)
            if tok is not None:
                from ..packing.packer import encode_docs

                flat, ln = encode_docs(tok, [texts[d["id"]]])
                lens[d["id"]] = int(ln[0])  # tokens + EOT, as packed
                arrays[f"t{k}"], arrays[f"tn{k}"] = token_grams(flat[:-1], self.wc.token_ngram)
        tmp = self.records / f".{t}.npz.tmp-{os.getpid()}.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, self.records / f"{t}.npz")
        in_dedup = []
        if read_manifest(self.run_dir / "mixed_dedup") is not None:
            in_dedup = [r["id"] for r in iter_dataset_rows(self.run_dir / "mixed_dedup", columns=["id"]) if r["id"] in ids]
        write_json_atomic(self.records / f"{t}.before.json", {
            "figures": figures(self.run_dir), "location": loc.to_json(), "packed_lengths": lens,
            "in_dedup": in_dedup})

    def _tokenizer(self):  # type: ignore[no-untyped-def]
        path = self.run_dir / "tokenizer" / "tokenizer.json"
        if read_manifest(self.run_dir / "tokenizer") is None or not path.is_file():
            return None
        from ..packing.packer import load_tokenizer

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
        decision = self._retrain_decision(t, loc["tokenizer"])
        results: dict[str, dict[str, Any]] = {}
        results["mixed_raw"] = self._mixed_raw(t, ids, bases, entry, docs)
        results["mixed_dedup"] = self._mixed_dedup(t, ids, bases, entry)
        if decision["retrain_required"] and retrain_tokenizer:
            self._retrain(t)
            decision["retrained"] = True
        else:
            results["tokenizer"] = self._tokenizer_sample(t, ids, bases, entry, decision)
            results["packed"] = self._packed(t, ids, bases, entry, before)
        # decided from where the documents were before, so a resumed run decides the same way
        blocks_changed = decision["retrained"] or bool(loc["packed_blocks"])
        smoke = self._smoke_train(t, entry, blocks_changed)
        for art, names in REPORTS.items():
            if read_manifest(self.run_dir / art) is not None:
                publish_reports(self.run_dir / art, self.report_dir, names)

        fp = np.load(self.records / f"{t}.npz")
        prints = [{"words": fp[f"w{k}"], "word_n": int(fp[f"wn{k}"]),
                   "tokens": fp[f"t{k}"] if f"t{k}" in fp else None, "token_n": int(fp[f"tn{k}"]) if f"tn{k}" in fp else 0}
                  for k in range(len(docs))]
        # after a retrain the token ids changed: the packed blocks are decoded and scanned for words instead
        tok = self._tokenizer() if decision["retrained"] else None
        result = verify(self.run_dir, self.report_dir, docs, prints, self.wc.containment, decoded_with=tok,
                        exclude={self.log.path.resolve()})
        state = self.log.tickets()[t]
        shards = {a: r.get("shards", []) for a, r in results.items() if r.get("shards")}
        record = {"ticket": t, "selectors": [s.to_json() for s in state.selectors], "who": state.who,
                  "why": state.why, "accepted": state.when, "applied": now_utc(), "docs": docs, "location": loc,
                  "before": before["figures"], "after": figures(self.run_dir), "shards": shards,
                  "repack": results.get("packed", {}).get("repack", {}), "tokenizer": decision, "smoke_train": smoke,
                  "verification": result}
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
        man = read_manifest(self.run_dir / "tokenizer") or {"counters": {}, "withdrawals": []}
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
    def _done(self, art: str, t: str) -> dict[str, Any]:
        """What an earlier (interrupted) run of ticket ``t`` recorded for ``art``, or {}."""
        man = read_manifest(self.run_dir / art) or {}
        return next((w.get("result", {}) for w in man.get("withdrawals", []) if w["ticket"] == t), {})

    def _begin(self, art: str, t: str) -> tuple[dict[str, Any], Path] | None:
        """(old manifest, tmp dir) when ``art`` exists and does not list the ticket yet."""
        final = self.run_dir / art
        man = read_manifest(final)
        if man is None or any(w["ticket"] == t for w in man.get("withdrawals", [])):
            return None
        for stray in self.run_dir.glob(f"{art}.tmp-*"):
            shutil.rmtree(stray, ignore_errors=True)
        tmp = self.run_dir / f"{art}.tmp-{os.getpid()}"
        tmp.mkdir()
        return man, tmp

    def _commit(self, art: str, man: dict[str, Any], tmp: Path, entry: dict[str, Any],
                counters: dict[str, Any], input_updates: dict[str, str], result: dict[str, Any] | None = None) -> None:
        """Manifest of the rewritten ``art`` (chained to its inputs' new fingerprints) + atomic swap. The
        manifest's withdrawal entry keeps ``result`` (shard checksums, re-pack figures), so a resumed
        run can still report what this step did."""
        volatile = tuple(f["path"] for f in man["outputs"]["files"] if f.get("volatile"))
        files = list_files(tmp, volatile)
        inputs = [{**i, "fingerprint": input_updates.get(i["name"], i["fingerprint"])} for i in man["inputs"]]
        for name, fp in input_updates.items():
            if name not in {i["name"] for i in inputs}:
                inputs.append({"name": name, "path": str(self.log.path), "fingerprint": fp, "detail": {}})
        new = {**man, "inputs": inputs, "outputs": {"files": files, "total_bytes": sum(f["bytes"] for f in files)},
               "fingerprint": artifact_fingerprint(man["config_hash"], [i["fingerprint"] for i in inputs], files),
               "counters": {**man["counters"], **counters},
               "withdrawals": [*man.get("withdrawals", []), {**entry, "when": now_utc(), "result": result or {}}]}
        write_json_atomic(tmp / MANIFEST, new)
        crash_point(f"{art}:before_swap")
        swap_into_place(tmp, self.run_dir / art)
        crash_point(f"{art}:after_swap")
        log.info("withdraw %s: %s rewritten", entry["ticket"], self.run_dir / art)

    def _fp(self, art: str) -> str:
        man = read_manifest(self.run_dir / art)
        assert man is not None, art
        return man["fingerprint"]

    def _present(self, art: str, ids: set[str]) -> set[str]:
        """Which of ``ids`` are rows of ``art`` now (a document may already be gone: an overlapping
        ticket, a rebuild that honoured the log): counters move by what is really removed."""
        return {i for i in read_columns(self.run_dir / art, ["id"])["id"] if i in ids}

    def _mixed_raw(self, t: str, ids: set[str], bases: set[str], entry: dict[str, Any],
                   docs: list[dict[str, Any]]) -> dict[str, Any]:
        got = self._begin("mixed_raw", t)
        if got is None:
            return self._done("mixed_raw", t)
        man, tmp = got
        present = self._present("mixed_raw", ids)
        shards = filter_dataset(self.run_dir / "mixed_raw", tmp, ids)  # reports linked, then replaced by refresh
        refresh_mixed_raw(tmp, bases, entry)
        per = json.loads(json.dumps(man["counters"]["per_source"]))
        for d in docs:
            c = per.get(d["source"])
            if c is None or d["id"] not in present:
                continue
            c["docs"] -= 1
            c["tokens"] -= d["n_tokens"]
            c["chars"] -= d["n_chars"]
            ep = f"epoch_{d['id'].rsplit('#e', 1)[1] if '#e' in d['id'] else 1}"
            if ep in c:
                c[ep] -= 1
        fp = self.log.fingerprint()
        assert fp is not None
        from ..sampling.stage import DELETION_INPUT

        result = {"shards": shards, "rows_removed": len(present)}
        self._commit("mixed_raw", man, tmp, entry, {"docs": man["counters"]["docs"] - len(present), "per_source": per},
                     {DELETION_INPUT: fp}, result)
        return result

    def _mixed_dedup(self, t: str, ids: set[str], bases: set[str], entry: dict[str, Any]) -> dict[str, Any]:
        got = self._begin("mixed_dedup", t)
        if got is None:
            return self._done("mixed_dedup", t)
        man, tmp = got
        # the two JSONL files are rewritten in place (open "w"): never a hard link to the old artifact's
        own = {"removed.jsonl", "contamination_hits.jsonl", *INDEX_FILES}  # rewritten here, never linked
        shards = filter_dataset(self.run_dir / "mixed_dedup", tmp, ids, skip=own)
        src = self.run_dir / "mixed_dedup"
        filter_index(src / INDEX_DIR, tmp / INDEX_DIR, ids)  # the dedup index lists kept documents too
        filter_jsonl(src / "removed.jsonl", tmp / "removed.jsonl", ids, ("id", "kept", "original"))
        filter_jsonl(src / "contamination_hits.jsonl", tmp / "contamination_hits.jsonl", ids, ("doc_id",))
        refresh_mixed_dedup(tmp, self.run_dir / "mixed_raw", bases, entry)
        rep = json.loads((tmp / "dedup_report.json").read_text())
        removed = rep["removed"]
        result = {"shards": shards}
        self._commit("mixed_dedup", man, tmp, entry,
                     {"docs_in": rep["docs_in"], "docs_out": rep["docs_out"], "removed": removed,
                      "exact_removed": removed.get("exact", 0), "near_removed": removed.get("near", 0),
                      "contamination_hits": len((tmp / "contamination_hits.jsonl").read_text().splitlines())},
                     {"mixed_raw": self._fp("mixed_raw")}, result)
        return result

    def _tokenizer_sample(self, t: str, ids: set[str], bases: set[str], entry: dict[str, Any],
                          decision: dict[str, Any]) -> dict[str, Any]:
        got = self._begin("tokenizer", t)
        if got is None:
            return self._done("tokenizer", t)
        man, tmp = got
        src = self.run_dir / "tokenizer"
        copy_artifact(src, tmp, {"sample.json"})
        sample = json.loads((src / "sample.json").read_text(encoding="utf-8"))
        for split in sample.values():
            split["train"] = [d for d in split["train"] if d not in ids]
            split["heldout"] = [d for d in split["heldout"] if d not in ids]
        write_json_atomic(tmp / "sample.json", sample)
        verdict = ("kept although a retrain is REQUIRED (`bash run_pipeline.sh --from train_tokenizer --force`)"
                   if decision["retrain_required"] else "kept")
        entry_t = {**entry, "train_docs_withdrawn": decision["train_docs_withdrawn"], "summary": entry["summary"] + (
            f"; {decision['train_docs_withdrawn']} training documents withdrawn, {decision['train_docs_withdrawn_total']} "
            f"of {decision['train_docs']:,} since training ({100 * decision['share']:.3f}%, threshold "
            f"{100 * decision['threshold']:.1f}%): vocabulary {verdict}; {decision['heldout_docs_withdrawn']} held-out "
            "documents (evaluation figures are from before the withdrawal)")}
        refresh_tokenizer(tmp, bases, entry_t)
        self._commit("tokenizer", man, tmp, entry_t,
                     {"withdrawn_from_training_sample": decision["train_docs_withdrawn_total"]},
                     {"mixed_dedup": self._fp("mixed_dedup")})
        return {}

    def _packed(self, t: str, ids: set[str], bases: set[str], entry: dict[str, Any],
                before: dict[str, Any]) -> dict[str, Any]:
        got = self._begin("packed", t)
        if got is None:
            return self._done("packed", t)
        man, tmp = got
        src = self.run_dir / "packed"
        old = json.loads((src / "packing_report.json").read_text(encoding="utf-8"))
        in_block: dict[str, int] = {}  # withdrawn doc -> its tokens inside blocks (the rest was the dropped tail)
        for path in shard_paths(src):
            for b in iter_batches(path, ["doc_ids", "starts", "ends"]):
                for docs, s, e in zip(b.column("doc_ids").to_pylist(), b.column("starts").to_pylist(),
                                      b.column("ends").to_pylist()):
                    for d, lo, hi in zip(docs, s, e):
                        if d in ids:
                            in_block[d] = in_block.get(d, 0) + hi - lo
        shards, info = repack_shards(src, tmp, ids, old["seq_len"], skip=set(REPORTS["packed"]))
        # withdrawn documents that produced tokens in this artifact: in its blocks or its dropped tail
        tail = set(old["tail_docs"]["dropped_entirely"]) | set(old["tail_docs"]["truncated"])
        gone = set(in_block) | (tail & ids)
        lens = {d: before["packed_lengths"][d] for d in gone}
        st = packed_stats(tmp, old, ids, lens, in_block, {d: n - 1 for d, n in lens.items()})
        pcfg = load_stage_config(PackStageConfig, self.config_path, self.overrides, quiet=True)
        weights = {s["name"]: float(s["weight"]) for s in
                   (read_manifest(self.run_dir / "mixed_raw") or {}).get("config", {}).get("sources", [])}
        summary = (f"; {info['touched_blocks']} block(s) touched, {info['removed_tokens']:,} tokens removed, "
                   f"{info['moved_tokens']:,} tokens of other documents re-packed into {info['new_blocks']} "
                   f"block(s) ({info['pad_tokens']:,} pad tokens)")
        rep = refresh_packed(tmp, old, st, pcfg.pack, weights, self._tokenizer(), self.cfg.run.seed, bases,
                             {**entry, "summary": entry["summary"] + summary})
        counters = {k: rep[k] for k in ("docs", "blocks", "seq_len", "tokens_produced", "tokens_in_blocks",
                                        "packing_efficiency", "dropped_tail_tokens", "pad_tokens", "eot")}
        counters["shards"] = len(st.shards)
        result = {"shards": shards, "repack": info}
        self._commit("packed", man, tmp, entry, counters,
                     {"mixed_dedup": self._fp("mixed_dedup"), "tokenizer": self._fp("tokenizer")}, result)
        return result

    def _retrain(self, t: str) -> None:
        """Retrain the tokenizer and re-pack everything (asked for with --retrain-tokenizer)."""
        from ..packing.config import PackStageConfig
        from ..packing.stage import run_pack, upstream_hashes
        from ..runconfig import load_stage_config
        from ..tokenizer.config import TokenizerStageConfig
        from ..tokenizer.stage import run_tokenizer, upstream_hash

        log.warning("withdraw %s: retraining the tokenizer and re-packing every shard (--retrain-tokenizer)", t)
        tcfg = load_stage_config(TokenizerStageConfig, self.config_path, self.overrides)
        run_tokenizer(tcfg, upstream_hash(self.config_path, self.overrides), self.config_path, force=True)
        pcfg = load_stage_config(PackStageConfig, self.config_path, self.overrides)
        run_pack(pcfg, upstream_hashes(self.config_path, self.overrides), self.config_path, force=True)

    def _smoke_train(self, t: str, entry: dict[str, Any], blocks_changed: bool) -> str:
        art = self.run_dir / "smoke_train"
        for stray in self.run_dir.glob("smoke_train.withdrawn-*"):
            shutil.rmtree(stray, ignore_errors=True)
        man = read_manifest(art)
        if man is None:
            return "absent (removed, or never run)"
        if blocks_changed:
            gone = art.with_name(f"smoke_train.withdrawn-{os.getpid()}")
            os.rename(art, gone)  # one atomic step: never a half-deleted artifact that still has a manifest
            shutil.rmtree(gone)
            for name in SMOKE_REPORTS:
                (self.report_dir / name).unlink(missing_ok=True)
            log.warning("withdraw %s: removed %s: its model was trained on withdrawn tokens; rerun stage 5 "
                        "(`bash run_pipeline.sh --from smoke_train`)", t, art)
            return "removed (trained on withdrawn tokens; rerun stage 5)"
        got = self._begin("smoke_train", t)
        if got is None:
            return "unchanged"
        man, tmp = got
        copy_artifact(art, tmp, set())
        self._commit("smoke_train", man, tmp, entry, {},
                     {"packed": self._fp("packed"), "tokenizer": self._fp("tokenizer")})
        return "kept (no packed block held a withdrawn token)"


def refuse_by_source(run_dir: Path) -> None:
    """The block re-pack appends re-packed blocks after the last one, which would break the
    per-source block ranges of ``pack.by_source`` data: refuse instead of writing a wrong layout."""
    if "by_source" in (read_manifest(run_dir / "packed") or {}):
        raise ConfigError(f"{run_dir / 'packed'} was packed with pack.by_source=true, which withdraw.py does not "
                          f"support yet; rerun pack_shuffle.py after removing the documents upstream, or pack "
                          f"with pack.by_source=false")


def figures(run_dir: Path) -> dict[str, Any]:
    """The figures a release note compares before/after, read from manifests and reports."""
    out: dict[str, Any] = {}
    raw = read_manifest(run_dir / "mixed_raw")
    if raw:
        mix = json.loads((run_dir / "mixed_raw" / "source_mix.json").read_text())
        out["mixed_raw"] = {"docs": raw["counters"]["docs"], "tokens": mix["totals"]["tokens"],
                            "share_tokens": {r["source"]: r["share_tokens"] for r in mix["sources"]},
                            "max_abs_deviation_pp": mix["totals"]["max_abs_deviation_pp"]}
    dd = read_manifest(run_dir / "mixed_dedup")
    if dd:
        out["mixed_dedup"] = {"docs": dd["counters"]["docs_out"]}
    tk = read_manifest(run_dir / "tokenizer")
    if tk:
        out["tokenizer"] = {"vocab_size": tk["counters"].get("vocab_size"), "sha256": next(
            (f["sha256"] for f in tk["outputs"]["files"] if f["path"] == "tokenizer.json"), None)}
    pk = read_manifest(run_dir / "packed")
    if pk:
        c = pk["counters"]
        out["packed"] = {k: c.get(k) for k in ("docs", "blocks", "tokens_produced", "tokens_in_blocks",
                                               "packing_efficiency", "dropped_tail_tokens", "pad_tokens")}
        rep = json.loads((run_dir / "packed" / "packing_report.json").read_text())
        out["packed"]["token_share"] = {s: v["token_share"] for s, v in rep["per_source"].items()}
        out["packed"]["shards"] = {f["path"]: f["sha256"] for f in pk["outputs"]["files"] if f["path"].endswith(".arrow")}
    out["smoke_train"] = read_manifest(run_dir / "smoke_train") is not None
    return out
