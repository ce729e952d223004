"""Reading our stage-3 tokenizer and encoding documents with it: what stage 4, withdrawal and the
benches share, defined next to the tokenizer that fixes its special ids."""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ..config import ConfigError
from ..fastbpe import fast_encoder
from ..invocation import venv_python
from .config import EOT_ID, SPECIAL_TOKENS

ENCODE_CHARS = 1 << 21  # characters per encode_batch_fast call (~0.5M tokens, ~55 MB of Encodings)
_EOT = (EOT_ID,)


def load_tokenizer(path: Path, num_threads: int = 0) -> Tokenizer:
    """Our stage-3 tokenizer, set up for packing.

    ``encode_special_tokens``: a document that literally contains "<|endoftext|>" (docs about LLMs
    do) would otherwise get id 0 in the middle, i.e. a forged document boundary; now the string is
    tokenized as text. ``num_threads`` sets RAYON_NUM_THREADS, which tokenizers' thread pool reads
    when it first starts: it has no effect if this process already encoded or trained in parallel."""
    if num_threads:
        os.environ["RAYON_NUM_THREADS"] = str(num_threads)
    if not path.is_file():
        raise ConfigError(f"tokenizer {path} not found; run `{venv_python()} train_tokenizer.py` first")
    tok = Tokenizer.from_file(str(path))
    for i, t in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(t) != i:
            raise ConfigError(f"{path}: special token {t} must have id {i}; retrain with train_tokenizer.py")
    tok.encode_special_tokens = True
    return tok


def encode_docs(tok: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of ``texts`` concatenated with one EOT after each, and each document's length
    (EOT included).

    ``encode_batch_fast`` still builds a full ``Encoding`` per document (token strings, offsets):
    ~110 bytes a token, measured, i.e. ~110 MB for the demo's first 256 documents. So the batch is
    encoded in slices of about ENCODE_CHARS characters, each turned into uint32 ids (4 bytes a token)
    and freed before the next: a batch of long documents cannot blow up memory. ``np.fromiter`` over
    the id lists runs at ~15M tokens/s here, 3% of the encoding time.

    When tiktoken reproduces ``tok``'s ids (``fastbpe.py``), it encodes instead."""
    fast = fast_encoder(tok)
    if fast is not None:
        return fast.encode_docs(texts)
    flats, lens = [], []
    for lo, hi in char_slices(texts):
        encs = tok.encode_batch_fast(texts[lo:hi], add_special_tokens=False)
        ln = np.fromiter((len(e) + 1 for e in encs), dtype=np.int64, count=len(encs))
        flats.append(np.fromiter(chain.from_iterable(chain(e.ids, _EOT) for e in encs), dtype=np.uint32,
                                 count=int(ln.sum())))
        lens.append(ln)
        del encs
    if not flats:
        return np.empty(0, np.uint32), np.empty(0, np.int64)
    if len(flats) == 1:
        return flats[0], lens[0]
    return np.concatenate(flats), np.concatenate(lens)


def char_slices(texts: list[str]) -> Iterator[tuple[int, int]]:
    """[lo, hi) ranges of ``texts`` holding about ENCODE_CHARS characters each (at least one text)."""
    lo, acc = 0, 0
    for i, t in enumerate(texts):
        acc += len(t)
        if acc >= ENCODE_CHARS:
            yield lo, i + 1
            lo, acc = i + 1, 0
    if lo < len(texts):
        yield lo, len(texts)
