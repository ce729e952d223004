"""Deletion requests: selectors, tickets, the append-only ticket log, and the matcher stage 1 uses.

A request names documents by one or more *selectors* (``id``, ``url``, ``hash``, ``text`` fragment,
whole ``source``). Its ticket id is derived from the selectors alone, so the same request made twice
is the same ticket: the second time it is a logged no-op. The log
(``data/<run>/deletion_requests.jsonl`` unless ``run.deletion_log`` moves it) is append-only JSONL:

- ``accepted``: who/what/when/why plus the resolution (every document id withdrawn, with its source,
  normalized-text hash and why it was included); written before any artifact changes;
- ``applied``: the withdrawal finished and verification ran (its verdict is recorded);
- ``repeat`` / ``not_found``: audit lines for a repeated request and for one that matched nothing.

A ticket that is ``accepted`` but not ``applied`` was interrupted; rerunning the request (or
``withdraw.py --resume``) completes it from the recorded resolution.

Stage 1 reads the same log: every accepted ticket's selectors, ids and hashes are excluded at
ingestion, so a rebuild never brings a withdrawn document back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ConfigError
from .fsio import open_append_nofollow
from .invocation import venv_python
from .records import base_id, normalize_for_hash, own_part

log = logging.getLogger(__name__)

SELECTOR_KINDS = ("id", "url", "hash", "text", "source")
MIN_FRAGMENT_CHARS = 20  # a shorter fragment matches too much text to be a deletion request
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Selector:
    """One way to name documents. ``url`` ending in ``*`` is a prefix; ``text`` is compared after
    NFKC/casefold/whitespace normalization (the same as the document ``hash``)."""

    kind: str
    value: str

    def __post_init__(self) -> None:
        if self.kind != "text":  # ids, urls, hashes, sources: surrounding whitespace is never meant
            object.__setattr__(self, "value", self.value.strip())
        if self.kind not in SELECTOR_KINDS:
            raise ConfigError(f"selector kind {self.kind!r}: use one of {list(SELECTOR_KINDS)}")
        if not self.value.strip():
            raise ConfigError(f"--{self.kind} needs a non-empty value")
        if self.kind == "hash" and not _HEX64.fullmatch(self.value):
            raise ConfigError(f"--hash {self.value!r}: give the document's 64-hex `hash` field (sha256 of its "
                              f"normalized text; `{venv_python()} -m minideepseek.tickets hash FILE` computes it)")
        if self.kind == "text" and len(normalize_for_hash(self.value)) < MIN_FRAGMENT_CHARS:
            raise ConfigError(f"--text fragment {self.value!r} is shorter than {MIN_FRAGMENT_CHARS} characters after "
                              f"normalization; give a longer, distinctive passage")
        if self.kind == "url" and self.value.strip() == "*":
            raise ConfigError("--url '*' would match every document; use --source to withdraw a whole source")

    @property
    def canonical(self) -> str:
        value = normalize_for_hash(self.value) if self.kind == "text" else self.value.strip()
        return f"{self.kind}:{value}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value}


_TICKET = re.compile(r"wd-[0-9a-f]{12}")


def valid_ticket_id(value: object) -> bool:
    """The form ``ticket_id`` gives (``wd-`` + 12 hex digits): ids read back from the log name files."""
    return isinstance(value, str) and _TICKET.fullmatch(value) is not None


def ticket_id(selectors: Iterable[Selector]) -> str:
    """Same selectors (in any order) -> same ticket: that is what makes a repeated request a no-op."""
    canon = sorted({s.canonical for s in selectors})
    return "wd-" + hashlib.sha256("\n".join(canon).encode("utf-8")).hexdigest()[:12]


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class TicketState:
    ticket: str
    selectors: list[Selector]
    who: str = ""
    why: str = ""
    when: str = ""
    docs: list[dict[str, Any]] | None = None  # the resolution, once accepted
    applied: dict[str, Any] | None = None

    @property
    def pending(self) -> bool:
        return self.docs is not None and self.applied is None


class TicketLog:
    """The append-only ``deletion_requests.jsonl``. Each line is written with one ``write`` + fsync;
    a torn last line (a kill mid-write) is ignored with a warning and never counts as an event."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _check_not_link(self) -> None:
        if self.path.is_symlink():
            raise ConfigError(f"{self.path} is a symbolic link; the ticket log must be a regular file (a link could "
                              f"send its appends elsewhere): replace it with the file itself")

    def events(self) -> list[dict[str, Any]]:
        """Every event in log order. Each must be a JSON object whose ticket id has the ``wd-`` + 12 hex
        form (ids name files under withdrawals/): anything else stops with the line number."""
        self._check_not_link()
        if not self.path.is_file():
            return []
        out = []
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{self.path}: not UTF-8 (byte {exc.start:,}); the ticket log was damaged or edited: "
                              f"restore it from a backup") from None
        for k, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except (json.JSONDecodeError, RecursionError, ValueError):
                if k == len(lines) - 1:
                    log.warning("%s: ignoring a torn last line (a run was killed while writing it)", self.path)
                    continue
                raise ConfigError(f"{self.path}: line {k + 1} is not JSON; the ticket log is append-only, restore "
                                  f"it from a backup") from None
            if not isinstance(ev, dict) or not valid_ticket_id(ev.get("ticket")):
                raise ConfigError(f"{self.path}: line {k + 1} is not a ticket event (an object whose ticket is "
                                  f"'wd-' + 12 hex digits); the log was edited: restore it from a backup")
            out.append(ev)
        return out

    def append(self, event: dict[str, Any]) -> None:
        self._check_not_link()
        if not valid_ticket_id(event.get("ticket")):
            raise ConfigError(f"refusing to log an event with ticket id {event.get('ticket')!r}")
        line = json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n"
        with open_append_nofollow(self.path) as fh:
            end = fh.seek(0, os.SEEK_END)
            if end:
                with self.path.open("rb") as rd:  # a torn last line (kill mid-write) is cut off, not sealed:
                    data = rd.read()  # sealed, it would sit before good lines and make the log unreadable
                keep = data.rfind(b"\n") + 1
                if keep != len(data):
                    log.warning("%s: dropping a torn last line (%d bytes) before appending", self.path, len(data) - keep)
                    fh.truncate(keep)
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def tickets(self) -> dict[str, TicketState]:
        """Ticket id -> state, folded from the events in log order."""
        out: dict[str, TicketState] = {}
        for k, ev in enumerate(self.events()):
            t = ev["ticket"]
            if ev.get("event") == "accepted":
                try:
                    docs = ev["docs"]
                    if not isinstance(docs, list) or not all(isinstance(d, dict) and isinstance(d.get("id"), str)
                                                             and isinstance(d.get("hash"), str) for d in docs):
                        raise TypeError("docs")
                    out[t] = TicketState(t, [Selector(**s) for s in ev["selectors"]], str(ev.get("who", "")),
                                         str(ev.get("why", "")), str(ev.get("when", "")), docs=docs)
                except (KeyError, TypeError, AttributeError) as exc:
                    raise ConfigError(f"{self.path}: accepted event {k + 1} of ticket {t} is malformed ({exc}); "
                                      f"restore the log from a backup") from None
            elif ev.get("event") == "applied" and t in out:
                out[t].applied = ev
        return out

    def fingerprint(self) -> str | None:
        """Hash of what stage 1 must exclude (accepted tickets' selectors and resolved documents, in
        log order); None when no ticket was ever accepted. Audit-only lines do not change it."""
        states = self.tickets()
        if not states:
            return None
        blob = [[t, sorted(s.canonical for s in st.selectors), sorted((d["id"], d["hash"]) for d in st.docs or [])]
                for t, st in states.items()]
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


class Matcher:
    """Does a normalized document match any selector (or a resolved id/hash) of these tickets?"""

    def __init__(self, tickets: Iterable[tuple[str, list[Selector], list[dict[str, Any]]]]) -> None:
        self.ids: dict[str, str] = {}
        self.hashes: dict[str, str] = {}
        self.urls: dict[str, str] = {}
        self.url_prefixes: list[tuple[str, str]] = []
        self.texts: list[tuple[str, str]] = []
        self.sources: dict[str, str] = {}
        for t, selectors, docs in tickets:
            for s in selectors:
                if s.kind == "id":
                    self.ids.setdefault(s.value, t)
                elif s.kind == "hash":
                    self.hashes.setdefault(s.value, t)
                elif s.kind == "url" and s.value.endswith("*"):
                    self.url_prefixes.append((s.value[:-1], t))
                elif s.kind == "url":
                    self.urls.setdefault(s.value, t)
                elif s.kind == "text":
                    self.texts.append((normalize_for_hash(s.value), t))
                else:
                    self.sources.setdefault(s.value, t)
            for d in docs:
                self.ids.setdefault(d["id"], t)
                self.hashes.setdefault(d["hash"], t)

    def __bool__(self) -> bool:
        return bool(self.ids or self.hashes or self.urls or self.url_prefixes or self.texts or self.sources)

    def match(self, row: dict[str, Any]) -> tuple[str, str] | None:
        """(ticket, selector kind) of the first match, or None. ``row`` has the document schema."""
        if row["source"] in self.sources:
            return self.sources[row["source"]], "source"
        # a full id (my_docs/en-005), or the record's own id without the source prefix (en-005)
        for key in (row["id"], base_id(row["id"]), own_part(base_id(row["id"]))):
            if key in self.ids:
                return self.ids[key], "id"
        if row["hash"] in self.hashes:
            return self.hashes[row["hash"]], "hash"
        url = row.get("url") or ""
        if url in self.urls:
            return self.urls[url], "url"
        for prefix, t in self.url_prefixes:
            if url.startswith(prefix):
                return t, "url"
        if self.texts:
            norm = normalize_for_hash(row["text"])
            for frag, t in self.texts:
                if frag in norm:
                    return t, "text"
        return None


def log_matcher(path: Path) -> Matcher:
    states = TicketLog(path).tickets()
    return Matcher((t, st.selectors, st.docs or []) for t, st in states.items())


def _main(argv: list[str] | None = None) -> int:
    """``.venv/bin/python -m minideepseek.tickets hash FILE``: the ``hash`` a document with FILE's text has."""
    import sys

    from .records import text_hash

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "hash":
        print(_main.__doc__)
        return 2
    print(text_hash(Path(args[1]).read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
