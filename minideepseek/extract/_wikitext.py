"""MediaWiki markup (Wikipedia dump ``<text>``) to plain text, with regexes.

No parser dependency: mwparserfromhell would be more faithful, but for training text we
only need the prose, and the constructs that break regexes (nesting) are handled by
innermost-first loops. Order matters and is commented inline: verbatim spans (``<math>``,
``<nowiki>``, code) are set aside first so LaTeX braces such as ``\\frac{{a}}{b}`` are
never taken for templates.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minideepseek.extract import ExtractConfig

_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
# Verbatim spans, set aside as private-use placeholders (\ue000<i>\ue001).
_VERBATIM_RE = re.compile(
    r"<(math|chem|nowiki|pre|syntaxhighlight|source|code)(\s[^>]*)?>(.*?)</\1\s*>", re.S | re.I
)
_PLACEHOLDER_RE = re.compile("\ue000(\\d+)\ue001")
_REF_SELF_RE = re.compile(r"<ref\b[^>]*/>", re.I)
_REF_RE = re.compile(r"<ref\b[^>]*>.*?</ref\s*>", re.S | re.I)
# Elements whose whole content is not prose (file lists, markup for graphics, ...).
_DROP_ELEM_RE = re.compile(
    r"<(references|gallery|imagemap|timeline|score|graph|mapframe|templatedata)\b[^>]*?"
    r"(?:/>|>.*?</\1\s*>)",
    re.S | re.I,
)
# Innermost template: no braces inside except single-brace groups (LaTeX-ish `{2}`).
_TEMPLATE_RE = re.compile(r"\{\{((?:[^{}]|\{[^{}]*\})*)\}\}")
# Inline templates whose argument is sentence text; dropping them would leave holes
# like "the function  is". Value: index of the positional argument to keep.
_INLINE_TEMPLATES = {"math": 1, "mvar": 1, "nowrap": 1, "nobr": 1, "lang": 2, "transl": 2,
                     "nihongo": 1}
_EXT_LINK_RE = re.compile(r"\[(?:https?:|ftp:|mailto:|//)[^\s\]]*(?:[ \t]+([^\]\n]*))?\]", re.I)
# Innermost link; single-bracket groups may sit inside (captions quoting "come[s]").
_LINK_RE = re.compile(r"\[\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\]")
_DROP_NS = {"file", "image", "media", "category", "datei", "bild", "fichier", "archivo",
            "kategorie", "catégorie", "categoría", "文件", "图像", "分类", "ファイル"}
_INTERLANG_RE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]{2,8})*$")
_BOLD_ITALIC_RE = re.compile(r"'{5}|'{3}|'{2}")
_HEADING_RE = re.compile(r"^(={1,6})[ \t]*(.+?)[ \t]*\1[ \t]*$", re.M)
# Trailing apparatus: lists of titles and links, not prose. Dropped with their body.
_DROP_SECTIONS = {"references", "external links", "further reading", "see also", "notes",
                  "bibliography", "sources", "citations", "footnotes", "notes and references"}
# "Albedo ({{IPA}}) or" leftovers; the space before keeps code like `main()`.
_EMPTY_PARENS_RE = re.compile(r"[ \t]\((?:[\s,;:]|\xa0)*\)")
_EMPTY_ITEM_RE = re.compile(r"^- *\n", re.M)
_BR_RE = re.compile(r"<br\s*/?>", re.I)
_TAG_RE = re.compile(
    r"</?(?:small|big|span|div|sup|sub|center|blockquote|u|s|del|ins|b|i|em|strong|tt|font"
    r"|abbr|cite|p|ol|ul|li|dl|dt|dd|hr|poem|noinclude|includeonly|onlyinclude|section"
    r"|var|kbd|samp|q|ruby|rt|rp|bdi|wbr|table|tr|td|th|caption|templatestyles|mark"
    r"|ref|references)\b[^>]*>",
    re.I,
)
_MAGIC_RE = re.compile(r"__[A-Z]+__")
_LIST_RE = re.compile(r"^[ \t]*([*#:;]+)[ \t]*", re.M)
_HR_RE = re.compile(r"^-{4,}[ \t]*$", re.M)


def _strip_templates(text: str) -> str:
    """Remove ``{{...}}`` innermost-first, so nesting of any depth goes away."""

    def repl(m: re.Match[str]) -> str:
        # A pipe inside a link argument (`{{lang|ja|[[wikt:気|気]]}}`) is not a separator.
        inner = re.sub(r"\[\[[^\[\]]*\]\]", lambda x: x.group(0).replace("|", "\ue002"), m.group(1))
        parts = [p.replace("\ue002", "|") for p in inner.split("|")]
        name = parts[0].strip().lower()
        idx = _INLINE_TEMPLATES.get(name)
        if idx is None or len(parts) <= idx:
            return ""
        positional = [p for p in parts[1:] if not re.match(r"^\s*[A-Za-z_]+\s*=", p)]
        keep = positional[idx - 1] if len(positional) >= idx else parts[idx]
        return re.sub(r"^\s*\d+\s*=", "", keep).strip()

    for _ in range(50):  # depth bound; real articles nest < 10
        new = _TEMPLATE_RE.sub(repl, text)
        if new == text:
            break
        text = new
    # Unbalanced leftovers (truncated dumps): drop the braces, keep the words.
    return text.replace("{{", "").replace("}}", "")


def _strip_tables(text: str) -> str:
    """Remove ``{| ... |}`` tables, nested ones included (markers start a line)."""
    out: list[str] = []
    depth = 0
    for line in text.split("\n"):
        s = line.lstrip()
        if s.startswith("{|"):
            depth += 1
        elif depth and s.startswith("|}"):
            depth -= 1
        elif not depth:
            out.append(line)
    return "\n".join(out)


def _drop_sections(text: str) -> str:
    """Remove "References", "External links", ... sections up to the next same-level heading."""
    out: list[str] = []
    drop_level = 0  # >0 while inside a dropped section of that level
    pos = 0
    for m in _HEADING_RE.finditer(text):
        if not drop_level:
            out.append(text[pos : m.start()])
        level = len(m.group(1))
        if drop_level and level > drop_level:
            pos = m.end()
            continue
        drop_level = level if m.group(2).strip().lower() in _DROP_SECTIONS else 0
        pos = m.start() if not drop_level else m.end()
    if not drop_level:
        out.append(text[pos:])
    return "".join(out)


def _link(m: re.Match[str]) -> str:
    """``[[target|label]]`` -> label; files, categories and interlanguage links -> ''."""
    inner = m.group(1)
    target, _, label = inner.partition("|")
    visible = target.startswith(":")  # [[:Category:X]] is a visible link to the category
    target = target.lstrip(":").strip()
    ns, colon, _ = target.partition(":")
    if colon and not visible and (ns.strip().lower() in _DROP_NS or _INTERLANG_RE.match(ns)):
        return ""
    return label.strip() if label.strip() else target


def _strip_links(text: str) -> str:
    # Innermost first: links inside a file caption become text, then the file link
    # itself is innermost and is dropped whole, caption and all.
    for _ in range(10):
        new = _LINK_RE.sub(_link, text)
        if new == text:
            break
        text = new
    return text


def extract_wikitext(raw: str, cfg: ExtractConfig) -> str:
    """Plain text of a wikitext article; ``<math>`` kept as ``\\(...\\)``."""
    saved: list[str] = []

    def save(m: re.Match[str]) -> str:
        tag, attrs, body = m.group(1).lower(), m.group(2) or "", m.group(3)
        if tag in ("math", "chem"):
            if not cfg.keep_math:
                body = ""
            else:
                if tag == "chem":
                    body = f"\\ce{{{body.strip()}}}"
                display = re.search(r"display\s*=\s*[\"']?block", attrs, re.I) is not None
                body = f"\\[{body.strip()}\\]" if display else f"\\({body.strip()}\\)"
        else:
            body = html.unescape(body)
        saved.append(body)
        return f"\ue000{len(saved) - 1}\ue001"

    text = _COMMENT_RE.sub("", raw)
    text = _VERBATIM_RE.sub(save, text)
    text = _REF_SELF_RE.sub("", text)  # first: `<ref name=a/>` must not open a pair
    text = _REF_RE.sub("", text)
    text = _DROP_ELEM_RE.sub("", text)
    text = _strip_templates(text)
    text = _strip_tables(text)
    text = _EXT_LINK_RE.sub(lambda m: (m.group(1) or "").strip(), text)
    text = _strip_links(text)
    text = _BOLD_ITALIC_RE.sub("", text)
    text = _drop_sections(text)
    text = _HEADING_RE.sub(lambda m: "\n\n" + m.group(2).strip() + "\n\n", text)
    text = _BR_RE.sub("\n", text)
    text = _TAG_RE.sub("", text)
    text = _MAGIC_RE.sub("", text)
    text = _HR_RE.sub("", text)
    text = _LIST_RE.sub(lambda m: "- " if m.group(1)[-1] in "*#" else "", text)
    text = html.unescape(text)
    text = _EMPTY_PARENS_RE.sub("", text)
    text = _EMPTY_ITEM_RE.sub("", text)
    # Removed templates and refs leave holes: runs of spaces, indented or blank lines.
    text = re.sub(r"(?<=\S)[ \t]{2,}", " ", text)
    text = re.sub(r"^[ \t]+", "", text, flags=re.M)
    text = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text)
    return _PLACEHOLDER_RE.sub(
        lambda m: saved[int(m.group(1))] if int(m.group(1)) < len(saved) else "", text
    )
