"""Build the (untrained) tokenizer pipeline: [normalizer] -> pre-tokenizer -> BPE, ByteLevel decoder.

Byte-level throughout: the 256 byte symbols are the initial alphabet, so every string encodes without
``<|unk|>`` and, with ``normalizer: none`` (the default), ``decode(encode(x)) == x`` byte for byte.
"""

from __future__ import annotations

import unicodedata

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from ..fastbpe import DEEPSEEK_SPLITS
from .config import SPECIAL_TOKENS, TokenizerConfig

_NORMALIZERS = {"nfc": normalizers.NFC, "nfkc": normalizers.NFKC}


def normalize(text: str, name: str) -> str:
    """What the configured normalizer does to ``text`` (the identity for "none")."""
    return text if name == "none" else unicodedata.normalize(name.upper(), text)


def new_tokenizer(cfg: TokenizerConfig) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<|unk|>"))
    if cfg.normalizer != "none":
        tok.normalizer = _NORMALIZERS[cfg.normalizer]()
    if cfg.pre_tokenizer == "deepseek":
        splits = [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in DEEPSEEK_SPLITS]
        tok.pre_tokenizer = pre_tokenizers.Sequence([*splits, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                       use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def new_trainer(cfg: TokenizerConfig) -> trainers.BpeTrainer:
    return trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )


