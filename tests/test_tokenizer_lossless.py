"""Round-trip property of the default (lossless) tokenizer, the component split, transformers parity."""

import random
import sysconfig
from pathlib import Path

import pytest

from minideepseek.tokenizer.build import new_tokenizer, new_trainer
from minideepseek.tokenizer.config import TokenizerConfig
from minideepseek.tokenizer.evaluate import normalizer_changes, show_bytes
from minideepseek.tokenizer.sample import component_of, stratified_split
from tests.realtext import real_texts

STDLIB = Path(sysconfig.get_paths()["stdlib"])
# code points the generator draws from: every plane's assigned ranges that matter in practice plus the
# tricky ones (combining marks, CJK punctuation / full-width forms, emoji with ZWJ and variation
# selectors, controls, private use, plane 2 ideographs, noncharacters)
_RANGES = [(0x00, 0x7F), (0x80, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
           (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x20D0, 0x20FF), (0x2100, 0x2BFF),
           (0x3000, 0x303F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xE000, 0xE0FF), (0xF900, 0xFAFF),
           (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0xFFF0, 0xFFFF), (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF),
           (0x20000, 0x2A6DF), (0xE0000, 0xE007F), (0xF0000, 0xF00FF), (0x10FF00, 0x10FFFF)]
_SPECIAL = ["\u200d", "\ufe0f", "\u0301", "\r\n", "\t", "\x00", "\x1b[31m", "\u2028", "ﬁ", "，", "。", "（", "）",
            "  ", "<|endoftext|>", "123456", "e\u0301", "\U0001F469\u200d\U0001F4BB"]


def random_unicode(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        if rng.random() < 0.15:
            out.append(rng.choice(_SPECIAL))
            continue
        lo, hi = rng.choice(_RANGES)
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:  # surrogates are not valid Unicode scalar values
            cp = 0xFFFD
        out.append(chr(cp))
    return "".join(out)


@pytest.fixture(scope="module")
def tok():
    code = [p.read_text(encoding="utf-8") for p in sorted(STDLIB.glob("*.py"))[:40]]
    texts = code + [t for texts in real_texts().values() for t in texts]
    cfg = TokenizerConfig(vocab_size=4000)  # the defaults: normalizer none, DeepSeek-V3 pre-split
    t = new_tokenizer(cfg)
    t.train_from_iterator(texts, trainer=new_trainer(cfg))
    return t


@pytest.mark.stage
def test_round_trip_random_unicode(tok):
    rng = random.Random(20261203)
    unk = tok.token_to_id("<|unk|>")
    for _ in range(400):
        s = random_unicode(rng, rng.randint(0, 80))
        ids = tok.encode(s, add_special_tokens=False).ids
        assert unk not in ids
        assert tok.decode(ids, skip_special_tokens=False) == s, ascii(s)
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c % 97 == 0)
    assert tok.decode(tok.encode(everything).ids) == everything


@pytest.mark.stage
def test_round_trip_real_text_every_domain(tok):
    for domain, texts in real_texts().items():
        for t in texts:
            assert tok.decode(tok.encode(t, add_special_tokens=False).ids) == t, domain


def test_normalizer_changes_counts_rewrites():
    held = {"wanjuan_zh": ["天下大势，分久必合（三国）", "无标点"], "the_stack_v2": ["x = 1"]}
    assert normalizer_changes(held, "none") == {}
    ch = normalizer_changes(held, "nfkc")
    zh = ch["wanjuan_zh"]
    assert zh["chars_changed"] == 3 and zh["docs_changed"] == 1 and zh["chars"] == 16
    assert {(r["from"], r["to"]) for r in zh["top_rewrites"]} == {(repr("，"), repr(",")), (repr("（"), repr("(")),
                                                                  (repr("）"), repr(")"))}
    assert ch["the_stack_v2"]["chars_changed"] == 0
    # NFC composes a base letter and its combining accent: counted as the 2 characters it rewrites
    assert normalizer_changes({"s": ["cafe\u0301"]}, "nfc")["s"]["chars_changed"] == 2


def test_show_bytes():
    assert show_bytes("中".encode()[:2]) == repr(b"\xe4\xb8")
    assert show_bytes(" \u4e2d\n".encode()) == "' 中\\n'"


def test_component_of():
    assert component_of("source:arxiv:rcran_zoo", "deb://r-cran-zoo/x") == "rcran_zoo"
    assert component_of("source:web:html", "https://Docs.Python.org/3/a.html") == "docs.python.org"
    assert component_of("source:loc:text", "file:///d/a.jsonl#L5") == component_of("", "file:///d/a.jsonl#L9")
    assert component_of("", "") == ""


def test_component_split_holds_out_whole_components():
    cfg = TokenizerConfig(heldout_min_docs=2, component_heldout_fraction=0.25)
    comps = [f"c{i % 8}" for i in range(400)] + ["only"] * 50
    sources = ["a"] * 400 + ["b"] * 50
    chars = [100] * 450
    splits, stats = stratified_split(cfg, 3, sources, chars, comps)
    a = splits["a"]
    held = set(a.components_heldout)
    assert 1 <= len(held) <= 2  # 25% of 8 equal components
    assert {comps[i] for i in a.heldout_component} == held
    assert not {comps[i] for i in a.train + a.heldout} & held
    assert len(a.heldout_component) == 50 * len(held) == stats["a"]["heldout_component_docs"]
    assert a.heldout and not set(a.heldout) & set(a.train)
    assert splits["b"].components_heldout == [], "a single-component source has no component split"
    assert stratified_split(cfg, 3, sources, chars, comps)[0]["a"].components_heldout == a.components_heldout
    # too-big components: the smallest one is held out rather than none
    big = stratified_split(TokenizerConfig(component_heldout_fraction=0.01), 1, ["s"] * 30,
                           [100] * 30, ["x"] * 20 + ["y"] * 10)[0]["s"]
    assert big.components_heldout == ["y"]


@pytest.mark.stage
def test_transformers_gives_the_same_ids(tok, tmp_path):
    transformers = pytest.importorskip("transformers")
    from minideepseek.tokenizer.stage import hf_config_files

    tok.save(str(tmp_path / "tokenizer.json"))
    hf_config_files(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    rng = random.Random(7)
    texts = [t for ts in real_texts().values() for t in ts] + [random_unicode(rng, 60) for _ in range(50)]
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        assert hf(t, add_special_tokens=False)["input_ids"] == ids
        assert hf.decode(ids) == t
    assert hf.eos_token_id == 0 and hf.pad_token_id == 1
