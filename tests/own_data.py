"""A new user's folder of their own JSONL documents, made from real text that ships offline: ~110 English
notes (stdlib docstrings) and ~90 Chinese notes (paragraphs of 三国演义 from the demo corpus, public
domain), each with the user's own ``id`` (``en-001``, ``zh-001``) and a ``url``. Used by the "use your own
data" tests and walkthrough (configs/local_example.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

from realtext import stdlib_docstrings


def chinese_paragraphs(n: int, min_chars: int = 120, max_chars: int = 900) -> list[str]:
    """``n`` paragraphs of 三国演义 from the demo corpus's zh domain (its sanguo component), in order."""
    from minideepseek.demo_corpus import build_demo_corpus

    out: list[str] = []
    for rec in build_demo_corpus().iter_domain("zh"):
        if rec.get("component") != "sanguo":
            continue
        for para in rec["raw"].split("\n"):
            para = para.strip()
            if min_chars <= len(para) <= max_chars:
                out.append(para)
                if len(out) == n:
                    return out
    return out


def write_notes(folder: Path, n_en: int = 110, n_zh: int = 90) -> dict[str, int]:
    """Write ``en.jsonl`` and ``zh.jsonl`` into ``folder``; returns the document count per file."""
    folder.mkdir(parents=True, exist_ok=True)
    en = [d for _, d in stdlib_docstrings(n_en, 300, 4000, unique=True)]
    zh = chinese_paragraphs(n_zh)
    with (folder / "en.jsonl").open("w", encoding="utf-8") as fh:
        for i, text in enumerate(en, 1):
            fh.write(json.dumps({"id": f"en-{i:03d}", "text": text, "url": f"https://notes.example.org/en/{i}"}) + "\n")
    with (folder / "zh.jsonl").open("w", encoding="utf-8") as fh:
        for i, text in enumerate(zh, 1):
            fh.write(json.dumps({"id": f"zh-{i:03d}", "text": text, "url": f"https://notes.example.org/zh/{i}"},
                                ensure_ascii=False) + "\n")
    return {"en.jsonl": len(en), "zh.jsonl": len(zh)}


if __name__ == "__main__":  # python tests/own_data.py DIR: make the folder for a manual walkthrough
    import sys

    print(write_notes(Path(sys.argv[1])))
