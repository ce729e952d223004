"""Format-independent cleanup shared by every extractor.

Runs before a format parser (so roff/wikitext parsers see ``\\n`` line ends and no
terminal escapes) and again after it (extractors can emit trailing blanks, and HTML
entities such as ``&#27;`` can reintroduce control characters). NFKC is deliberately not
applied here: normalization and hashing belong to a later step, and applying it twice
would make the recorded hash depend on extraction details.
"""

from __future__ import annotations

import re

# Real escape sequences: CSI (colours, cursor moves), OSC (window titles, hyperlinks,
# terminated by BEL or ST), DCS/SOS/PM/APC strings, charset designations (ESC ( B) and the
# few two-byte commands terminals use (save/restore cursor, keypad modes, reset, index).
# Not "ESC + any letter": a stray ESC before a word ("\x1bred") would eat its first letter;
# such a lone ESC is dropped as a control character instead.
_ANSI_RE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|[ -/]+[0-~]"
    r"|[78=>cDEHMNOZ](?![a-z]))"
)
# Residues seen in Debian fortunes-zh (`chinese`: 9 of ~32k sequences): caret notation
# `^[[32m` typed by hand, and SGR codes whose ESC byte was lost (`[0m`). The lookbehind
# keeps literal escapes in prose and shell examples (`printf "\x1b[31m"`, `\033[0m`,
# `\e[1m`) and indexing like `a[0m`; `(?!\])` keeps bracketed text such as "[5m]".
_CARET_ANSI_RE = re.compile(r"\^\[\[[0-9;?]*[A-Za-z]")
_BARE_SGR_RE = re.compile(  # "(?=\[)": the engine skips to a "[" before the lookbehind (2x faster)
    r"(?=\[)(?<![A-Za-z0-9_\\])\[(?:\d{1,3}(?:;\d{1,3})*m(?!\])|;?m(?![A-Za-z\]]))"
)
# C0 controls except \t and \n (CR is turned into \n first), plus DEL.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_MANY_BLANKS_RE = re.compile(r"\n{4,}")  # 3+ blank lines


def strip_ansi(text: str, residues: bool = True) -> str:
    """Remove terminal escape sequences; with ``residues`` also ESC-less leftovers.

    Residue stripping is a heuristic on printable text, so callers turn it off for
    source code, where a string like ``"[0m"`` may be meaningful.
    """
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if residues and ("[" in text):
        text = _CARET_ANSI_RE.sub("", text)
        text = _BARE_SGR_RE.sub("", text)
    return text


def pre_clean(text: str, residues: bool = True) -> str:
    """Normalize line ends, drop escapes and control characters (no layout changes)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = strip_ansi(text, residues=residues)
    return _CONTROL_RE.sub("", text)


def post_clean(text: str) -> str:
    """Strip trailing blanks per line, collapse 3+ blank lines to 2, trim the ends.

    Leading spaces of the first line are kept: they are indentation in code.
    """
    # each line's trailing whitespace (str.isspace, as the regex \s): what ``[^\S\n]+$`` in MULTILINE
    # mode removes, ~6x faster than that regex, which retries every blank of an indentation run
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    if "\n\n\n\n" in text:  # a substring test is far cheaper than the regex's scan of a text without one
        text = _MANY_BLANKS_RE.sub("\n\n\n", text)
    text = text.strip("\n")
    return text if text.strip() else ""


def clean_common(text: str, residues: bool = True) -> str:
    """The full format-independent cleanup: ``pre_clean`` then ``post_clean``."""
    return post_clean(pre_clean(text, residues=residues))
