"""Stage 1's faster text paths give the answers of the plain ones they replaced (issue 33's speed work):
seeded random texts built from the pieces each path is sensitive to, compared with the reference
written the plain way here."""

import random
import re

import pytest

from minideepseek.extract import _clean
from minideepseek.filters import pii
from minideepseek.tokencount import AddedTokenFinder

PII_PIECES = ["john.doe@gmail.com", "a@b.co", "x@@y.org", "@", "@@", "fe80::1", "2001:4860:4860::8888",
              "2a00:1450:4001:81b::200e", "::1", ":::", "abc:def:123:", "8.8.4.4", "93.184.216.34", "1.2.3.4.5",
              "v1.2.3.4", "+1 (415) 555-0123", "tel: 020 7946 0958", "555-123-4567", "电话1-800-998-9938。",
              "+8613812345678", "١٢٣.٤٥.٦٧.٨٩", "３１.２.３.４", "ａ@b.com", "git@github.com:org/repo.git",
              "x" * 70 + "@host.org", " ", "\n", "x", "9", ":", ".", "-", "(", "+", "a1b2"]


def _texts(pieces: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def _spans(it) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in it]


@pytest.mark.parametrize(("name", "anchor", "reach"), [("EMAIL_RE", "@", 64), ("IPV6_RE", ":", 4)])
def test_matches_tried_before_an_anchor_are_finditers(name: str, anchor: str, reach: int) -> None:
    rx = getattr(pii, name)
    texts = _texts(PII_PIECES, 4000, 1)
    found = 0
    for t in texts:
        want = _spans(rx.finditer(t))
        assert _spans(pii._finditer_before(rx, t, anchor, reach)) == want, t
        found += len(want)
    assert found > 500  # the texts do hold matches


@pytest.mark.parametrize("name", ["IPV4_RE", "_DOTTED_QUAD", "PHONE_RE"])
def test_leading_lookahead_changes_no_match(name: str) -> None:
    """The "(?=...)" in front of a lookbehind pattern only lets the engine skip ahead: without it
    (the pattern as it was) the matches are the same, Unicode digits included."""
    rx = getattr(pii, name)
    lead = re.match(r"\(\?=[^)]*\)", rx.pattern)
    assert lead, "the pattern opens with its lookahead"
    plain = re.compile(rx.pattern[lead.end():], rx.flags)
    found = 0
    for t in _texts(PII_PIECES, 4000, 2):
        want = _spans(plain.finditer(t))
        assert _spans(rx.finditer(t)) == want, t
        found += len(want)
    assert found > 500


def test_pii_find_is_unchanged_by_the_fast_paths(monkeypatch) -> None:
    """find() end to end: the spans and kept counts equal those of the module with every fast path
    taken out (plain patterns, plain finditer), on the random texts and on real redaction shapes."""
    r = pii.PiiRedactor()
    texts = _texts(PII_PIECES, 1500, 3)
    fast = [r.find(t) for t in texts]
    for name in ("IPV4_RE", "_DOTTED_QUAD", "PHONE_RE"):
        rx = getattr(pii, name)
        monkeypatch.setattr(pii, name, re.compile(rx.pattern[re.match(r"\(\?=[^)]*\)", rx.pattern).end():], rx.flags))
    monkeypatch.setattr(pii, "_finditer_before", lambda rx, text, anchor, reach: rx.finditer(text))
    assert [r.find(t) for t in texts] == fast
    assert sum(len(spans) for spans, _ in fast) > 300


WS_PIECES = ["a", "b c", " ", "  ", "\t", "\n", "\n\n", "\n\n\n\n", "\u3000", "\u2028", "\x85", "\xa0", "\x0b",
             "\x0c", "x ", "[0m", "a[0m", "[31;1m", "[5m]", "\\[1m", "[m", ";m", "\x1b[31m"]


def test_post_clean_equals_the_regex_it_replaced() -> None:
    trailing = re.compile(r"[^\S\n]+$", re.MULTILINE)

    def reference(text: str) -> str:
        text = trailing.sub("", text)
        text = _clean._MANY_BLANKS_RE.sub("\n\n\n", text)
        text = text.strip("\n")
        return text if text.strip() else ""

    for t in _texts(WS_PIECES, 5000, 4):
        assert _clean.post_clean(t) == reference(t), repr(t)


def test_bare_sgr_lookahead_changes_no_match() -> None:
    plain = re.compile(_clean._BARE_SGR_RE.pattern[len("(?=\\[)"):])
    assert _clean._BARE_SGR_RE.pattern.startswith("(?=\\[)")
    texts = _texts(WS_PIECES, 5000, 5)
    assert sum(bool(plain.search(t)) for t in texts) > 500
    for t in texts:
        assert _clean._BARE_SGR_RE.sub("", t) == plain.sub("", t)


def test_added_token_finder_equals_the_alternation() -> None:
    tokens = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<think>", "</think>", "<|fim|>", "｜D｜x",
              "<ab", "<abc>"}
    rx = re.compile("|".join(map(re.escape, sorted(tokens, key=len, reverse=True))))
    finder = AddedTokenFinder(tokens)
    rng = random.Random(6)
    parts = [t[:k] for t in tokens for k in range(1, len(t) + 1)] + ["x", " ", "<", "｜", "\n"]
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 12))) for _ in range(5000)]
    hits = 0
    for t in texts:
        want = rx.search(t) is not None
        assert finder.contains(t) == want, t
        hits += want
    assert 500 < hits < 4500
