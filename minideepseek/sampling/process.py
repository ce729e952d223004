"""RawDoc -> Document row or Reject: validation, format-aware extraction, hashing.

Pure functions over batches, so a process pool (and later a Ray executor) can run them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from ..config import ConfigError
from ..extract import FORMATS, ExtractConfig, extract_text
from ..filters import ChainOutcome, DocContext, FilterChain
from ..records import RawDoc, Reject, check_text, doc_id, own_doc_id, snippet, text_hash, validate_text


@dataclass(frozen=True)
class ProcessSettings:
    source: str
    min_chars: int
    max_chars: int
    extract: ExtractConfig
    filters: tuple[dict[str, Any], ...] = ()
    lang: str = ""
    signals: str = "none"  # sampler.signals: none | first_drop | full


@functools.lru_cache(maxsize=16)
def _chain(source: str, specs_json: str) -> FilterChain:
    """One chain per (source, specs) per process: filters may load models (fastText) once."""
    return FilterChain(tuple(json.loads(specs_json)), f"sources.{source}")


def process_one(raw: RawDoc, s: ProcessSettings) -> dict | Reject:
    def reject(reason: str, detail: str, text: str | None = None) -> Reject:
        return Reject(source=s.source, source_id=raw.source_id, url=raw.url, reason=reason, detail=detail,
                      snippet=snippet(text if text is not None else raw.text, raw.raw_bytes),
                      file=raw.file, line=raw.line, offset=raw.offset)

    if raw.error:
        reason, _, detail = raw.error.partition(":")
        return reject(reason.strip(), detail.strip())
    if raw.text is None:
        return reject("missing_text", "record has no text")
    if not raw.checked:  # sources that do not validate at ingestion (demo): the same policy here
        bad = validate_text(raw.text)
        if bad:
            return reject(*bad)
    if len(raw.text) > 10 * s.max_chars:  # do not spend extraction time on absurd records
        return reject("too_long", f"raw record of {len(raw.text):,} chars > 10 x max_chars")
    if raw.fmt not in FORMATS:  # a config/source bug, not a bad record
        raise ConfigError(f"source {s.source}: unknown format {raw.fmt!r}; valid formats: {', '.join(FORMATS)}")
    try:
        text = extract_text(raw.text, raw.fmt, s.extract)
    except Exception as exc:  # noqa: BLE001 - any extractor crash on one page is that page's reject
        return reject("extract_failed", f"{type(exc).__name__}: {exc}"[:300])
    reason, detail = check_text(text, s.min_chars, s.max_chars)
    if reason:
        return reject(reason, detail, text)
    signals: dict[str, Any] = {"raw_chars": len(raw.text), "extract_ratio": round(len(text) / max(1, len(raw.text)), 4)}
    trace = [f"source:{s.source}:{raw.meta.get('component', '') or raw.fmt}", f"extract:{raw.fmt}"]
    did = own_doc_id(s.source, raw.source_id) if raw.own_id else doc_id(s.source, raw.source_id)
    mods: dict[str, int] = {}
    lang, lang_score = raw.lang or s.lang or None, None
    store: dict[str, Any] | None = None
    if s.signals != "none" and not s.filters:
        store = store_row(raw, did, ChainOutcome(text=text, keep=True), s)
    if s.filters:
        chain = _chain(s.source, json.dumps(s.filters, sort_keys=True))
        out = chain(text, DocContext(url=raw.url, source=s.source, expected_lang=s.lang), full=s.signals == "full")
        if s.signals != "none":
            store = store_row(raw, did, out, s)
        if not out.keep:
            return Reject(source=s.source, source_id=raw.source_id, url=raw.url, reason=out.reason,
                          detail=json.dumps(out.signals, sort_keys=True, default=str)[:500],
                          snippet=snippet(out.text), kind="filtered", filter=out.filter, id=did,
                          file=raw.file, line=raw.line, offset=raw.offset, store=store)
        text, mods = out.text, out.counts
        signals.update(out.signals)
        if "lang" in out.signals:
            lang, lang_score = out.signals["lang"], out.signals.get("lang_score")
        trace.append("filters:" + ",".join(chain.names))
        if out.modified_by:
            trace.append("modified:" + ",".join(out.modified_by))
        reason, detail = check_text(text, s.min_chars, s.max_chars)
        if reason:
            rej = reject(reason, f"after filters: {detail}", text)
            rej.store = store
            return rej
    return {
        "id": did,
        "source": s.source,
        "text": text,
        "url": raw.url,
        "license": raw.license,
        "lang": lang,
        "lang_score": lang_score,
        "n_chars": len(text),
        "n_tokens": 0,  # filled by the sampler's token counter
        "hash": text_hash(text),
        "quality_signals": json.dumps(signals, sort_keys=True, default=str),
        "stage": "mix_sampler",
        "audit_trace": trace,
        "_mods": mods,  # modifier counts for the filter report; not stored
        **({"_store": store} if store is not None else {}),  # the signal-store row; not stored in the dataset
    }


def store_row(raw: RawDoc, did: str, out: Any, s: ProcessSettings) -> dict[str, Any]:
    """The signal store's row of one document the chain evaluated (sampling/signals.py completes it with
    its token count). ``post_check``: what the length checks after the filters say of the chain's final
    text, so a document the new parameters would keep is known to pass them too."""
    post, _ = check_text(out.text, s.min_chars, s.max_chars)
    row: dict[str, Any] = {
        "id": did, "source_id": str(raw.source_id), "url": raw.url or "", "file": raw.file or "",
        "line": raw.line, "offset": raw.offset, "chain_keep": out.keep, "filter": out.filter, "reason": out.reason,
        "verdicts": list(out.verdicts), "signals": json.dumps({**out.signals, **out.measured}, sort_keys=True,
                                                              default=str),
        "post_check": post or "", "n_chars": len(out.text), "n_tokens": None,
    }
    if not out.keep and s.signals == "full":
        row["_text"] = out.text  # for the token count of a document a looser rule would keep; then dropped
    return row


def process_batch(args: tuple[list[RawDoc], ProcessSettings]) -> list[dict | Reject]:
    raws, settings = args
    return [_guarded(r, settings) for r in raws]


def _guarded(raw: RawDoc, s: ProcessSettings) -> dict | Reject:
    """``process_one``, with any exception on this one record (a filter or hash tripping over a hostile
    text) turned into its ``bad_record`` reject, with its origin: one record never stops the stage.
    Config errors still stop it (they are no record's fault)."""
    try:
        return process_one(raw, s)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001
        return Reject(source=s.source, source_id=str(raw.source_id), url=str(raw.url), reason="bad_record",
                      detail=f"{type(exc).__name__}: {exc}"[:300], snippet="", file=raw.file, line=raw.line,
                      offset=raw.offset)
