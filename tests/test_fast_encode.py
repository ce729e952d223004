"""The fast encoder (tiktoken) gives exactly the HF tokenizer's ids, falls back to HF when it cannot
guarantee that, and its per-run check catches a difference. The whole demo corpus is checked by
``bench/check_fast_encode.py`` (minutes); here a tokenizer trained on real text is compared on a large
real sample (stdlib code and docstrings, LaTeX-bearing docs, Chinese prose) and on random Unicode."""

import random
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from minideepseek import fastbpe as fast_encode
from minideepseek.fastbpe import EncoderMismatch, compare_ids, encoder_summary, plan, use_encoder
from minideepseek.tokenizer.build import new_tokenizer, new_trainer
from minideepseek.tokenizer.config import TokenizerConfig
from minideepseek.tokenizer.io import encode_docs
from tests.realtext import real_texts
from tests.test_tokenizer_lossless import random_unicode

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _corpus() -> list[str]:
    code = [p.read_text(encoding="utf-8") for p in sorted(STDLIB.glob("*.py"))[:60]]
    return code + [t for texts in real_texts().values() for t in texts]


def _train(vocab: int = 4000, docs: int | None = None, **kw):  # type: ignore[no-untyped-def]
    cfg = TokenizerConfig(vocab_size=vocab, **kw)
    t = new_tokenizer(cfg)
    t.train_from_iterator(_corpus()[:docs], trainer=new_trainer(cfg))
    t.encode_special_tokens = True  # what packing.packer.load_tokenizer sets
    return t


@pytest.fixture(scope="module")
def tok():
    return _train()


def _tricky(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    # digits next to spaces and CJK, kana punctuation/marks (゠ ・ ゛ \u3099), unassigned code points
    # in the CJK ranges (\u3040), controls, private use: where the one-regex rewrite could differ
    extra = ["1 2", "12345 ", "中文123 ", "ア・イ", "゠゛゜\u3099\u3040\u3097", "\x01\x02 a", "\ue000\u200d",
             "  \n\n 7", "e\u0301\u0301", "<|endoftext|>", "x  中", "'s 's", " \u3000 "]
    out = []
    for _ in range(n):
        parts = [random_unicode(rng, rng.randint(0, 12)) if rng.random() < 0.5 else rng.choice(extra)
                 for _ in range(rng.randint(1, 8))]
        out.append("".join(parts))
    return out


@pytest.mark.stage
def test_ids_identical_on_real_and_random_text(tok):
    ranks, pattern, why = plan(tok)
    assert ranks is not None and why == ""
    big = [p.read_text(encoding="utf-8") for p in sorted(STDLIB.glob("*.py"))[60:160]]  # unseen in training
    r = compare_ids(tok, _corpus() + big + _tricky(10_000, 7))
    assert r["tokens"] > 1_000_000 and r["mismatched_docs"] == 0, r


@pytest.mark.stage
def test_bytelevel_pre_tokenizer_identical():
    t = _train(2000, 40, pre_tokenizer="bytelevel")
    r = compare_ids(t, _corpus()[:40] + _tricky(3_000, 8))
    assert r["mismatched_docs"] == 0, r


@pytest.mark.stage
def test_encode_docs_same_arrays_as_hf(tok):
    texts = _corpus()[:50] + ["", "a", "<|endoftext|> inside"]
    fast = fast_encode.fast_encoder(tok)
    assert fast is not None
    flat, lens = encode_docs(tok, texts)
    use_encoder(tok, "hf")
    try:
        assert fast_encode.fast_encoder(tok) is None
        hf_flat, hf_lens = encode_docs(tok, texts)
    finally:
        fast_encode._REGISTRY.pop(id(tok), None)
    assert flat.dtype == hf_flat.dtype == np.uint32
    assert np.array_equal(lens, hf_lens) and np.array_equal(flat, hf_flat)
    assert np.count_nonzero(flat == 0) == len(texts)  # one EOT per document, none inside
    s = encoder_summary(tok)  # the registry entry was dropped: a fresh tokenizer object state
    assert s["engine"] == "hf"


@pytest.mark.stage
def test_check_counts_and_catches_a_difference(tok):
    fast_encode._REGISTRY.pop(id(tok), None)
    fast = fast_encode.fast_encoder(tok)
    texts = _corpus()
    encode_docs(tok, texts)
    c = encoder_summary(tok)["check"]
    assert c["docs_encoded"] == len(texts) and 1 <= c["docs_checked"] < len(texts) and c["mismatches"] == 0
    assert c["chars_checked"] >= fast_encode.CHECK_SHARE * c["chars_encoded"] - max(map(len, texts))
    before = dict(encoder_summary(tok)["check"])
    huge = "word " * (fast_encode.CHECK_MAX_CHARS // 5 + 1)  # over the cap: never checked unless shortest
    encode_docs(tok, [huge, "short text"])
    after = encoder_summary(tok)["check"]
    assert after["docs_checked"] == before["docs_checked"] + 1
    assert after["chars_checked"] == before["chars_checked"] + len("short text")
    real = fast.enc.encode_to_numpy
    fast.enc.encode_to_numpy = lambda text: np.append(real(text), np.uint32(5))  # a wrong id at the end
    try:
        with pytest.raises(EncoderMismatch, match="pack.encoder: hf"):
            encode_docs(tok, texts[:3])
    finally:
        fast_encode._REGISTRY.pop(id(tok), None)


@pytest.mark.stage
def test_falls_back_when_ids_cannot_be_guaranteed():
    t = _train(1000, 10, normalizer="nfkc")
    e = use_encoder(t, "auto")
    assert e.engine == "hf" and "normalizer" in e.reason and fast_encode.fast_encoder(t) is None
    flat, lens = encode_docs(t, ["ｆｕｌｌ，width"])  # still encodes (HF), NFKC applied
    assert len(lens) == 1 and flat[-1] == 0
    t2 = _train(1000, 10)
    t2.encode_special_tokens = False
    assert plan(t2)[2].startswith("encode_special_tokens")


@pytest.mark.stage
def test_deepseek_token_counter_counts_exactly_what_hf_counts(monkeypatch):
    """Stages 1-2 count DeepSeek-V3 tokens with tiktoken: the reference tokenizer.json (empty normalizer
    sequence, its own spelling of the pre-split regexes, added tokens outside the vocabulary) passes
    ``plan``, and every count equals HF's, also for texts holding added-token text (counted by HF)."""
    from minideepseek.tokencount import COUNTER_ENV, TokenCounter

    fast = TokenCounter("deepseek")
    assert fast.engine == "tiktoken", fast.reason
    monkeypatch.setenv(COUNTER_ENV, "hf")
    hf = TokenCounter("deepseek")
    assert hf.engine == "hf" and hf.fast is None
    big = [p.read_text(encoding="utf-8") for p in sorted(STDLIB.glob("*.py"))[:80]]
    special = ["a <｜begin▁of▁sentence｜>b<｜end▁of▁sentence｜>", "x<｜place▁holder▁no▁7｜>y 12345"]
    texts = _corpus() + big + _tricky(3_000, 9) + special
    assert fast.count(texts) == hf.count(texts)
    assert fast.count(special) == [len(hf.tok.encode(t, add_special_tokens=False).ids) for t in special]
    c = fast.fast.counters
    assert c.docs_checked >= 1 and c.mismatches == 0 and c.docs_encoded == len(texts) - len(special)
