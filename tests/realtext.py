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
