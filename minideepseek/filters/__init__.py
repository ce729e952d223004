"""Quality and safety filters of the ingestion path; importing this package registers them all."""

from . import (  # noqa: F401  (registration side effects)
    code,
    langid,
    pii,
    quality,
    text_rules,  # noqa: F401
    url,
)
from .base import FILTERS, DocContext, FilterResult, register
from .chain import ChainOutcome, FilterChain

__all__ = ["FILTERS", "ChainOutcome", "DocContext", "FilterChain", "FilterResult", "register"]
