"""Known-answer tests of the rule-based text filters (Gopher quality/repetition, C4, FineWeb).

Each page type from the lecture (normal article, nav bar, SEO page, number table, poem, code,
Chinese prose) is run through all four filters with the published defaults and the verdict of
every filter is asserted; then each drop reason is produced at least once by a targeted input,
with the measured signal values checked by hand-computed numbers. All texts are written here.
"""

from __future__ import annotations

import pytest
import yaml

from minideepseek.config import ConfigError, build
from minideepseek.filters.base import FILTERS, DocContext
from minideepseek.filters.text_rules import (
    C4,
    C4Config,
    FineWebConfig,
    FineWebQuality,
    GopherQuality,
    GopherQualityConfig,
    GopherRepetition,
    GopherRepetitionConfig,
    cjk_ratio,
    is_mostly_cjk,
    words,
)
from minideepseek.filters.words import is_symbol_word, nonblank_lines, paragraphs, sentences

CTX = DocContext(source="test", expected_lang="en")

ARTICLE_TITLE = "The Lighthouse Keepers of the Northern Coast"
ARTICLE_BODY = [
    "For more than a century, the lighthouses along the northern coast were tended by families who lived "
    "beside the lamp. Each evening the keeper climbed the spiral stairs, trimmed the wick and polished the "
    "great lens, so that ships passing the rocky headland could find their way to the harbour.",
    "The work was lonely and often dangerous. Storms arrived with little warning, and supplies came by boat "
    "only when the sea allowed it. Keepers kept careful logbooks that recorded the weather, the passing "
    "vessels and every repair they made to the tower. Historians now use these records to study how the "
    "climate of the region has changed.",
    "Automation arrived slowly during the second half of the twentieth century. Electric lamps replaced oil, "
    "and remote monitoring made the resident keeper unnecessary. Many of the cottages were sold, while "
    "others became small museums that explain the daily routine of the families who once lived there.",
    "Today visitors can walk to several of the old towers. Volunteers lead tours in the summer and describe "
    "how a keeper would prepare for a winter storm. The lighthouses remain a reminder that safe travel at "
    "sea once depended on the patience and skill of ordinary people.",
]
ARTICLE = "\n\n".join([ARTICLE_TITLE, *ARTICLE_BODY])

NAV_BAR = "\n".join([
    "Home | About | Contact",
    "Products | Services | Blog",
    "Login | Register | Cart",
    "Home | About | Contact",
    "Facebook | Twitter | Instagram",
    "Products | Services | Blog",
    "Privacy | Terms | Sitemap",
    "Home | About | Contact",
] * 3)

SEO = " ".join(["Buy cheap running shoes online with the best price and free shipping."] * 12)

NUMBER_TABLE = "\n".join(
    f"{2000 + i} | {12.5 + i:.1f} | {13.1 + 2 * i:.1f} | {45000 + 350 * i:,} | {0.25 * i:.2f}%" for i in range(20)
)

POEM = """Under the grey and patient hill
the river keeps its slow advice
and every stone along the mill
remembers winter twice

I walked there when the year was young
with nothing much to say
the swallows and the bells had sung
the morning half away

And if you ask me why I stay
beside the water and the wall
I only know the light is grey
and I am glad of it all"""

CODE = '''import os
import sys


def list_files(root):
    """Return the sorted file names below root."""
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            out.append(os.path.join(dirpath, name))
    return sorted(out)


def main(argv):
    if len(argv) < 2:
        print("usage: list.py ROOT", file=sys.stderr)
        return 2
    for path in list_files(argv[1]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''

CHINESE = """江南的春天来得很早。二月刚过，河边的柳树就抽出了嫩绿的新芽，田野里的油菜花也渐渐开成一片金黄。

村里的老人说，这个时候最适合播种。他们一早就扛着锄头下地，把冬天翻过的泥土再细细地整理一遍，然后撒下稻种，盖上一层薄薄的稻草。

孩子们放学以后，总喜欢沿着田埂追逐打闹。有时候他们会在小河边捉蝌蚪，有时候会采一大把野花带回家，插在窗台上的玻璃瓶里。

到了傍晚，炊烟从一家家屋顶上升起来。大人们坐在门口聊天，说今年的雨水充足，收成一定不会差。夜色慢慢降临，远处传来几声狗叫，整个村庄又安静下来。"""


def gq(**kw: object) -> GopherQuality:
    return GopherQuality(GopherQualityConfig(**kw))  # type: ignore[arg-type]


def grep(**kw: object) -> GopherRepetition:
    return GopherRepetition(GopherRepetitionConfig(**kw))  # type: ignore[arg-type]


def c4(**kw: object) -> C4:
    return C4(C4Config(**kw))  # type: ignore[arg-type]


def fw(**kw: object) -> FineWebQuality:
    return FineWebQuality(FineWebConfig(**kw))  # type: ignore[arg-type]


def verdicts(text: str, **c4_kw: object) -> dict[str, str]:
    """Reason per filter with defaults; "" = kept."""
    return {f.name: f(text, CTX).reason for f in (gq(), grep(), c4(**c4_kw), fw())}


# ------------------------------------------------------------------------------------------------
# page types: which filters keep / drop each, with the published defaults


def test_registered_under_yaml_names() -> None:
    for name, cls in [("gopher_quality", GopherQuality), ("gopher_repetition", GopherRepetition),
                      ("c4", C4), ("fineweb", FineWebQuality)]:
        assert FILTERS[name] is cls and cls.name == name


def test_normal_article_passes_all_four() -> None:
    assert len(words(ARTICLE)) > 200
    assert verdicts(ARTICLE) == {"gopher_quality": "", "gopher_repetition": "", "c4": "", "fineweb": ""}


def test_nav_bar_page() -> None:
    # "|" tokens are not words with a letter (60% alpha), lines repeat, nothing ends a sentence.
    assert verdicts(NAV_BAR) == {
        "gopher_quality": "gopher_non_alpha_words",
        "gopher_repetition": "gopher_dup_line_frac",
        "c4": "c4_too_few_sentences",
        "fineweb": "fineweb_line_punct_ratio",
    }


def test_seo_page_only_repetition_catches_it() -> None:
    # One well-formed sentence repeated: C4 and FineWeb see twelve good sentences on one line.
    assert verdicts(SEO) == {"gopher_quality": "", "gopher_repetition": "gopher_top_3gram", "c4": "", "fineweb": ""}
    sig = grep()(SEO, CTX).signals
    assert sig["gopher_top_3gram_char_frac"] > 0.18 and sig["gopher_dup_5gram_char_frac"] == 1.0


def test_number_table() -> None:
    assert verdicts(NUMBER_TABLE) == {
        "gopher_quality": "gopher_non_alpha_words",
        "gopher_repetition": "",
        "c4": "c4_too_few_sentences",
        "fineweb": "fineweb_line_punct_ratio",
    }
    assert gq()(NUMBER_TABLE, CTX).signals["gopher_alpha_words_ratio"] == 0.0


def test_poem_dropped_by_c4_and_fineweb_only() -> None:
    # Short lines without terminal punctuation: C4 removes every line (then < 5 sentences) and
    # FineWeb finds no line ending in punctuation; Gopher's rules see ordinary English words.
    assert verdicts(POEM) == {
        "gopher_quality": "",
        "gopher_repetition": "",
        "c4": "c4_too_few_sentences",
        "fineweb": "fineweb_line_punct_ratio",
    }
    # With FineWeb's C4 setting the lines stay (each unpunctuated line is one sentence) ...
    assert c4(filter_no_terminal_punct=False)(POEM, CTX).keep
    # ... and FineWeb's own rule still drops the poem: poetry needs its own source chain.
    assert fw()(POEM, CTX).signals["fineweb_line_punct_ratio"] == 0.0


def test_code_file_needs_its_own_chain() -> None:
    # One stop word ("with" is absent, "the" only in a docstring), one C4 sentence, 1 of 18 lines
    # ends in punctuation: three of four web rules drop ordinary code.
    assert verdicts(CODE) == {
        "gopher_quality": "gopher_stop_words",
        "gopher_repetition": "",
        "c4": "c4_too_few_sentences",
        "fineweb": "fineweb_line_punct_ratio",
    }
    assert gq()(CODE, CTX).signals["gopher_stop_words"] == 1


def test_chinese_prose_passes_with_cjk_handling() -> None:
    assert is_mostly_cjk(CHINESE)
    assert verdicts(CHINESE) == {"gopher_quality": "", "gopher_repetition": "", "c4": "", "fineweb": ""}
    sig = gq()(CHINESE, CTX).signals
    assert sig["gopher_cjk_skipped"] is True and sig["gopher_cjk_ratio"] > 0.9
    assert sig["gopher_words"] > 200  # one word per character, punctuation not counted
    # Without the CJK skip the English-only mean-word-length rule drops it (no non-CJK words).
    res = gq(skip_for_cjk=False)(CHINESE, CTX)
    assert res.reason == "gopher_below_avg_word_length" and res.signals["gopher_cjk_skipped"] is False
    # C4 counts 9 sentences at 。 and keeps all four lines unchanged.
    c4_res = c4()(CHINESE, CTX)
    assert c4_res.signals["c4_sentences"] == 9 and c4_res.text == "\n".join(nonblank_lines(CHINESE))


# ------------------------------------------------------------------------------------------------
# shared units


def test_words_cjk_aware() -> None:
    assert words("GPT-4 模型, ok 「你好」。") == ["GPT-4", "模", "型", ",", "ok", "「", "你", "好", "」。"]
    assert words("かなカナ 한국어") == ["か", "な", "カ", "ナ", "한", "국", "어"]
    assert words("  two\twords\n") == ["two", "words"]
    assert is_symbol_word("」。") and is_symbol_word("|") and not is_symbol_word("#1")


def test_cjk_ratio() -> None:
    assert cjk_ratio("") == 0.0
    assert cjk_ratio("中文 ab") == 0.5 and not is_mostly_cjk("中文 ab")
    assert is_mostly_cjk("中文a")


def test_sentences_splitter() -> None:
    text = 'Dr. Smith went home. He said "hi!" Then e.g. this one. J. R. Tolkien wrote. 他来了。我走了！好'
    assert sentences(text) == [
        "Dr. Smith went home.", 'He said "hi!"', "Then e.g. this one.", "J. R. Tolkien wrote.",
        "他来了。", "我走了！", "好",
    ]
    assert sentences("3.14 is pi... and so on") == ["3.14 is pi...", "and so on"]
    assert sentences(" ... ") == []


def test_lines_and_paragraphs() -> None:
    assert nonblank_lines(" a \n\n \n b\n") == ["a", "b"]
    assert paragraphs("a\nb\n \n\nc\n\n\n") == ["a\nb", "c"]


# ------------------------------------------------------------------------------------------------
# gopher_quality: one case per reason, signals, None disables


def _prose(n: int) -> str:
    """n words of plausible English with stop words and mean length ~4.6."""
    base = "the keeper of the light climbed to the lamp and trimmed the wick with care".split()
    return " ".join(base[i % len(base)] for i in range(n)) + "."


@pytest.mark.parametrize(
    ("text", "kw", "reason"),
    [
        ("The keeper lit the lamp with care.", {}, "gopher_short_doc"),
        (_prose(120), {"max_doc_words": 100}, "gopher_long_doc"),
        (" ".join(["I am to be at it as of so the and with"] * 6), {}, "gopher_below_avg_word_length"),
        (" ".join(["internationalisation incomprehensibility the and"] * 15), {}, "gopher_above_avg_word_length"),
        (_prose(60) + " #news" * 7, {}, "gopher_symbol_word_ratio"),
        (_prose(60) + " wait..." * 7, {}, "gopher_symbol_word_ratio"),
        ("\n".join(f"- the item number {i} of the list with a name" for i in range(12)), {}, "gopher_bullet_lines"),
        ("\n".join(f"the keeper of the light number {i} said…" if i % 2 else f"The line {i} of the text is plain."
                   for i in range(12)), {}, "gopher_ellipsis_lines"),
        (NUMBER_TABLE, {}, "gopher_non_alpha_words"),
        (" ".join(["keeper lighthouse lamp wick harbour storm"] * 10), {}, "gopher_stop_words"),
    ],
)
def test_gopher_quality_reasons(text: str, kw: dict, reason: str) -> None:
    assert gq(**kw)(text, CTX).reason == reason


def test_gopher_quality_signals_are_measured_values() -> None:
    text = "\n".join(["- the cat and the dog #1 ...", "plain line", "• 42 …"])
    s = gq()(text, CTX).signals
    # words: - the cat and the dog #1 ... plain line • 42 …  (13 tokens, 4 symbol-only)
    assert s["gopher_words"] == 9
    assert s["gopher_hash_word_ratio"] == round(1 / 13, 4)
    assert s["gopher_ellipsis_word_ratio"] == round(2 / 13, 4)
    assert s["gopher_bullet_lines_ratio"] == round(2 / 3, 4)
    assert s["gopher_ellipsis_lines_ratio"] == round(2 / 3, 4)
    assert s["gopher_alpha_words_ratio"] == round(7 / 13, 4)
    assert s["gopher_stop_words"] == 2  # "the", "and"; distinct, case-folded
    # mean length of the 9 content words after edge punctuation: the3 cat3 and3 the3 dog3 1 plain5 line4 42
    assert s["gopher_avg_word_length"] == round((3 * 5 + 1 + 5 + 4 + 2) / 9, 4)
    assert s["gopher_cjk_ratio"] == 0.0 and s["gopher_cjk_skipped"] is False


def test_gopher_quality_stop_words_case_and_punctuation() -> None:
    text = " ".join(["The lamp, THE keeper; (with) care"] * 10)
    assert gq()(text, CTX).signals["gopher_stop_words"] == 2


def test_gopher_quality_none_disables_each_rule() -> None:
    assert gq(min_doc_words=None)("The keeper lit the lamp with care.", CTX).keep
    assert gq(min_stop_words=None)(CODE, CTX).keep
    assert gq(max_non_alpha_words_ratio=None)(NUMBER_TABLE, CTX).reason == "gopher_stop_words"
    bullets = "\n".join(f"- the item number {i} of the list with a name" for i in range(12))
    assert gq(max_bullet_lines_ratio=None)(bullets, CTX).keep
    assert gq(max_symbol_word_ratio=None)(_prose(60) + " #news" * 7, CTX).keep
    short = " ".join(["I am to be at it as of so the and with"] * 6)
    assert gq(min_avg_word_length=None)(short, CTX).keep


def test_gopher_quality_mixed_page_mean_ignores_cjk_characters() -> None:
    text = " ".join(["使用 the command line tool with care 中文说明"] * 10)
    s = gq()(text, CTX).signals
    assert s["gopher_cjk_skipped"] is False  # 6 of 30 non-space chars per repeat are CJK
    assert s["gopher_avg_word_length"] == round((3 + 7 + 4 + 4 + 4 + 4) / 6, 4)


# ------------------------------------------------------------------------------------------------
# gopher_repetition


def test_repetition_line_and_paragraph_signals() -> None:
    text = "alpha beta\nalpha beta\ngamma"
    s = grep()(text, CTX).signals
    assert s["gopher_dup_line_frac"] == round(1 / 3, 4)
    assert s["gopher_dup_line_char_frac"] == round(10 / 27, 4)  # chars of the repeat / len(text)
    assert s["gopher_dup_para_frac"] == 0.0  # one paragraph


def test_repetition_ngram_known_answers() -> None:
    # red fox red fox blue sky: the top 2-gram "red fox" covers 4 words = 12 of 19 word chars.
    s = grep()("red fox red fox blue sky", CTX).signals
    assert s["gopher_top_2gram_char_frac"] == round(12 / 19, 4)
    assert s["gopher_top_3gram_char_frac"] == 0.0  # every 3-gram occurs once: no repetition
    # a duplicated 5-gram: both occurrences count (Gopher), words once: 38 of 41 word chars.
    s = grep()("one two three four five one two three four five six", CTX).signals
    assert s["gopher_dup_5gram_char_frac"] == round(38 / 41, 4)
    assert s["gopher_dup_6gram_char_frac"] == 0.0


def test_repetition_overlapping_ngrams_count_each_word_once() -> None:
    s = grep()("ha ha ha ha ha", CTX).signals
    assert s["gopher_top_2gram_char_frac"] == 1.0  # not 4 occurrences x 4 chars / 10


def test_repetition_ignores_punctuation_tokens_in_ngrams() -> None:
    # "张嶷、马忠": the 、 between names is not a word, so only characters make up the n-grams.
    assert grep()("张嶷、马忠", CTX).signals["gopher_top_2gram_char_frac"] == 0.0
    assert grep()("a | b | c", CTX).signals["gopher_top_2gram_char_frac"] == 0.0


FILLER = [f"unique{i}" for i in range(200)]


@pytest.mark.parametrize(
    ("text", "kw", "reason"),
    [
        ("First part.\n\nFirst part.\n\nSecond part.", {}, "gopher_dup_para_frac"),
        ("\n\n".join(["x" * 300, "x" * 300, *[f"p{i}" for i in range(8)]]), {}, "gopher_dup_para_char_frac"),
        ("one line\none line\nanother", {}, "gopher_dup_line_frac"),
        ("\n".join(["y" * 300, "y" * 300, *[f"l{i}" for i in range(8)]]), {}, "gopher_dup_line_char_frac"),
        (" ".join(["cheap shoes"] * 10 + FILLER[:40]), {}, "gopher_top_2gram"),
        (SEO, {}, "gopher_top_3gram"),
    ],
)
def test_repetition_reasons(text: str, kw: dict, reason: str) -> None:
    assert grep(**kw)(text, CTX).reason == reason


@pytest.mark.parametrize("n", [2, 3, 4])
def test_repetition_top_ngram_reason_for_each_n(n: int) -> None:
    text = " ".join([" ".join(f"w{j}" for j in range(n))] * 20 + FILLER[:20])
    res = grep(top_n_grams=((n, 0.2),), dup_n_grams=())(text, CTX)
    assert res.reason == f"gopher_top_{n}gram" and set(res.signals) >= {f"gopher_top_{n}gram_char_frac"}


@pytest.mark.parametrize("n", [5, 6, 7, 8, 9, 10])
def test_repetition_dup_ngram_reason_for_each_n(n: int) -> None:
    phrase = " ".join(f"term{j}" for j in range(n))
    text = " ".join([phrase, *FILLER[:10], phrase, *FILLER[10:20]])
    res = grep(top_n_grams=(), dup_n_grams=((n, 0.1),))(text, CTX)
    assert res.reason == f"gopher_dup_{n}gram"
    if n < 10:  # one term longer than the repeated phrase: no duplicated (n+1)-gram
        assert grep(top_n_grams=(), dup_n_grams=((n + 1, 0.1),))(text, CTX).keep


def test_repetition_dup_10gram_with_defaults() -> None:
    # A duplicated n-gram duplicates every shorter one, so 10-grams fail first only in the band the
    # thresholds leave: one 10-word phrase twice = 100 of 950 word chars (0.105 > 0.10 <= 0.11 ...).
    phrase = " ".join(f"term{j}" for j in range(10))
    filler = [f"f{i:04d}" for i in range(170)]
    res = grep()(" ".join([phrase, *filler[:85], phrase, *filler[85:]]), CTX)
    assert res.reason == "gopher_dup_10gram"
    assert all(res.signals[f"gopher_dup_{n}gram_char_frac"] == round(100 / 950, 4) for n in range(5, 11))


def test_repetition_none_and_empty_disable() -> None:
    text = "one line\none line\nanother"
    assert grep(dup_line_frac=None, dup_line_char_frac=None, top_n_grams=None, dup_n_grams=())(text, CTX).keep
    assert grep(top_n_grams=None, dup_n_grams=None)(SEO, CTX).keep
    assert GopherRepetitionConfig(top_n_grams=None).top_n_grams == ()


def test_repetition_ngram_lists_from_yaml() -> None:
    data = yaml.safe_load("top_n_grams: [[2, 0.25]]\ndup_n_grams: [[5, 0.2], [6, 0.1]]")
    cfg = build(GopherRepetitionConfig, data, "sources.web.filters[0](gopher_repetition)")
    assert cfg.top_n_grams == ((2, 0.25),) and cfg.dup_n_grams == ((5, 0.2), (6, 0.1))
    assert isinstance(cfg.dup_n_grams[0], tuple)
    assert GopherRepetitionConfig(dup_n_grams=[[5, 0.2]]).dup_n_grams == ((5, 0.2),)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# c4


def test_c4_returns_modified_text_and_counts() -> None:
    res = c4()(ARTICLE, CTX)
    assert res.keep and res.text == "\n".join(ARTICLE_BODY)  # the title has no end mark
    assert res.counts["lines_removed"] == 1 and res.counts["lines_removed_no_terminal_punct"] == 1
    assert res.signals == {"c4_lines_in": 5, "c4_lines_kept": 4, "c4_sentences": 12}


def test_c4_each_line_reason() -> None:
    text = "\n".join([
        *ARTICLE_BODY[:2],
        "x" * 1001 + " is a very long token.",
        "Share this on Twitter",
        "Thanks | bye.",
        "Please enable JavaScript to view the comments.",
        "This site uses cookies to improve your experience.",
        "The tower was rebuilt in 1850.[1] It still stands.[citation needed]",
        "孩子们放学以后，总喜欢沿着田埂追逐打闹。",
        "第一章 春天",
    ])
    res = c4()(text, CTX)
    assert res.keep
    assert res.counts == {
        "lines_removed": 6,
        "lines_removed_too_long_word": 1,
        "lines_removed_no_terminal_punct": 2,  # the English share line and the Chinese heading
        "lines_removed_too_few_words": 1,
        "lines_removed_javascript": 1,
        "lines_removed_policy": 1,
    }
    assert res.text == "\n".join([
        *ARTICLE_BODY[:2], "The tower was rebuilt in 1850. It still stands.", "孩子们放学以后，总喜欢沿着田埂追逐打闹。",
    ])
    assert res.signals["c4_lines_in"] == 10 and res.signals["c4_lines_kept"] == 4


def test_c4_page_reasons() -> None:
    body = "\n".join(ARTICLE_BODY)
    assert c4()(body + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit.", CTX).reason == "c4_lorem_ipsum"
    curly = body + "\nThe function is written as { return x; } in the manual."
    assert c4()(curly, CTX).reason == "c4_curly_bracket"
    assert c4(filter_curly_bracket=False)(curly, CTX).keep
    # As in C4's code, page checks see only lines that survived the line rules: a "{" on a line
    # without an end mark is removed with that line.
    assert c4()(body + "\nint main() {", CTX).keep
    assert c4()("One sentence here. Two sentences here.", CTX).reason == "c4_too_few_sentences"
    dropped = c4()(POEM, CTX)
    assert not dropped.keep and dropped.text is None and dropped.signals["c4_sentences"] == 0


def test_c4_switches_and_none() -> None:
    assert c4(min_num_sentences=None)(POEM, CTX).text == ""  # kept, every line removed
    assert c4(filter_javascript=False)(
        ARTICLE + "\n\nPlease enable JavaScript to view the comments.", CTX
    ).counts["lines_removed_javascript"] == 0
    assert c4(filter_policy=False, min_words_per_line=None)(
        "\n".join(ARTICLE_BODY) + "\nOk.", CTX
    ).counts["lines_removed"] == 0
    assert c4(remove_citations=False)("\n".join(ARTICLE_BODY) + "\nBuilt in 1850.[1]", CTX).counts[
        "lines_removed_no_terminal_punct"] == 1
    assert c4(max_word_length=None)("\n".join(ARTICLE_BODY) + "\n" + "x" * 1001 + " is long.", CTX).counts[
        "lines_removed_too_long_word"] == 0


def test_c4_bad_words_off_by_default_and_file_required(tmp_path) -> None:  # noqa: ANN001
    page = "\n".join(ARTICLE_BODY) + "\nThe word zorblax appears here once."
    assert c4()(page, CTX).keep  # off by default
    with pytest.raises(ConfigError, match="bad_words_file"):
        C4Config(filter_bad_words=True)
    with pytest.raises(ConfigError, match="not found"):
        c4(filter_bad_words=True, bad_words_file=str(tmp_path / "missing.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no words"):
        c4(filter_bad_words=True, bad_words_file=str(empty))
    lst = tmp_path / "words.txt"
    lst.write_text("zorblax\n坏词\n", encoding="utf-8")
    f = c4(filter_bad_words=True, bad_words_file=str(lst))
    assert f(page, CTX).reason == "c4_bad_words"
    assert f(page.replace("zorblax", "zorblaxes"), CTX).keep  # whole words only
    assert f(CHINESE.replace("稻草。", "坏词稻草。"), CTX).reason == "c4_bad_words"  # substring for CJK


# ------------------------------------------------------------------------------------------------
# fineweb


def test_fineweb_line_punct_ratio_boundary_is_inclusive() -> None:
    lines = [f"Line number {i} ends with a full stop." for i in range(3)]
    lines += [f"Line number {i} has no end mark at all" for i in range(22)]
    res = fw()("\n".join(lines), CTX)  # 3 / 25 = 0.12: the blog drops at <= 0.12
    assert res.reason == "fineweb_line_punct_ratio" and res.signals["fineweb_line_punct_ratio"] == 0.12
    assert fw()("\n".join(lines + ["One more line with a proper full stop."]), CTX).keep


def test_fineweb_short_line_ratio() -> None:
    short = "\n".join(f"Item {i} is done." for i in range(10))
    res = fw()(short, CTX)
    assert res.reason == "fineweb_short_line_ratio" and res.signals["fineweb_short_line_ratio"] == 1.0
    two_of_three = "Yes.\nNo.\n" + ARTICLE_BODY[0]  # 0.6667 < 0.67: kept
    assert fw()(two_of_three, CTX).keep


def test_fineweb_char_dup_ratio() -> None:
    s = fw()("alpha beta.\nalpha beta.\ngamma.", CTX).signals
    assert s["fineweb_char_dup_ratio"] == round(11 / 28, 4)  # over the characters of the lines
    text = "\n".join([*ARTICLE_BODY, ARTICLE_BODY[0]])
    res = fw()(text, CTX)
    assert res.reason == "fineweb_char_dup_ratio" and res.signals["fineweb_char_dup_ratio"] >= 0.1


def test_fineweb_empty_and_none() -> None:
    assert fw()(" \n\n ", CTX).reason == "fineweb_empty"
    assert fw(line_punct_thr=None)(NAV_BAR, CTX).reason == "fineweb_short_line_ratio"
    assert fw(line_punct_thr=None, short_line_thr=None)(NAV_BAR, CTX).reason == "fineweb_char_dup_ratio"
    assert fw(line_punct_thr=None, short_line_thr=None, char_duplicates_ratio=None)(NAV_BAR, CTX).keep


def test_fineweb_cjk_line_ends() -> None:
    assert fw()(CHINESE, CTX).signals["fineweb_line_punct_ratio"] == 1.0
    assert fw()("他说：“好。”\n" * 1 + CHINESE, CTX).signals["fineweb_line_punct_ratio"] == 1.0


# ------------------------------------------------------------------------------------------------
# config validation


@pytest.mark.parametrize(
    ("cls", "kw", "match"),
    [
        (GopherQualityConfig, {"min_doc_words": -1}, "min_doc_words"),
        (GopherQualityConfig, {"min_doc_words": 500, "max_doc_words": 100}, "swap"),
        (GopherQualityConfig, {"max_avg_word_length": 0}, "max_avg_word_length"),
        (GopherQualityConfig, {"max_bullet_lines_ratio": 1.5}, "between 0 and 1"),
        (GopherQualityConfig, {"min_stop_words": 9}, "stop_words"),
        (GopherRepetitionConfig, {"dup_line_frac": -0.1}, "dup_line_frac"),
        (GopherRepetitionConfig, {"dup_n_grams": ((0, 0.1),)}, r"\[n, threshold\]"),
        (GopherRepetitionConfig, {"top_n_grams": ((2, 1.5),)}, "threshold <= 1"),
        (GopherRepetitionConfig, {"dup_n_grams": ((5, 0.1), (5, 0.2))}, "twice"),
        (GopherRepetitionConfig, {"dup_n_grams": "5"}, "list of"),
        (GopherRepetitionConfig, {"dup_n_grams": ((5,),)}, "pairs|threshold"),
        (C4Config, {"min_words_per_line": 0}, "min_words_per_line"),
        (C4Config, {"filter_bad_words": True}, "bad_words_file"),
        (FineWebConfig, {"line_punct_thr": 2}, "line_punct_thr"),
        (FineWebConfig, {"short_line_length": 0}, "short_line_length"),
        (FineWebConfig, {"stop_chars": ()}, "stop_chars"),
    ],
)
def test_bad_configs_raise_config_error(cls: type, kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cls(**kw)


def test_yaml_build_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="dup_n_grams"):
        build(GopherRepetitionConfig, {"dup_n_grams": [[5, 0.2, 1]]}, "sources.web.filters[1](gopher_repetition)")
    with pytest.raises(ConfigError, match="unknown key"):
        build(FineWebConfig, {"new_line_ratio": 0.3}, "sources.web.filters[2](fineweb)")
    cfg = build(GopherQualityConfig, {"min_stop_words": None, "stop_words": ["The", "And"]}, "x")
    assert cfg.min_stop_words is None and cfg.stop_words == ("the", "and")


def test_dup_ngram_count_modes_differ_by_first_occurrence():
    from minideepseek.filters.gopher import GopherRepetition, GopherRepetitionConfig

    # one 5-gram repeated twice among filler: "all" counts both copies, "repeats" only the second
    filler = " ".join(f"w{i}" for i in range(30))
    text = f"alpha beta gamma delta epsilon {filler} alpha beta gamma delta epsilon"
    ctx = DocContext()
    all_ = GopherRepetition(GopherRepetitionConfig())(text, ctx).signals["gopher_dup_5gram_char_frac"]
    rep = GopherRepetition(GopherRepetitionConfig(dup_ngram_count="repeats"))(text, ctx).signals[
        "gopher_dup_5gram_char_frac"]
    assert all_ == pytest.approx(2 * rep, rel=1e-3) and rep > 0
    with pytest.raises(ConfigError, match="dup_ngram_count"):
        GopherRepetitionConfig(dup_ngram_count="some")


# gopher_repetition's n-gram groups (numpy, exact labels) against the definition, written plainly
def _reference_repeats(ws: list[str], n: int) -> dict[tuple[str, ...], list[int]]:
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(ws) - n + 1):
        groups.setdefault(tuple(ws[i:i + n]), []).append(i)
    return {g: pos for g, pos in groups.items() if len(pos) > 1}


def _reference_fracs(ws: list[str], n: int, count: str) -> tuple[float, float]:
    dup = _reference_repeats(ws, n)
    lengths = [len(w) for w in ws]
    total = sum(lengths)
    if not dup or not total:
        return 0.0, 0.0

    def covered(starts: list[int]) -> int:
        return sum(lengths[j] for j in {j for i in starts for j in range(i, i + n)})

    top = covered(max(dup.values(), key=len)) / total  # dict order = first occurrence: ties go to the earliest
    skip = 1 if count == "repeats" else 0
    return top, covered([i for pos in dup.values() for i in pos[skip:]]) / total


@pytest.mark.parametrize("seed", range(40))
def test_repeated_ngrams_match_the_definition(seed: int) -> None:
    import random

    import numpy as np

    from minideepseek.filters.gopher import dup_ngram_char_frac, repeated_ngrams, top_ngram_char_frac, word_ids

    rng = random.Random(seed)
    vocab = [rng.choice("abcdefg") * rng.randint(1, 4) for _ in range(rng.randint(1, 12))]
    ws = [rng.choice(vocab) for _ in range(rng.randint(0, 300))]
    if ws and seed % 3 == 0:  # planted long repeats, so the 5..10-gram levels have groups too
        k = rng.randint(1, len(ws))
        ws = ws[:k] + ws[:k] + ws
    ids, _ = word_ids(ws)
    lengths = np.array([len(w) for w in ws], dtype=np.int64)
    total = int(lengths.sum())
    reps = repeated_ngrams(ids, set(range(1, 11)))
    for n in range(1, 11):
        ref = _reference_repeats(ws, n)
        assert sorted(reps[n].starts.tolist()) == sorted(i for pos in ref.values() for i in pos)
        got_groups = {}
        for s, g in zip(reps[n].starts.tolist(), reps[n].group.tolist(), strict=True):
            got_groups.setdefault(g, []).append(s)
        assert sorted(got_groups.values()) == sorted(ref.values())  # same grouping, no collisions
        for count in ("all", "repeats"):
            want = _reference_fracs(ws, n, count)
            got = (top_ngram_char_frac(reps[n], lengths, total, n),
                   dup_ngram_char_frac(reps[n], lengths, total, n, count))
            assert got == want, (n, count)


def test_cjk_ratio_counts_what_the_regexes_count() -> None:
    """The fast count (str.split, CJK removal) equals the regex definition on every whitespace kind."""
    import random
    import re
    import sys

    from minideepseek.filters.words import CJK_RE

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert re.compile(r"\s").findall("".join(spaces)) == spaces  # the regex agrees on what a space is
    pool = spaces + list("ab,.1-") + ["模", "型", "か", "한", "\U00020000", "，", "\u3000", "\x1c", "\u200b"]
    rng = random.Random(7)
    for _ in range(300):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 60)))
        non_space = len(re.findall(r"\S", text))
        want = len(CJK_RE.findall(text)) / non_space if non_space else 0.0
        assert cjk_ratio(text) == want, repr(text)


def test_fast_paths_equal_the_regex_definitions() -> None:
    """strip_punct's and count_control_chars's shortcuts change no result (random texts over the
    characters that matter: word, underscore, punctuation, CJK, controls, ANSI escapes)."""
    import random
    import re

    from minideepseek.filters.words import strip_punct
    from minideepseek.records import _POLICY_CONTROL, count_control_chars

    edge = re.compile(r"^[\W_]+|[\W_]+$")
    pool = list("aZ9_-.,(\"'") + ["模", "é", "٣", "\u00b2", "\x1b", "[", "m", "\x07", "\x85", "\x9f", "\t", "\n", "\x00"]
    rng = random.Random(11)
    for _ in range(2000):
        w = "".join(rng.choice(pool) for _ in range(rng.randint(0, 8)))
        assert strip_punct(w) == edge.sub("", w), repr(w)
        assert count_control_chars(w) == sum(1 for m in _POLICY_CONTROL.finditer(w) if m.group(1) is not None)
