"""The near-dup engine (minideepseek.dedup) against datasketch 2.0, element by element, plus the
shingling definitions, LSH banding and candidate pairs.

Real text: the demo corpus in the cache when it has been built (web, code, math, academic, zh);
otherwise stdlib sources and a few Chinese paragraphs, so the file stays offline and fast (< 5 s).
"""

from __future__ import annotations

import gzip
import importlib
import itertools
import json
import random
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH
from datasketch.hashfunc import sha1_hash32

from minideepseek.dedup import (
    MAX_HASH,
    band_keys,
    batch_shingle_hashes,
    candidate_pairs,
    datasketch_hashfunc,
    estimated_jaccard,
    exact_jaccard,
    lsh_params,
    normalize_text,
    permutations,
    s_curve,
    shingle_hashes,
    shingles,
    signatures,
    signatures_for_texts,
    words,
)
from minideepseek.demo_corpus import corpus_root, default_cache_dir

ZH_FALLBACK = [
    "数据去重是预训练数据处理中最重要的步骤之一。重复的网页会让模型记住模板，浪费训练算力，"
    "也会让评测结果虚高。常见的做法是先做精确去重，再用 MinHash LSH 做近似去重。",
    "北京是中华人民共和国的首都，也是全国的政治、文化、国际交往和科技创新中心。"
    "北京有着三千余年的建城史和八百六十余年的建都史。",
    "深度学习模型的训练需要大量高质量的数据。数据的多样性、清洁程度和去重效果，"
    "直接影响模型最终的能力。分词器的训练同样依赖于有代表性的语料样本。",
]


def _demo_docs(per_domain: int, max_chars: int) -> list[str]:
    cache = default_cache_dir()
    for tiers in (("portable", "debian"), ("portable",)):
        root = corpus_root(cache, tiers)
        files = sorted(root.glob("*.jsonl.gz"))
        if files:
            out = []
            for f in files:
                with gzip.open(f, "rt", encoding="utf-8") as fh:
                    for line in itertools.islice(fh, per_domain):
                        out.append(json.loads(line)["raw"][:max_chars])
            return out
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    srcs = sorted(stdlib.glob("*.py"))[: 4 * per_domain]
    return [p.read_text(encoding="utf-8", errors="replace")[:max_chars] for p in srcs] + ZH_FALLBACK


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return _demo_docs(per_domain=40, max_chars=1000)  # 200 documents from five domains


def _datasketch_sig(text: str, kind: str, n: int = 5, num_perm: int = 128, seed: int = 1,
                    hashfunc=None, per_shingle: bool = False) -> np.ndarray:
    """The seed's code: a MinHash fed every shingle (repeats included) as UTF-8 bytes."""
    m = MinHash(num_perm=num_perm, seed=seed) if hashfunc is None else MinHash(num_perm=num_perm, seed=seed,
                                                                               hashfunc=hashfunc)
    grams = [s.encode("utf-8") for s in shingles(text, kind, n)]
    if per_shingle:
        for g in grams:
            m.update(g)
    elif grams:
        m.update_batch(grams)
    return m.hashvalues


# ------------------------------------------------------------------------------------------------
# equivalence with datasketch


@pytest.mark.parametrize("num_perm,seed", [(128, 1), (64, 7), (256, 42), (16, 0)])
def test_permutations_equal_datasketch(num_perm: int, seed: int) -> None:
    a, b = permutations(num_perm, seed)
    da, db = MinHash(num_perm=num_perm, seed=seed).permutations
    assert a.dtype == np.uint32 and np.array_equal(a, da) and np.array_equal(b, db)


def test_sha1_signatures_identical_to_seed_code(docs: list[str]) -> None:
    """Default base hash: the seed's MinHash(num_perm=128) + update(shingle.encode()), no hashfunc given."""
    sigs = signatures_for_texts(docs, "char", 5, 128, 1)
    assert sigs.shape == (len(docs), 128) and sigs.dtype == np.uint32
    for i, text in enumerate(docs):
        assert np.array_equal(sigs[i], _datasketch_sig(text, "char")), f"doc {i}"
    few = [t[:300] for t in docs[::20]]  # update() one shingle at a time: literally the seed's loop
    for sig, text in zip(signatures_for_texts(few), few):
        assert np.array_equal(sig, _datasketch_sig(text, "char", per_shingle=True))


def test_sha1_word_signatures_identical(docs: list[str]) -> None:
    sigs = signatures_for_texts(docs, "word", 5, 128, 1)
    for i, text in enumerate(docs):
        assert np.array_equal(sigs[i], _datasketch_sig(text, "word")), f"doc {i}"


@pytest.mark.parametrize("kind", ["char", "word"])
def test_mix64_signatures_identical_given_its_hashfunc(docs: list[str], kind: str) -> None:
    """The fast base hash is exactly datasketch.MinHash(hashfunc=datasketch_hashfunc(kind, "mix64"))."""
    sub = docs[::2]
    sigs = signatures_for_texts(sub, kind, 5, 128, 1, base_hash="mix64")
    hf = datasketch_hashfunc(kind, "mix64")
    for i, text in enumerate(sub):
        assert np.array_equal(sigs[i], _datasketch_sig(text, kind, hashfunc=hf)), f"doc {i}"


@pytest.mark.parametrize("base_hash", ["sha1", "mix64"])
@pytest.mark.parametrize("kind", ["char", "word"])
def test_shingle_hashes_are_the_hashfunc_values(docs: list[str], kind: str, base_hash: str) -> None:
    hf = datasketch_hashfunc(kind, base_hash)  # type: ignore[arg-type]
    for text in docs[::10] + ["", "ab", "中文", "one two"]:
        got = shingle_hashes(text, kind, 5, base_hash)  # type: ignore[arg-type]
        want = np.unique(np.array([hf(s.encode()) for s in shingles(text, kind, 5)], dtype=np.uint32))
        assert got.dtype == np.uint32 and np.array_equal(got, want)


def test_other_num_perm_and_seed(docs: list[str]) -> None:
    sub = docs[::10]
    for num_perm, seed in [(64, 7), (200, 3)]:
        sigs = signatures_for_texts(sub, "char", 3, num_perm, seed, base_hash="mix64")
        hf = datasketch_hashfunc("char", "mix64")
        for i, text in enumerate(sub):
            assert np.array_equal(sigs[i], _datasketch_sig(text, "char", 3, num_perm, seed, hf))


def test_signatures_from_hash_arrays_any_order_and_repeats() -> None:
    rng = np.random.default_rng(0)
    sets = [rng.integers(0, 2**32, k, dtype=np.uint32) for k in (1, 5, 300, 0, 5_000)]
    shuffled = [np.concatenate([s[::-1], s[: len(s) // 2]]) for s in sets]
    sigs = signatures(sets)
    assert np.array_equal(sigs, signatures(shuffled))
    assert (sigs[3] == MAX_HASH).all()  # empty set = empty MinHash
    for i, s in enumerate(sets):
        m = MinHash(hashfunc=int)
        if len(s):
            m.update_batch(s.tolist())
        assert np.array_equal(sigs[i], m.hashvalues)


def test_chunk_boundaries_do_not_change_results(docs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Both vectorized loops work in chunks; documents straddling a chunk edge must not notice."""
    mh_mod = importlib.import_module("minideepseek.dedup.minhash")
    sh_mod = importlib.import_module("minideepseek.dedup.shingles")  # the package re-exports a function `shingles`

    sub = docs[::4]
    want = {bh: signatures_for_texts(sub, "char", 5, 64, 1, base_hash=bh) for bh in ("sha1", "mix64")}
    monkeypatch.setattr(mh_mod, "_CHUNK", 777)
    monkeypatch.setattr(sh_mod, "_CHUNK", 1001)
    for bh, sig in want.items():
        assert np.array_equal(signatures_for_texts(sub, "char", 5, 64, 1, base_hash=bh), sig)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# shingling definitions


def test_normalization() -> None:
    assert normalize_text("Ｈｅｌｌｏ\u3000 WORLD\n\t ﬁne  ") == "hello world fine"
    assert normalize_text("  \n\t ") == ""
    a = signatures_for_texts(["The  Quick\nBROWN fox jumps"])[0]
    b = signatures_for_texts(["the quick brown fox jumps"])[0]
    assert np.array_equal(a, b)


def test_short_and_empty_docs() -> None:
    assert shingles("abc", "char", 5) == ["abc"]
    assert shingles("abcde", "char", 5) == ["abcde"]
    assert shingles("abcdef", "char", 5) == ["abcde", "bcdef"]
    assert shingles("", "char", 5) == [] and shingles("   ", "word", 5) == []
    assert shingles("One two  THREE", "word", 5) == ["one two three"]
    assert np.array_equal(shingle_hashes("abc", "char", 5), [sha1_hash32(b"abc")])
    sig = signatures_for_texts(["", "abc"])
    assert (sig[0] == MAX_HASH).all()
    assert np.array_equal(sig[1], _datasketch_sig("abc", "char"))
    assert np.array_equal(signatures_for_texts(["abc"], base_hash="mix64")[0],
                          _datasketch_sig("abc", "char", hashfunc=datasketch_hashfunc("char", "mix64")))


@pytest.mark.parametrize("kind", ["char", "word"])
def test_mix64_flat_batch_with_short_and_empty_docs(docs: list[str], kind: str) -> None:
    """The flat mix64 path (repeats kept, windows straddling documents dropped) equals the per-document
    distinct path and datasketch, also when short (< n units) and empty documents sit between long ones."""
    batch = [docs[0], "", "ab c", docs[1], "x", docs[2][:7], "   ", docs[3], "一二三"]
    flat = signatures_for_texts(batch, kind, 5, 128, 1, base_hash="mix64")
    per_doc = signatures(batch_shingle_hashes(batch, kind, 5, "mix64"), 128, 1)
    assert np.array_equal(flat, per_doc)
    hf = datasketch_hashfunc(kind, "mix64")
    for i, text in enumerate(batch):
        assert np.array_equal(flat[i], _datasketch_sig(text, kind, hashfunc=hf)), f"doc {i}"
    assert np.array_equal(signatures_for_texts(batch[:1] + batch[3:4], kind, 5, 128, 1, "mix64"), flat[[0, 3]])


@pytest.mark.parametrize("kind", ["char", "word"])
@pytest.mark.parametrize("base_hash", ["mix64", "sha1"])
def test_batch_distinct_flat_is_each_documents_distinct_set(docs: list[str], kind: str, base_hash: str) -> None:
    """The flat form the signatures are computed from holds, document after document, exactly each
    document's distinct base hashes (neighbouring documents sharing hashes, repeats, short and empty
    documents at the start, middle and end)."""
    from minideepseek.dedup.shingles import batch_distinct_flat

    batch = ["", docs[0], docs[0], "ab c", "", docs[1] * 3, "x", "一二三", docs[2], "   "]
    flat, counts = batch_distinct_flat(batch, kind, 5, base_hash)
    per_doc = batch_shingle_hashes(batch, kind, 5, base_hash)
    assert counts.tolist() == [len(h) for h in per_doc] and len(flat) == counts.sum()
    ends = np.cumsum(counts)
    for i, h in enumerate(per_doc):
        assert np.array_equal(np.sort(flat[ends[i] - counts[i]:ends[i]]), np.sort(h)), f"doc {i}"


def test_cjk_characters_are_words() -> None:
    got = words(normalize_text("我爱Python编程。OK 3.14，好"))
    assert got == ["我", "爱", "python", "编", "程", "。", "ok", "3.14,", "好"]
    grams = shingles("数据去重很重要", "word", 5)
    assert grams == ["数 据 去 重 很", "据 去 重 很 重", "去 重 很 重 要"]
    assert words("한국어 문장") == ["한국어", "문장"]  # Hangul is space-delimited: ordinary words


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="kind"):
        shingle_hashes("x", "line", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n must be"):
        shingles("x", "char", 0)
    with pytest.raises(ValueError, match="base_hash"):
        signatures_for_texts(["x"], base_hash="md5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bands"):
        band_keys(np.zeros((2, 16), dtype=np.uint32), 5, 4)


# ------------------------------------------------------------------------------------------------
# LSH


def test_lsh_params_equal_datasketch() -> None:
    for t in np.round(np.arange(0.5, 0.91, 0.05), 2):
        lsh = MinHashLSH(threshold=float(t), num_perm=128)
        assert lsh_params(float(t), 128) == (lsh.b, lsh.r), t
    lsh = MinHashLSH(threshold=0.8, num_perm=64, weights=(0.3, 0.7))
    assert lsh_params(0.8, 64, 0.3, 0.7) == (lsh.b, lsh.r)


def test_s_curve() -> None:
    b, r = lsh_params(0.8, 128)
    js = np.linspace(0, 1, 101)
    p = s_curve(js, b, r)
    assert isinstance(p, np.ndarray) and np.all(np.diff(p) >= 0) and p[0] == 0.0 and p[-1] == 1.0
    assert s_curve(0.8, b, r) == pytest.approx(1 - (1 - 0.8**r) ** b)
    assert s_curve(0.7, 14, 8) == pytest.approx(1 - (1 - 0.7**8) ** 14)


def test_band_keys() -> None:
    rng = np.random.default_rng(1)
    sigs = rng.integers(0, 2**32, (50, 128), dtype=np.uint32)
    sigs[1] = sigs[0]
    sigs[2] = sigs[0]
    sigs[2, 3 * 8 + 5] ^= 1  # one value of band 3 differs
    keys = band_keys(sigs, 14, 8)
    assert keys.shape == (50, 14) and keys.dtype == np.uint64
    assert np.array_equal(keys[0], keys[1])
    assert [int(k) for k in np.flatnonzero(keys[0] != keys[2])] == [3]
    assert len(np.unique(keys[3:, 0])) == 47  # random bands do not collide
    assert np.array_equal(band_keys(sigs[:10], 14, 8), keys[:10])  # row-independent: streaming-safe


def _edit(text: str, rate: float, rng: random.Random) -> str:
    out = []
    for w in text.split():
        x = rng.random()
        if x < rate / 2:
            continue  # delete
        out.append(rng.choice(["lorem", "ipsum", "dolor", "amet"]) if x < rate else w)
    return " ".join(out)


def test_planted_near_duplicates_are_candidates() -> None:
    base = [t for t in _demo_docs(per_domain=30, max_chars=4000) if len(t.split()) >= 150][:60]
    rng = random.Random(0)
    light = [_edit(t, 0.01, rng) for t in base]  # ~3% of shingles touched: J ~0.95
    heavy = [_edit(t, 0.05, rng) for t in base]  # 5% of words substituted/deleted: J ~0.8-0.9
    corpus = base + light + heavy
    n = len(base)
    sigs = signatures_for_texts(corpus, "char", 5, 128, 1, base_hash="mix64")
    b, r = lsh_params(0.8, 128)
    pairs = {tuple(p) for p in candidate_pairs(band_keys(sigs, b, r)).tolist()}
    sets = [shingle_hashes(t, "char", 5, "mix64") for t in corpus]
    # light edits: exact Jaccard >= 0.93, where the S-curve gives >= 0.997 -> all found
    for i in range(n):
        assert exact_jaccard(sets[i], sets[n + i]) >= 0.93
        assert (i, n + i) in pairs
    # heavy edits: found at the rate the S-curve predicts from their exact Jaccard
    js = np.array([exact_jaccard(sets[i], sets[2 * n + i]) for i in range(n)])
    found = np.array([(i, 2 * n + i) in pairs for i in range(n)])
    assert abs(found.mean() - s_curve(js, b, r).mean()) < 0.2
    # unrelated documents: every candidate pair is a genuinely similar one
    for i, j in pairs:
        if i % n != j % n:
            assert exact_jaccard(sets[i], sets[j]) > 0.4, (i, j)
    # the signature estimate tracks the exact Jaccard
    est = estimated_jaccard(sigs[:n], sigs[2 * n:])
    assert np.abs(est - js).mean() < 0.05


def test_giant_bucket_becomes_a_star() -> None:
    n = 5000
    keys = np.arange(2 * n, dtype=np.uint64).reshape(n, 2) * np.uint64(1000003)  # all unique
    keys[:3000, 0] = 7  # 3,000 documents share band 0 (boilerplate)
    keys[[3000, 3001], 1] = 9  # a small bucket in band 1
    keys[[4000, 4001, 4002], 0] = 11  # and a 3-bucket: clique
    keys[[4000, 4001], 1] = 12  # same pair in another band: reported once
    pairs = candidate_pairs(keys, max_clique=64)
    assert pairs.dtype == np.int64 and (pairs[:, 0] < pairs[:, 1]).all()
    assert len({tuple(p) for p in pairs.tolist()}) == len(pairs)
    star = pairs[pairs[:, 1] < 3000]
    assert len(star) == 2999 and (star[:, 0] == 0).all()  # k - 1 pairs to the lowest index, not k^2/2
    rest = {tuple(p) for p in pairs[pairs[:, 1] >= 3000].tolist()}
    assert rest == {(3000, 3001), (4000, 4001), (4000, 4002), (4001, 4002)}
    assert len(candidate_pairs(keys[:1000], max_clique=5000)) == 1000 * 999 // 2  # the clique it avoids


def test_candidate_pairs_empty_and_sorted() -> None:
    assert candidate_pairs(np.arange(20, dtype=np.uint64).reshape(10, 2)).shape == (0, 2)
    keys = np.zeros((4, 3), dtype=np.uint64)
    assert candidate_pairs(keys).tolist() == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]


def test_jaccard_helpers(docs: list[str]) -> None:
    a, b = docs[0], docs[0][: len(docs[0]) // 2] + " tail"
    sa, sb = shingle_hashes(a), shingle_hashes(b)
    want = len(set(sa.tolist()) & set(sb.tolist())) / len(set(sa.tolist()) | set(sb.tolist()))
    assert exact_jaccard(sa, sb) == pytest.approx(want)
    assert exact_jaccard(np.empty(0, np.uint32), np.empty(0, np.uint32)) == 1.0
    assert exact_jaccard(sa, np.empty(0, np.uint32)) == 0.0
    sigs = signatures_for_texts([a, b])
    ma = MinHash(hashvalues=sigs[0], scheme="affine32")
    mb = MinHash(hashvalues=sigs[1], scheme="affine32")
    assert estimated_jaccard(sigs[0], sigs[1]) == pytest.approx(ma.jaccard(mb))
    assert estimated_jaccard(sigs, sigs).tolist() == [1.0, 1.0]
