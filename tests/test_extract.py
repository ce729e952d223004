"""Tests of minideepseek.extract: small hand-written inputs shaped like the demo corpus."""

from __future__ import annotations

import importlib.util

import pytest

from minideepseek.extract import FORMATS, HTML_EXTRACTORS, ExtractConfig, extract_text


def _trafilatura_usable() -> bool:
    if importlib.util.find_spec("trafilatura") is None:
        return False
    try:
        import lxml.html.clean  # noqa: F401  (justext, imported by trafilatura, needs it)
    except ImportError:
        return False
    return True


EXTRACTORS = [
    pytest.param(name, marks=pytest.mark.skipif(
        name == "trafilatura" and not _trafilatura_usable(),
        reason="trafilatura needs lxml_html_clean with lxml>=5.2 (pip install lxml_html_clean)"))
    for name in HTML_EXTRACTORS
]

# A Sphinx-like page: nav bar, sidebar, footer around a main text with all math forms.
PAGE = r"""<!DOCTYPE html>
<html><head><title>Integration tutorial</title>
<script type="text/javascript" src="_static/jquery.js"></script>
<style>body { color: black }</style></head>
<body>
<div class="related" role="navigation" aria-label="related navigation">
  <h3>Navigation</h3>
  <ul><li><a href="genindex.html">index</a></li><li><a href="py-modindex.html">modules</a> |</li>
  <li><a href="next.html">next</a> |</li></ul>
</div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="integration">
<h1>Integration<a class="headerlink" href="#integration" title="Permalink">¶</a></h1>
<p>The function quad integrates a function of one variable between two points. The points
can be <span class="math notranslate nohighlight">\(\pm\infty\)</span> to indicate infinite
limits, and the integrand may be any callable Python object such as a lambda function.</p>
<p>For example, suppose you wish to integrate a Bessel function along the interval
from zero to four and a half. The integral to compute is shown below in display form.</p>
<div class="math notranslate nohighlight">
\[I=\int_{0}^{4.5}J_{2.5}\left(x\right)\, dx.\]</div>
<p>A simpler integral is <img class="math" src="_images/math/0a1b.png" alt="\int_0^1 x dx"/> which
equals one half; the fundamental theorem of calculus gives it at once from the antiderivative.</p>
<div class="math"><p><img src="_images/math/77ff.png" alt="\sum_{n=0}^\infty \frac{z^n}{n!} = e^z"/></p></div>
<p>Older MathJax pages carry their source in scripts, like <script type="math/tex">a^2+b^2=c^2</script>
inside a sentence that continues after the formula and ends here with enough words to count.</p>
<script type="math/tex; mode=display">\mathbf{y}(t)=e^{tA}\mathbf{y}(0)</script>
<p>This could be computed using quad with the following short program, which prints the result
together with an estimate of the absolute error of the numerical integration.</p>
<div class="highlight"><pre>
import scipy.integrate as integrate
def f(x):
    return x ** 2
result = integrate.quad(f, 0, 4.5)
</pre></div>
<p>The first argument to quad is a callable Python object. The next two arguments are the
limits of integration. The return value is a tuple, with the first element holding the
estimated value of the integral and the second element holding an upper bound on the error.</p>
</section>
</div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation">
  <h4>Previous topic</h4><p><a href="prev.html">Optimization</a></p>
  <h3>This Page</h3><ul><li><a href="_sources/integrate.rst.txt">Show Source</a></li></ul>
  <div id="searchbox" role="search"><h3>Quick search</h3><form><input type="text" name="q"/></form></div>
</div></div>
<footer class="footer">&copy; Copyright 2008-2022, The SciPy community. Created using Sphinx 5.3.0.</footer>
</body></html>
"""


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_html_math_survives_and_nav_is_gone(extractor: str) -> None:
    out = extract_text(PAGE, "html", ExtractConfig(html_extractor=extractor))
    assert "The function quad integrates" in out
    assert r"\(\pm\infty\)" in out  # MathJax span text
    assert r"\[I=\int_{0}^{4.5}J_{2.5}\left(x\right)\, dx.\]" in out  # div.math
    assert r"\(\int_0^1 x dx\)" in out  # inline <img class="math" alt>
    assert r"\[\sum_{n=0}^\infty \frac{z^n}{n!} = e^z\]" in out  # display img inside div.math
    assert r"\(a^2+b^2=c^2\)" in out  # <script type="math/tex">
    assert r"\[\mathbf{y}(t)=e^{tA}\mathbf{y}(0)\]" in out  # mode=display
    for chrome in ("Quick search", "Previous topic", "Show Source", "Navigation", "modules |", "¶"):
        assert chrome not in out, chrome
    assert "jquery" not in out and "color: black" not in out


def test_html_default_keeps_code_lines_and_indentation() -> None:
    out = extract_text(PAGE, "html")
    lines = out.split("\n")
    assert "import scipy.integrate as integrate" in lines
    assert "def f(x):" in lines
    assert "    return x ** 2" in lines  # indentation inside <pre> survives
    assert "Created using Sphinx" not in out


def test_html_keep_math_false_drops_math_elements() -> None:
    out = extract_text(PAGE, "html", ExtractConfig(keep_math=False))
    assert r"\int_0^1" not in out and "a^2+b^2" not in out and "J_{2.5}" not in out
    assert "A simpler integral is" in out


def test_html_edge_cases() -> None:
    assert extract_text("", "html") == ""
    assert extract_text("<html><body><nav>Home</nav></body></html>", "html") == ""
    # An entity can smuggle an ESC byte in: it must not survive.
    out = extract_text("<p>" + "Red text follows here. " * 5 + "&#27;[31mred&#27;[0m</p>", "html")
    assert "\x1b" not in out and "red" in out


WIKI = """{{Infobox scientist
| name = Ada Lovelace
| birth_date = {{birth date|1815|12|10}}
| known_for = {{nowrap|Analytical Engine}}
}}
'''Augusta Ada King''' was an English [[mathematician]] and ''writer'', chiefly known for her \
work on [[Charles Babbage|Babbage's]] proposed [[Analytical Engine]].<ref name="toole">{{cite book \
|last=Toole |title=Ada |year=1998}}</ref> She was the first to see uses beyond [[calculation]].<ref name=toole/>
<!-- editors: keep this short -->
[[File:Ada Lovelace portrait.jpg|thumb|right|Portrait of [[Ada Lovelace|Ada]] by [[Alfred Chalon]]]]

== Notes on the engine ==
Her notes describe an algorithm for the Bernoulli numbers <math>B_n = \\frac{{-1}^{n}}{n+1}</math> \
and see [http://example.org/notes the full notes] for more.
{| class="wikitable"
! Year !! Event
|-
| 1843 || Notes published
|}
* First item about the engine
* {{citation needed}}
Text continues in the {{lang|fr|langue}} of the era.

== References ==
{{reflist}}
* A book listed only as a reference
[[Category:English mathematicians]]
[[fr:Ada Lovelace]]
"""


def test_wikitext_cleanup() -> None:
    out = extract_text(WIKI, "wikitext")
    assert out.startswith("Augusta Ada King was an English mathematician and writer,")
    assert "work on Babbage's proposed Analytical Engine." in out
    assert "Notes on the engine" in out.split("\n")  # heading on its own line
    assert r"\(B_n = \frac{{-1}^{n}}{n+1}\)" in out  # LaTeX braces are not templates
    assert "see the full notes for more" in out
    assert "- First item about the engine" in out
    assert "in the langue of the era" in out
    prose = out.replace(r"\(B_n = \frac{{-1}^{n}}{n+1}\)", "")
    for gone in ("{{", "}}", "[[", "]]", "<ref", "Toole", "Infobox", "1815", "wikitable", "1843",
                 "Portrait", "Chalon", "Category", "English mathematicians", "fr:", "editors",
                 "'''", "''", "example.org", "References", "A book listed", "citation needed"):
        assert gone not in prose, gone
    assert "\n\n\n" not in out


def test_wikitext_keep_math_false() -> None:
    out = extract_text(WIKI, "wikitext", ExtractConfig(keep_math=False))
    assert "B_n" not in out and "Bernoulli numbers" in out


ROFF = r""".\" 本文件由 po4a 生成，请勿修改
.TH LS 1 2022年9月 "GNU coreutils 9.1" 用户命令
.SH 名称
ls \- 列出目录内容
.SH 概述
\fBls\fP [\fI\,选项\/\fP]... [\fI\,文件列表\/\fP]...
.SH 描述
.PP
列出指定“文件”的信息\(em默认为当前目录。
如果没有指定 \fB\-\-sort\fP，则按字母排序。
.TP
\fB\-a\fR, \fB\-\-all\fR
不要忽略以点号起始的条目
.PP
示例：
.nf
    $ ls \-la
    total 8
.fi
参见
.BR dircolors (1)
和
.B info
手册。
"""


def test_roff_manpage_zh() -> None:
    out = extract_text(ROFF, "roff")
    lines = out.split("\n")
    assert lines[0] == "LS(1)"
    assert "名称" in lines and "概述" in lines and "描述" in lines  # headings on their own lines
    assert "ls - 列出目录内容" in lines
    assert "ls [选项]... [文件列表]..." in lines
    # Fill-mode lines join without a space between CJK characters; \(em maps to a dash.
    assert "列出指定“文件”的信息—默认为当前目录。如果没有指定 --sort，则按字母排序。" in lines
    assert "-a, --all" in lines and "不要忽略以点号起始的条目" in lines  # .TP tag, then body
    assert "    $ ls -la" in lines and "    total 8" in lines  # .nf keeps lines and indents
    assert "参见 dircolors(1) 和 info 手册。" in lines
    assert "\\f" not in out and "\\-" not in out and "po4a" not in out and not out.count(".TH")


ANSI_FORTUNE = (
    "\x1b[32m《静夜思》\x1b[m\n\x1b[33m作者：李白\x1b[m\r\n床前明月光，疑是地上霜。\n"
    "^[[32m其二\x1b[m\n[0m举头望明月，低头思故乡。\x1b]0;title\x07\n"
    '试试 printf "\\x1b[31m" 和 \\033[0m 这两个写法。\n'
)


def test_ansi_fortune_is_cleaned() -> None:
    out = extract_text(ANSI_FORTUNE, "text")
    assert out == (
        "《静夜思》\n作者：李白\n床前明月光，疑是地上霜。\n其二\n举头望明月，低头思故乡。\n"
        '试试 printf "\\x1b[31m" 和 \\033[0m 这两个写法。'
    )


def test_code_indentation_and_common_cleanup() -> None:
    src = "class A:\r\n\tdef f(self):  \r\n        return '[0m'\x00\n\n\n\n\n\n# end\x0c\n   \n"
    out = extract_text(src, "code")
    assert out == "class A:\n\tdef f(self):\n        return '[0m'\n\n\n# end"
    indented = "    x = 1\n    if x:\n        y = 2\n"
    assert extract_text(indented, "code") == indented.rstrip("\n")  # leading indent kept


@pytest.mark.parametrize("fmt", ["text", "tex", "markdown"])
def test_latex_and_unicode_untouched(fmt: str) -> None:
    src = (
        "# Title\n\nEuler: $e^{i\\pi}+1=0$ and \\begin{equation}\\int_0^1 x\\,dx=\\frac{1}{2}"
        "\\end{equation}\nＡＢＣ ﬁ ½ 三国演义 — “quotes”"
    )
    assert extract_text(src, fmt) == src  # no NFKC, no LaTeX damage


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_idempotent_on_clean_text_and_empty_on_blank(fmt: str) -> None:
    assert extract_text("", fmt) == "" and extract_text(" \n\t\n", fmt) == ""
    if fmt in ("text", "code", "tex", "markdown"):
        once = extract_text(ANSI_FORTUNE, fmt)
        assert extract_text(once, fmt) == once


def test_unknown_format_and_bad_config_name_the_fix() -> None:
    with pytest.raises(ValueError, match="valid formats: text, code, html, wikitext, roff, tex, markdown"):
        extract_text("x", "pdf")
    with pytest.raises(ValueError, match="html_extractor='readability'.*one of"):
        ExtractConfig(html_extractor="readability")
    with pytest.raises(ValueError, match="unknown extract config key.*valid"):
        ExtractConfig.from_dict({"html_extractor": "resiliparse", "lang": "en"})
    with pytest.raises(TypeError, match="decode bytes first"):
        extract_text(b"x", "text")  # type: ignore[arg-type]
    assert ExtractConfig.from_dict({"keep_math": False}) == ExtractConfig(keep_math=False)
