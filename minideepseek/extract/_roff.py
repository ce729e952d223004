"""roff man pages (man and a little mdoc) to readable plain text, without groff.

Shelling out to ``man``/``groff`` would need binaries CI may lack, cost a process per
page, and emit backspace overstrikes and hard-wrapped lines. Instead this is a small line
interpreter: requests and macros become structure (headings on their own line, ``.TP`` tags
on their own line, ``.nf`` blocks verbatim), macro arguments stay as text, font escapes go,
special characters map to Unicode. Fill-mode lines are joined into paragraphs the way
roff joins them (with a space) except between two CJK characters, where roff output
would show a space that zh_CN text never has.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minideepseek.extract import ExtractConfig

_GREEK = dict(zip("abgdezyhiklmncoprstufxqw", "αβγδεζηθικλμνξοπρστυφχψω", strict=True))
_SPECIAL: dict[str, str] = {
    "em": "—", "en": "–", "hy": "-", "mi": "−", "pl": "+", "eq": "=", "bu": "•", "co": "©",
    "rg": "®", "tm": "™", "lq": "“", "rq": "”", "oq": "‘", "cq": "’", "aq": "'", "dq": '"',
    "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "de": "°", "mu": "×", "di": "÷", "+-": "±",
    "<=": "≤", ">=": "≥", "!=": "≠", "==": "≡", "~~": "≈", "~=": "≅", "->": "→", "<-": "←",
    "<>": "↔", "ua": "↑", "da": "↓", "ga": "`", "aa": "´", "ti": "~", "ha": "^", "rs": "\\",
    "sl": "/", "ul": "_", "ru": "_", "bv": "|", "br": "|", "or": "|", "ba": "|", "pd": "∂",
    "sc": "§", "ps": "¶", "dg": "†", "dd": "‡", "fm": "′", "sd": "″", "sq": "□", "ci": "○",
    "**": "∗", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "la": "⟨", "ra": "⟩", "at": "@",
    "sh": "#", "Do": "$", "Eu": "€", "eu": "€", "ct": "¢", "Po": "£", "Ye": "¥", "12": "½",
    "14": "¼", "34": "¾", "if": "∞", "pt": "∝", "sr": "√", "es": "∅", "mo": "∈", "fa": "∀",
    "te": "∃", "no": "¬", "AN": "∧", "OR": "∨", "tf": "∴", "md": "·", "pc": "·", "OK": "✓",
    "rh": "☞", "lh": "☜", "hA": "⇔", "rA": "⇒", "lA": "⇐",
}
_SPECIAL.update({"*" + k: v for k, v in _GREEK.items()})
_SPECIAL.update({"*" + k.upper(): v.upper() for k, v in _GREEK.items()})

_ESC_RE = re.compile(
    r"""\\(?:
      \((?P<two>..)                           # \(em
    | \[(?P<br>[^\]]*)\]                      # \[em]
    | [fFmM](?:\(..|\[[^\]]*\]|.)             # font / family / colour: drop
    | s[+-]?(?:\(\d\d|\[[^\]]*\]|'[^']*'|\d)  # size: drop
    | \*(?:\((?P<s2>..)|\[(?P<sb>[^\]]*)\]|(?P<s1>.))  # defined string
    | n[+-]?(?:\(..|\[[^\]]*\]|.)             # number register: drop
    | N'(?P<num>\d+)'                         # character by code
    | [hvwoDlLbxXZRSHCAY]'[^']*'              # motions, widths, overstrikes: drop
    | [kgY](?:\(..|\[[^\]]*\]|.)              # marks and friends: drop
    | (?P<one>.)
    )""",
    re.X,
)
_ONE = {"-": "-", "\\": "\\", "e": "\\", "E": "\\", " ": " ", "~": " ", "0": " ", "t": "\t",
        "'": "'", "`": "`", ".": ".", "_": "_", "@": "@"}
_DROP_ONE = set("&|^,/%:cdupraz{})!")  # zero-width, hyphenation points, line controls
_COMMENT_RE = re.compile(r'(?<!\\)((?:\\\\)*)\\(?:".*|#.*\n?)')
_CONT_RE = re.compile(r"(?<!\\)((?:\\\\)*)\\\n")
_ARG_RE = re.compile(r'"((?:[^"]|"")*)"?|((?:\\.|[^\s\\])+)')
_CJK = re.compile(r"[\u2e80-\u303f\u3040-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")

_SILENT = set(
    "ad na hy nh ne in ti ll ft ps vs ls ta tr mk rt ev bp PD RS RE UC IX Id cs ss lf pc "
    "fl hw nr rr rm rn ch wh it em cu ul cc c2 ec eo pl po lt pn DT AT Dd Os Bl El Sm so "
    "BS BE VS VE Vs UR MT hc lg mso pso tm ab ex fc nm nn cp do Ek Bf Ef Bk".split()
)
_PARA = {"PP", "LP", "P", "sp", "Sp", "Pp", "Lp", "HP"}
_HEAD = {"SH", "SS", "Sh", "Ss"}
_MAN_TEXT = {"B", "I", "SM", "SB", "SY", "UE", "ME"}
_ONE_FONT = {"Em", "Sy", "Ar", "Pa", "Cm", "Ic", "Li", "Va", "Dv", "Ev",
             "Er", "Fn", "Ft", "Cd", "Ad", "Tn", "Ql", "Ms", "Sx", "An", "No", "Nd", "Lk"}
_ALT_FONT = {"BR", "RB", "BI", "IB", "IR", "RI"}
_NOFILL = {"nf", "EX", "Vb", "CS", "Bd", "Dl"}
_FILL = {"fi", "EE", "Ve", "CE", "Ed"}
_MDOC_CALLABLE = _ONE_FONT | {"Fl", "Xr", "Ns", "Op", "Oo", "Oc", "Dq", "Qq", "Sq", "Pq", "Nm", "Aq",
                              "Ao", "Ac", "Bq", "Bo", "Bc", "Xo", "Xc", "Eo", "Ec", "Pf", "Po", "Pc"}
_KNOWN = (_SILENT | _PARA | _HEAD | _ONE_FONT | _ALT_FONT | _NOFILL | _FILL | _MAN_TEXT
          | {"TH", "TP", "IP", "br", "ds", "de", "ig", "if", "ie", "el", "TS", "Nm", "Xr", "Op"})
# A request name stops at a backslash: `.el\{\` is `el` followed by a block opener.
_REQUEST_RE = re.compile(r"[.']\s*([^\s\\]*)\s?(.*)")
_INDENTED_MACRO_RE = re.compile(r"[ \t]+[.']([A-Za-z]{1,3})(?:\s|$)")


def _join(a: str, b: str) -> str:
    """Join two fill-mode pieces: a space, except between CJK characters."""
    if not a:
        return b
    if not b:
        return a
    if _CJK.match(a[-1]) and _CJK.match(b[0]):
        return a + b
    return a + " " + b


class _Roff:
    """A line interpreter holding the small amount of state the man macros need."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.para = ""
        self.fill = True
        self.glue = False  # previous line ended in \c: no space before the next piece
        self.pending: str | None = None  # "head" or "tag": next text line is one
        self.strings: dict[str, str] = {"C+": "C++", "L\"": "“", "R\"": "”", "C`": "“",
                                        "C'": "”", "R": "®", "Tm": "™", "lq": "“", "rq": "”"}
        self.name = ""  # mdoc .Nm

    # --- text -----------------------------------------------------------------
    def unescape(self, s: str) -> str:
        def repl(m: re.Match[str]) -> str:
            if (k := m.group("two")) is not None or (k := m.group("br")) is not None:
                return _SPECIAL.get(k, "")
            if (k := m.group("s2") or m.group("sb") or m.group("s1")) is not None:
                return self.strings.get(k, "")
            if (k := m.group("num")) is not None:
                return chr(int(k)) if int(k) < 0x110000 else ""
            if (k := m.group("one")) is not None:
                return _ONE.get(k, "" if k in _DROP_ONE else k)
            return ""

        return _ESC_RE.sub(repl, s) if "\\" in s else s

    def args(self, rest: str) -> list[str]:
        return [self.unescape(q.replace('""', '"') if q or u == "" else u)
                for q, u in _ARG_RE.findall(rest)]

    def flush(self) -> None:
        if self.para.strip():
            self.out.append(self.para.strip())
        self.para = ""

    def blank(self) -> None:
        self.flush()
        if self.out and self.out[-1] != "":
            self.out.append("")

    def text(self, s: str, raw_leading_space: bool = False) -> None:
        if self.pending == "head":
            self.blank()
            self.out.append(s.strip())
            self.pending = None
            return
        if not self.fill:
            self.flush()
            self.out.append(s)
        else:
            if raw_leading_space:
                self.flush()
            self.para = self.para + s if self.glue else _join(self.para, s.strip())
        self.glue = False
        if self.pending == "tag":
            self.flush()
            self.pending = None

    # --- requests and macros ----------------------------------------------------
    def mdoc_args(self, args: list[str]) -> str:
        words: list[str] = []
        dash = False
        for a in args:
            if a == "Fl":
                dash = True
                continue
            if a == "Nm":
                a = self.name
            elif a in _MDOC_CALLABLE:
                continue
            words.append(("-" + a) if dash else a)
            dash = False
        return " ".join(w for w in words if w)

    def request(self, name: str, rest: str) -> None:
        args = self.args(rest)
        joined = " ".join(args)
        if name == "TH" or name == "Dt":
            self.blank()
            self.out.append(f"{args[0]}({args[1]})" if len(args) > 1 else joined)
            self.out.append("")
        elif name in _HEAD:
            if args:
                self.blank()
                self.out.append(joined)
            else:
                self.pending = "head"
        elif name in _PARA:
            self.blank()
        elif name == "br":
            self.flush()
        elif name == "TP":
            self.blank()
            self.pending = "tag"
        elif name in ("IP", "It"):
            if name == "IP":
                self.blank()
            else:
                self.flush()
            tag = self.mdoc_args(args) if name == "It" else (args[0] if args else "")
            if tag:
                self.text(tag)
                self.flush()
        elif name in _NOFILL:
            self.flush()
            if name == "Dl":
                self.out.append("    " + self.mdoc_args(args))
            elif name != "Bd" or re.search(r"-(literal|unfilled)", rest):
                self.fill = False
        elif name in _FILL:
            self.flush()
            self.fill = True
        elif name == "ds":
            key, _, value = rest.strip().partition(" ")
            self.strings[key] = self.unescape(value.lstrip().removeprefix('"'))
        elif name in _ALT_FONT:
            self.text("".join(args))
        elif name in _MAN_TEXT:
            if joined:
                self.text(joined)
        elif name in ("Nm",):
            if args and not self.name:
                self.name = args[0]
            self.text(self.mdoc_args(args) if args else self.name)
        elif name == "Xr" and args:
            self.text(f"{args[0]}({args[1]})" + "".join(args[2:]) if len(args) > 1 else args[0])
        elif name in ("Op", "Oo"):
            self.text("[" + self.mdoc_args(args) + ("]" if name == "Op" else ""))
        elif name in ("Dq", "Qq", "Sq", "Pq"):
            left, right = {"Dq": "“”", "Qq": '""', "Sq": "‘’", "Pq": "()"}[name]
            self.text(left + self.mdoc_args(args) + right)
        elif name in ("Fl", "Oc", "OP") or name in _ONE_FONT:
            s = {"Oc": "]", "OP": "[" + joined + "]"}.get(name, self.mdoc_args([name] + args))
            if s:
                self.text(s)
        elif name in _SILENT:
            return
        elif args:  # unknown macro: keep its arguments as text
            self.text(joined)

    def run(self, src: str) -> str:
        src = _CONT_RE.sub(r"\1", _COMMENT_RE.sub(r"\1", src))
        lines = src.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if line[:1] in (" ", "\t") and (m := _INDENTED_MACRO_RE.match(line)) and m.group(1) in _KNOWN:
                line = line.lstrip()  # sloppy translations indent requests: groff would print them
            if line[:1] in (".", "'"):
                m = _REQUEST_RE.match(line)
                name, rest = (m.group(1), m.group(2)) if m else ("", "")
                if name in ("de", "de1", "am", "ig"):
                    end = ".." if name != "ig" or not rest.strip() else "." + rest.split()[0]
                    while i < len(lines) and lines[i].strip() != end:
                        i += 1
                    i += 1
                elif name in ("if", "ie", "el", "while"):
                    depth = rest.count("\\{") - rest.count("\\}")
                    while depth > 0 and i < len(lines):
                        depth += lines[i].count("\\{") - lines[i].count("\\}")
                        i += 1
                elif name == "TS":
                    i = self.table(lines, i)
                elif name:
                    self.request(name, rest)
            elif not line.strip():
                if self.fill:
                    self.blank()
                else:
                    self.out.append("")
            else:
                glue_next = line.rstrip().endswith("\\c")
                text = self.unescape(line.rstrip()[:-2] if glue_next else line)
                # roff breaks before an indented line; one stray space (common in zh_CN
                # translations, e.g. " 。") is not meant as a break.
                self.text(text, raw_leading_space=line.startswith(("  ", "\t")))
                self.glue = glue_next
        self.flush()
        return "\n".join(self.out)

    def table(self, lines: list[str], i: int) -> int:
        """tbl(1) block: skip options and format lines, keep cell text tab-separated."""
        self.flush()
        if i < len(lines) and lines[i].rstrip().endswith(";"):
            i += 1  # global options
        while i < len(lines) and not lines[i].startswith(".TE"):
            i += 1  # format lines; the last one ends with "."
            if lines[i - 1].rstrip().endswith("."):
                break
        while i < len(lines) and not lines[i].startswith(".TE"):
            row = lines[i]
            i += 1
            if row.strip() in ("_", "=") or row.startswith((".", "'")):
                continue
            row = row.replace("T{", "").replace("T}", "")
            if row.strip():
                self.out.append(self.unescape(row))
        return i + 1


def extract_roff(raw: str, cfg: ExtractConfig) -> str:
    """Readable text of a man page (``.TH/.SH/.TP/.B/...`` markup, ``\\f`` escapes)."""
    del cfg  # nothing configurable yet; the signature matches the other extractors
    return _Roff().run(raw)
