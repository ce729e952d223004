"""The filter interface of the ingestion path (stage 1, before the recipe quota is counted).

A filter is configured per source in the YAML (``sources[i].filters: [{type: NAME, ...params}]``),
built from a frozen config dataclass whose defaults are the published thresholds, and called once
per document. It returns a :class:`FilterResult`: keep or drop with a short reason, the values it
measured (stored in the document's ``quality_signals``), and, for modifiers (C4 line removal, PII
redaction), the rewritten text and counts of what changed.

Filters are pure (no global state), so a process pool or a Ray executor can run them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol


@dataclass
class FilterResult:
    keep: bool
    reason: str = ""  # "" when kept; snake_case when dropped, e.g. "short_doc", "low_lang_score"
    signals: dict[str, Any] = field(default_factory=dict)  # measured values, JSON-able scalars
    text: str | None = None  # modifiers: the new text (None = unchanged)
    counts: dict[str, int] = field(default_factory=dict)  # modifiers: e.g. {"lines_removed": 3}
    # exact values behind rounded ``signals`` (the signal store keeps these, so a decision recomputed from
    # the store by the filter's ``decide`` is the filter's own); empty: ``signals`` are exact
    measured: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DocContext:
    """What a filter may look at besides the text."""

    url: str = ""
    source: str = ""
    expected_lang: str = ""  # the source's `lang:` ("en", "zh", "code", ...)


class DocFilter(Protocol):
    name: ClassVar[str]  # the YAML `type:`
    Config: ClassVar[type]  # frozen dataclass of parameters; defaults are the published values

    def __init__(self, cfg: Any) -> None: ...

    def __call__(self, text: str, ctx: DocContext) -> FilterResult: ...


# A filter whose verdict is a pure function of what it measured also has
#     @staticmethod
#     def decide(signals: dict[str, Any], cfg: Config) -> str   # the drop reason, "" to keep
# and calls it itself in ``__call__``. The what-if planner (sampling/whatif.py) re-decides stored signals
# with new parameters through it, so a prediction and a rerun run the same decision code.


FILTERS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make a filter available under its ``name`` in configs."""
    FILTERS[cls.name] = cls
    return cls
