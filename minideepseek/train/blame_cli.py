"""``.venv/bin/python report.py blame RUN --step N | --doc ID``: the step ledger (train/ledger.py, train/blame.py).

Writes ``reports/<run>/blame/step-<N>.{md,json}`` or ``doc-<id>.{md,json}`` (``--out DIR`` elsewhere)
and prints the Markdown. Exit 0; 4 when a rebuilt step does not match what stage 5 recorded.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import time
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..fsio import write_json_atomic, write_text_atomic
from ..pipeline import TOKENIZER

EXIT_MISMATCH = 4


def add_blame_parser(sub: Any, add_common: Any) -> None:
    b = sub.add_parser("blame", help="which documents trained step N, or where document ID was trained",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("run")
    what = b.add_mutually_exclusive_group(required=True)
    what.add_argument("--step", type=int, help="an optimizer step (1-based): rebuild, verify, list its documents")
    what.add_argument("--doc", metavar="ID", help="a document id (or your own id): every step, rank and position "
                      "where its tokens were trained, and why any part was not")
    add_common(b, sub=True)


def _file_name(doc: str) -> str:
    """A file name for a document id: readable part + a short hash (ids may hold '/', or anything)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", doc)[:60]
    return f"doc-{safe}-{hashlib.sha1(doc.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def blame_main(args: argparse.Namespace, report_dir: Path, data_dir: Path | None) -> int:
    from .blame import blame_doc, blame_step, doc_markdown, step_markdown
    from .ledger import Replay

    if data_dir is None:
        raise ConfigError(f"no artifacts for run {args.run} under {args.data_dir}/; blame reads data/<run>/ "
                          f"(give --data-dir)")
    t0 = time.time()
    rp = Replay.open(data_dir)
    try:
        tok = _tokenizer(data_dir)
        if args.step is not None:
            r = blame_step(rp, args.step, tok)
            name, md = f"step-{args.step:07d}", step_markdown(r)
        else:
            r = blame_doc(rp, args.doc, tok)
            name, md = _file_name(r["id"]), doc_markdown(r)
    finally:
        rp.close()
    out = Path(args.out) if args.out else report_dir / "blame"
    write_json_atomic(out / f"{name}.json", r)
    write_text_atomic(out / f"{name}.md", md)
    print(md)
    print(f"blame: {out / name}.md ({time.time() - t0:.1f} s)")
    if args.step is not None and not r["verified"] and not r["unrecorded"]:
        print(f"blame: step {args.step} rebuilt from the packed data differs from what stage 5 recorded")
        return EXIT_MISMATCH
    return 0


def _tokenizer(run_dir: Path) -> Any:
    path = run_dir / TOKENIZER / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))

