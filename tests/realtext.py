"""Small real texts for the tests: docstrings of the running interpreter's stdlib (real English
prose, always available offline)."""

import ast
import sysconfig
from pathlib import Path

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def stdlib_docstrings(limit: int, min_len: int, max_len: int, unique: bool = False) -> list[tuple[str, str]]:
    """(qualified name, docstring) of stdlib functions and classes, files in sorted order; stops after
    the file that reaches ``limit``. ``unique`` skips a docstring already taken."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for p in sorted(STDLIB.glob("*.py")):
        try:
            tree = ast.parse(p.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if doc and min_len < len(doc) < max_len and not (unique and doc in seen):
                    out.append((f"{p.stem}.{node.name}", doc))
                    seen.add(doc)
        if len(out) >= limit:
            break
    return out[:limit]


def real_texts() -> dict[str, list[str]]:
    """A few real documents per evaluation domain, all shipped with the interpreter or the pinned
    packages (offline): English stdlib docstrings, stdlib source code, mpmath's LaTeX-bearing function
    docs (math), sympy's printing docs (academic-style LaTeX prose), and CPython's Chinese CJK-codec
    test texts (GB2312/GBK/Big5 sample prose, traditional and simplified, full-width punctuation)."""
    import mpmath.function_docs as fd
    from sympy.printing.latex import LatexPrinter, latex

    cjk = STDLIB / "test" / "cjkencodings"
    zh = [p.read_text(encoding="utf-8") for p in sorted(cjk.glob("*-utf8.txt"))
          if p.name.split("-")[0] in ("gb2312", "gbk", "big5", "gb18030")]
    math = [v for k, v in sorted(vars(fd).items()) if isinstance(v, str) and "\\" in v][:20]
    return {"english": [d for _, d in stdlib_docstrings(20, 200, 3000)],
            "code": [(STDLIB / f).read_text(encoding="utf-8") for f in ("textwrap.py", "bisect.py", "heapq.py")],
            "math": math,
            "academic": [d for d in (latex.__doc__, LatexPrinter.__doc__, LatexPrinter._print_Integral.__doc__) if d],
            "chinese": zh}
