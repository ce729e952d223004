"""Editing a stage's artifact in place (a withdrawal): what every stage's ``remove.py`` shares.

A withdrawal (``withdraw/``) decides what goes and in which order; each stage package removes the
documents from its own artifact and refreshes its own reports (``<package>/remove.py``, named by the
registry's ``StageSpec.remove_ids``). They share this floor: the ticket's context, what they may ask of
the withdrawal driving them (:class:`EditHost`), rewriting a dataset or JSONL file without some ids
(untouched files hard-linked, so they stay byte-identical and the checksums prove it), and the report
conventions (entries naming a withdrawn id are dropped; every report gains a ``withdrawals`` section).
Every function writes into a new artifact directory; the caller swaps it into place atomically.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from .arrow_io import _file_sha256, shard_paths
from .artifact import MANIFEST, artifact_fingerprint, list_files, live_suffix, read_manifest, swap_into_place
from .fsio import write_json_atomic, write_text_atomic
from .records import base_id

ID_TOKEN = re.compile(r"[\w.\-]+/[0-9a-f]{16}(?:~\d+)?")  # a document id (``~k``: a reused source id)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditContext:
    """One ticket's removal, as every artifact's hook needs it."""

    ticket: str
    ids: set[str]  # withdrawn documents (upsampled copies included)
    bases: set[str]  # their base ids (the copy suffix ``#e<k>`` dropped)
    entry: dict[str, Any]  # the manifest/report entry: names the ticket, never the ids
    docs: list[dict[str, Any]]  # the resolution recorded when the ticket was accepted
    decision: dict[str, Any]  # the tokenizer retrain decision
    before: dict[str, Any]  # figures and token lengths saved before any artifact changed


class EditHost(Protocol):
    """What a stage's removal may ask of the withdrawal that drives it (``withdraw.run.Withdrawal``)."""

    run_dir: Path
    cfg: Any  # the withdrawal's config (``run.seed``)
    plan: Any  # ``pipeline.Plan``: every stage's config

    def present(self, artifact: str, ids: set[str]) -> set[str]: ...

    def fingerprint(self, artifact: str) -> str: ...

    def deletion_log_fingerprint(self) -> str: ...

    def tokenizer(self) -> Any: ...

    def commit(self, ed: ArtifactEdit, man: dict[str, Any], tmp: Path, entry: dict[str, Any],
               counters: dict[str, Any], input_updates: dict[str, str], result: dict[str, Any] | None = None) -> None: ...


def link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def copy_artifact(src: Path, dst: Path, skip: set[str]) -> None:
    """Link every file of ``src`` into ``dst`` except ``skip`` (relative paths) and the manifest."""
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src).as_posix()
        if p.is_file() and rel not in skip and rel != MANIFEST:
            link_or_copy(p, dst / rel)


def write_state(ds_dir: Path, names: list[str]) -> None:
    """state.json the way arrow_io.DatasetWriter writes it (fingerprint derived from the shards)."""
    import hashlib

    digest = hashlib.sha256()
    for name in names:
        digest.update(_file_sha256(ds_dir / name).encode())
    state = json.loads((ds_dir / "state.json").read_text()) if (ds_dir / "state.json").is_file() else {}
    state.update({"_data_files": [{"filename": n} for n in names], "_fingerprint": digest.hexdigest()[:16]})
    tmp = ds_dir / ".state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, ds_dir / "state.json")


def shard_record(name: str, before: Path, after: Path, rows_before: int, rows_after: int) -> dict[str, Any]:
    sb, sa = _file_sha256(before), _file_sha256(after)
    return {"file": name, "rows_before": rows_before, "rows_after": rows_after, "sha256_before": sb,
            "sha256_after": sa, "changed": sb != sa}


def filter_dataset(src: Path, dst: Path, drop: set[str], skip: set[str] = frozenset()) -> list[dict[str, Any]]:
    """Copy a documents dataset without the rows whose ``id`` is in ``drop``; shards holding none of
    them are linked unchanged. ``skip`` names other files the caller rewrites itself."""
    shards = shard_paths(src)
    names = [p.name for p in shards]
    copy_artifact(src, dst, skip | set(names) | {"state.json"})
    shutil.copyfile(src / "state.json", dst / "state.json")
    out = []
    drop_arr = pa.array(sorted(drop), pa.string())
    for path in shards:
        with pa.memory_map(str(path)) as mm:
            reader = pa.ipc.open_stream(mm)
            schema = reader.schema
            batches = list(reader)
            masks = [pa.compute.is_in(b.column("id"), value_set=drop_arr) for b in batches]
            n_drop = sum(pa.compute.sum(m).as_py() or 0 for m in masks)
            rows = sum(b.num_rows for b in batches)
            if n_drop == 0:
                link_or_copy(path, dst / path.name)
            else:
                with pa.OSFile(str(dst / path.name), "wb") as sink, pa.ipc.new_stream(sink, schema) as w:
                    for b, m in zip(batches, masks):
                        kept = b.filter(pa.compute.invert(m))
                        if kept.num_rows:
                            w.write_batch(kept)
        out.append(shard_record(path.name, path, dst / path.name, rows, rows - n_drop))
    write_state(dst, names)
    return out


def filter_jsonl(src: Path, dst: Path, drop: set[str], keys: tuple[str, ...]) -> int:
    """Copy a JSONL file without the lines whose ``keys`` name a dropped id; return lines removed."""
    removed = 0
    with src.open(encoding="utf-8") as fin, dst.open("w", encoding="utf-8") as fout:
        for line in fin:
            rec = json.loads(line)
            if any(rec.get(k) in drop for k in keys):
                removed += 1
                continue
            fout.write(line)
    return removed


# ---- reports

def redact(obj: Any, bases: set[str]) -> tuple[Any, int]:
    """Drop list entries (and dict keys) that name a withdrawn id; blank strings that do."""
    def names(x: Any) -> bool:
        return any(t in bases for t in ID_TOKEN.findall(json.dumps(x, ensure_ascii=False)))

    n = 0

    def walk(x: Any) -> Any:
        nonlocal n
        if isinstance(x, list):
            keep = []
            for e in x:
                if names(e):
                    n += 1
                else:
                    keep.append(walk(e))
            return keep
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if any(t in bases for t in ID_TOKEN.findall(str(k))):
                    n += 1
                    continue
                out[k] = walk(v)
            return out
        if isinstance(x, str) and names(x):
            n += 1
            return "[withdrawn]"
        return x

    return walk(obj), n


def load_report(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def note_withdrawal(report: dict[str, Any], entry: dict[str, Any], redacted: int) -> None:
    report.setdefault("withdrawals", []).append({**entry, "report_entries_redacted": redacted})


def save_report(tmp: Path, name: str, report: dict[str, Any], markdown: Any) -> None:
    write_json_atomic(tmp / f"{name}.json", report)
    text = markdown(report)
    w = report.get("withdrawals")
    if w:
        text += "\n## Withdrawals\n\n" + "\n".join(
            f"- ticket `{x['ticket']}`: {x['summary']}; {x['report_entries_redacted']} report entries "
            f"naming withdrawn ids removed" for x in w) + "\n"
    write_text_atomic(tmp / f"{name}.md", text)


def bases_of(ids: set[str]) -> set[str]:
    return {base_id(i) for i in ids}


class ArtifactEdit:
    """The contract's second mode: an edit of a committed artifact (a withdrawal removing documents),
    with the same guarantees as a build.

    The edited copy is written into ``<artifact>.tmp-<pid>``, its manifest last (chained to its inputs'
    new fingerprints, the edit appended to ``withdrawals``), then renamed into place; a kill at any
    point leaves the old or the new artifact, never a mix. An artifact whose manifest already lists
    the edit is done: a resumed edit skips it and reads back what the first run recorded.

    >>> ed = ArtifactEdit(run_dir, MIXED_RAW, ticket)
    >>> got = ed.begin()
    >>> if got is None: return ed.recorded()
    >>> man, tmp = got; ...write the edited files into tmp...; ed.commit(man, tmp, entry, counters, {...})
    """

    def __init__(self, run_dir: Path, artifact: str, key: str,
                 on_swap: Callable[[str], None] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.artifact = artifact
        self.final_dir = self.run_dir / artifact
        self.key = key  # the edit's id (a ticket), recorded in the manifest's withdrawals
        self.on_swap = on_swap  # called with "<artifact>:before_swap"/":after_swap" (fault injection in tests)

    def recorded(self) -> dict[str, Any]:
        """What an earlier (interrupted) run of this edit recorded for the artifact, or {}."""
        man = read_manifest(self.final_dir) or {}
        return next((w.get("result", {}) for w in man.get("withdrawals", []) if w["ticket"] == self.key), {})

    def begin(self) -> tuple[dict[str, Any], Path] | None:
        """(old manifest, tmp dir) when the artifact exists and does not list this edit yet."""
        man = read_manifest(self.final_dir)
        if man is None or any(w["ticket"] == self.key for w in man.get("withdrawals", [])):
            return None
        for stray in self.run_dir.glob(f"{self.artifact}.tmp-*"):
            if not live_suffix(stray.name, ".tmp-"):  # a live process's temp dir is never removed
                shutil.rmtree(stray, ignore_errors=True)
        tmp = self.run_dir / f"{self.artifact}.tmp-{os.getpid()}"
        tmp.mkdir()
        return man, tmp

    def commit(self, man: dict[str, Any], tmp: Path, entry: dict[str, Any], counters: dict[str, Any],
               input_updates: dict[str, str], result: dict[str, Any] | None = None,
               new_input_path: Path | None = None, when: str = "") -> None:
        """Manifest of the edited artifact + atomic swap. ``input_updates``: input name -> its new
        fingerprint (an input not listed before is added, at ``new_input_path``). The withdrawal entry
        keeps ``result`` (shard checksums, re-pack figures), so a resumed run can still report it."""
        volatile = tuple(f["path"] for f in man["outputs"]["files"] if f.get("volatile"))
        files = list_files(tmp, volatile)
        inputs = [{**i, "fingerprint": input_updates.get(i["name"], i["fingerprint"])} for i in man["inputs"]]
        for name, fp in input_updates.items():
            if name not in {i["name"] for i in inputs}:
                inputs.append({"name": name, "path": str(new_input_path), "fingerprint": fp, "detail": {}})
        new = {**man, "inputs": inputs, "outputs": {"files": files, "total_bytes": sum(f["bytes"] for f in files)},
               "fingerprint": artifact_fingerprint(man["config_hash"], [i["fingerprint"] for i in inputs], files),
               "counters": {**man["counters"], **counters},
               "withdrawals": [*man.get("withdrawals", []), {**entry, "when": when, "result": result or {}}]}
        write_json_atomic(tmp / MANIFEST, new)
        if self.on_swap:
            self.on_swap(f"{self.artifact}:before_swap")
        swap_into_place(tmp, self.final_dir)
        if self.on_swap:
            self.on_swap(f"{self.artifact}:after_swap")
        log.info("%s %s: %s rewritten", "withdraw", self.key, self.final_dir)
