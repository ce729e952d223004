"""A per-source filter chain built from the YAML ``filters:`` list.

    sources:
      - name: fineweb_edu
        filters:
          - {type: url}
          - {type: langid, languages: [en], threshold: 0.65}
          - {type: gopher_quality}
          - {type: c4, filter_no_terminal_punct: false}   # FineWeb's setting
          - {type: pii}

Filters run in the listed order; the first drop decides (the report attributes each dropped document
to exactly one rule). By default it also ends the chain; with ``full=True`` (``sampler.signals: full``)
every later filter still runs, so the signal store has every rule's signal and verdict for every
document (the decision is the same either way). Modifiers (c4 line removal, pii) rewrite the text seen
by the filters after them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import ConfigError, build
from .base import FILTERS, DocContext


@dataclass
class ChainOutcome:
    text: str
    keep: bool
    filter: str = ""  # the filter that dropped the doc
    reason: str = ""
    signals: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # "filter.count_name" -> n, for kept docs
    modified_by: list[str] = field(default_factory=list)
    verdicts: list[str | None] = field(default_factory=list)  # per filter: its drop reason, "" kept, None not run
    measured: dict[str, Any] = field(default_factory=dict)  # exact values behind rounded signals


class FilterChain:
    def __init__(self, specs: tuple[dict, ...], where: str) -> None:
        self.filters = []
        for i, spec in enumerate(specs):
            spec = dict(spec)
            kind = spec.pop("type", None)
            if kind not in FILTERS:
                raise ConfigError(f"{where}.filters[{i}].type={kind!r}: choose one of {sorted(FILTERS)}")
            cls = FILTERS[kind]
            self.filters.append(cls(build(cls.Config, spec, f"{where}.filters[{i}]({kind})")))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.filters]

    def __call__(self, text: str, ctx: DocContext, full: bool = False) -> ChainOutcome:
        out = ChainOutcome(text=text, keep=True, verdicts=[None] * len(self.filters))
        for i, f in enumerate(self.filters):
            res = f(out.text, ctx)
            out.signals.update(res.signals)
            out.measured.update(res.measured)
            if res.text is not None and res.text != out.text:
                out.text = res.text
                out.modified_by.append(f.name)
            if out.keep:  # a dropped document's later modifications are not counted as the kept docs' changes
                for k, v in res.counts.items():
                    if v:
                        out.counts[f"{f.name}.{k}"] = out.counts.get(f"{f.name}.{k}", 0) + v
            out.verdicts[i] = res.reason if not res.keep else ""
            if not res.keep and out.keep:
                out.keep, out.filter, out.reason = False, f.name, res.reason
            if not out.text.strip():
                out.verdicts[i] = out.verdicts[i] or "empty_after_filter"
                if out.keep:
                    out.keep, out.filter, out.reason = False, f.name, "empty_after_filter"
                return out  # nothing left to measure
            if not out.keep and not full:
                return out
        return out
