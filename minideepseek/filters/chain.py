"""A per-source filter chain built from the YAML ``filters:`` list.

    sources:
      - name: fineweb_edu
        filters:
          - {type: url}
          - {type: langid, languages: [en], threshold: 0.65}
          - {type: gopher_quality}
          - {type: c4, filter_no_terminal_punct: false}   # FineWeb's setting
          - {type: pii}

Filters run in the listed order; the first drop ends the chain (later filters do not run, so the
report attributes each dropped document to exactly one rule). Modifiers (c4 line removal, pii)
rewrite the text seen by the filters after them.
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

    def __call__(self, text: str, ctx: DocContext) -> ChainOutcome:
        out = ChainOutcome(text=text, keep=True)
        for f in self.filters:
            res = f(out.text, ctx)
            out.signals.update(res.signals)
            if res.text is not None and res.text != out.text:
                out.text = res.text
                out.modified_by.append(f.name)
            for k, v in res.counts.items():
                if v:
                    out.counts[f"{f.name}.{k}"] = out.counts.get(f"{f.name}.{k}", 0) + v
            if not res.keep:
                out.keep, out.filter, out.reason = False, f.name, res.reason
                return out
            if not out.text.strip():
                out.keep, out.filter, out.reason = False, f.name, "empty_after_filter"
                return out
        return out
