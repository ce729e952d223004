"""Stage 3 config: a byte-level BPE trained on a stratified sample of ``mixed_dedup``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import require
from ..runconfig import RunConfig

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|unk|>")  # ids 0, 1, 2 — fixed
# Their ids, defined here once: packing, the loader and withdrawal read them from this module.
EOT_ID = 0  # <|endoftext|>: closes every document in the packed stream
PAD_ID = 1  # <|pad|>: fills a block tail; never a training target
UNK_ID = 2  # <|unk|>: unused by the byte-level model (every byte has a token); counted if seen
# Normalizers: "none" is lossless (decode(encode(x)) == x for every valid Unicode string); "nfc" and
# "nfkc" rewrite text (NFKC turns full-width Chinese punctuation into ASCII: `，` -> `,`), so the
# evaluation report then lists, per domain, the share of characters they change and the top rewrites.
LOSSLESS_NORMALIZERS = ("none",)


@dataclass(frozen=True)
class TokenizerConfig:
    EXEC_ONLY: ClassVar[tuple[str, ...]] = ("eval_reference",)

    vocab_size: int = 150_000  # the seed's 150K; DeepSeek-V3 itself uses ~128K (set 128_000)
    min_frequency: int = 2
    # true: a sample too small for vocab_size gives the vocabulary it can reach (every merge with frequency
    # >= min_frequency), said in the log and listed as an automatic sizing decision (sizing.py); false: a
    # smaller final vocabulary stops the stage (exit 2), as the demo config asks
    allow_smaller_vocab: bool = True
    normalizer: Literal["none", "nfc", "nfkc"] = "none"
    # "deepseek": DeepSeek-V3's pre-split (digits in runs of <= 3, CJK runs isolated, punctuation+letters)
    # then ByteLevel — it compresses every demo domain better on out-of-component held-out text (see
    # bench/compare_pretokenizers.py); "bytelevel": the seed's ByteLevel pre-tokenizer (GPT-2 regex inside).
    pre_tokenizer: Literal["bytelevel", "deepseek"] = "deepseek"
    sample_ratio: float = 1.0  # share of each source's non-held-out documents in the training sample
    min_chars_per_source: int = 500_000  # floor: top a small source's sample up to this (if it has it)
    # ceiling on the whole training sample (0 = none): above it every source's sample is cut to the same
    # share, the floor above still kept. BPE training time grows with the sample while the merges a
    # 150K vocabulary needs settle long before a 1B-token corpus is read (~30M characters reach 150K
    # on the demo), so the scale runs need not read the whole corpus through the trainer
    max_train_chars: int = 1_000_000_000
    heldout_fraction: float = 0.05  # per source, random documents never in the training sample
    heldout_min_docs: int = 10
    heldout_max_docs: int = 200
    # per source, whole corpus components (a demo package, a URL host, a local file) held out, never
    # trained on, up to this share of the source's characters: the honest test of unseen text
    component_heldout_fraction: float = 0.1
    eval_reference: bool = True  # compare with DeepSeek's and Qwen's tokenizers in the report
    # characters of each (held-out split, source) the evaluation encodes, 0 = all: a prefix of the split's
    # documents in dataset order (stage 1's seeded order). The component split is whole components, so
    # it grows with the corpus (at the 1B scale size the evaluation took more time than the BPE training);
    # a few million characters already fix tokens/char to the 3rd decimal. Held-out documents beyond the
    # cap are still never trained on. The demo's largest split is 2.2M characters: never capped there.
    eval_max_chars: int = 4_000_000

    def __post_init__(self) -> None:
        require(1_000 <= self.vocab_size <= 1_000_000, f"tokenizer.vocab_size={self.vocab_size}: must be within "
                f"1,000..1,000,000 (the seed's 150_000; DeepSeek-V3 uses ~128K)")
        require(self.min_frequency >= 1, "tokenizer.min_frequency must be >= 1")
        require(0.0 < self.sample_ratio <= 1.0, f"tokenizer.sample_ratio={self.sample_ratio} must be in (0, 1]; "
                f"the seed's every-10th-row is 0.1")
        require(0.0 <= self.heldout_fraction < 0.5, "tokenizer.heldout_fraction must be in [0, 0.5)")
        require(0.0 <= self.component_heldout_fraction < 0.5,
                "tokenizer.component_heldout_fraction must be in [0, 0.5) (0 turns the component split off)")
        require(0 <= self.heldout_min_docs <= self.heldout_max_docs, "tokenizer: need heldout_min_docs <= heldout_max_docs")
        require(self.min_chars_per_source >= 0, "tokenizer.min_chars_per_source must be >= 0")
        require(self.eval_max_chars >= 0, f"tokenizer.eval_max_chars={self.eval_max_chars}: use 0 (all) or a "
                "number of characters such as 4_000_000")
        require(self.max_train_chars == 0 or self.max_train_chars >= 1_000_000,
                f"tokenizer.max_train_chars={self.max_train_chars}: use 0 (no ceiling) or at least 1_000_000")


@dataclass(frozen=True)
class TokenizerStageConfig:
    run: RunConfig = field(default_factory=RunConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
