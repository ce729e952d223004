"""Drift flags between two runs, each rule with a threshold the user can set
(``report.py compare A B --threshold token_share_pp=2``).

The rules follow what the seed's dashboard section says to watch for: a source whose document
count holds still while its token count moves (longer documents, or a filter that changed), a dedup
rate that jumps (templated pages), a shift in languages, code or math, a tokenizer that compresses a
domain worse, unbalanced shards, new contamination hits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .. import pipeline
from ..config import ConfigError, require


@dataclass(frozen=True)
class Thresholds:
    token_share_pp: float = 1.0  # a source's token share (stage 1, DeepSeek tokens) moves more than this ...
    docs_steady_rel: float = 0.05  # ... while its document count moves less than this: "tokens without docs"
    doc_share_pp: float = 1.0  # a source's document share moves
    dedup_rate_pp: float = 2.0  # a source's (or the overall) dedup rate moves
    length_p50_rel: float = 0.2  # median document length of a source changes by this fraction
    lang_share_pp: float = 2.0  # a language's share of documents moves
    code_share_pp: float = 2.0
    math_share_pp: float = 2.0
    compression_rel: float = 0.05  # our tokens/char on a domain's held-out text changes by this fraction
    shard_bytes_rel: float = 0.25  # the largest packed shard changes by this fraction
    wall_ratio: float = 2.0  # a stage takes this many times longer (or shorter); noisy machines: informative

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            require(getattr(self, f.name) > 0, f"--threshold {f.name}={getattr(self, f.name)} must be > 0")

    @classmethod
    def parse(cls, items: list[str]) -> Thresholds:
        names = {f.name for f in dataclasses.fields(cls)}
        kw: dict[str, float] = {}
        for item in items:
            key, _, val = item.partition("=")
            if key not in names or not val:
                raise ConfigError(f"--threshold {item!r}: use NAME=NUMBER with NAME one of {sorted(names)}")
            try:
                kw[key] = float(val)
            except ValueError:
                raise ConfigError(f"--threshold {item!r}: {val!r} is not a number") from None
        return cls(**kw)


def _flag(rule: str, where: str, a: Any, b: Any, detail: str) -> dict[str, Any]:
    return {"rule": rule, "where": where, "a": a, "b": b, "detail": detail}


def _rel(a: float, b: float) -> float:
    return abs(b - a) / abs(a) if a else (0.0 if not b else float("inf"))


def drift_flags(a: dict[str, Any], b: dict[str, Any], th: Thresholds) -> list[dict[str, Any]]:
    flags: list[dict[str, Any]] = []
    for s in sorted(set(a["sources"]) | set(b["sources"])):
        sa, sb = a["sources"].get(s), b["sources"].get(s)
        if sa is None or sb is None:
            flags.append(_flag("source_set", s, sa is not None, sb is not None, "source present in only one run"))
            continue
        dtok = 100 * (sb["share_tokens"] - sa["share_tokens"])
        ddoc = 100 * (sb["share_docs"] - sa["share_docs"])
        docs_rel = _rel(sa["docs"], sb["docs"])
        if abs(dtok) > th.token_share_pp and docs_rel < th.docs_steady_rel:
            flags.append(_flag("tokens_without_docs", s, sa["share_tokens"], sb["share_tokens"],
                               f"token share {dtok:+.2f} pp while documents moved only {100 * docs_rel:.1f}% "
                               f"({sa['docs']:,} -> {sb['docs']:,}): longer/shorter documents or a changed filter"))
        elif abs(dtok) > th.token_share_pp:
            flags.append(_flag("token_share", s, sa["share_tokens"], sb["share_tokens"],
                               f"token share {dtok:+.2f} pp (target {100 * sa['target_share']:.1f}% -> "
                               f"{100 * sb['target_share']:.1f}%)"))
        if abs(ddoc) > th.doc_share_pp:
            flags.append(_flag("doc_share", s, sa["share_docs"], sb["share_docs"], f"document share {ddoc:+.2f} pp"))
    da, db = a.get("dedup"), b.get("dedup")
    if da and db:
        for s in sorted(set(da["per_source"]) & set(db["per_source"])):
            d = 100 * (db["per_source"][s] - da["per_source"][s])
            if abs(d) > th.dedup_rate_pp:
                flags.append(_flag("dedup_rate", s, da["per_source"][s], db["per_source"][s], f"dedup rate {d:+.2f} pp"))
    pa_, pb_ = a.get("profile", {}), b.get("profile", {})
    for s in sorted(set(pa_) & set(pb_)):
        x, y = pa_[s], pb_[s]
        if x.get("p50") and _rel(x["p50"], y["p50"]) > th.length_p50_rel:
            flags.append(_flag("length_p50", s, x["p50"], y["p50"], f"median length {x['p50']:,.0f} -> "
                                                                     f"{y['p50']:,.0f} chars"))
        for key, lim in (("code", th.code_share_pp), ("math", th.math_share_pp)):
            d = 100 * (y[key] - x[key])
            if abs(d) > lim:
                flags.append(_flag(f"{key}_share", s, x[key], y[key], f"{key} documents {d:+.2f} pp"))
    la, lb = a.get("profile_overall", {}).get("lang", {}), b.get("profile_overall", {}).get("lang", {})
    for lang in sorted(set(la) | set(lb)):
        d = 100 * (lb.get(lang, 0.0) - la.get(lang, 0.0))
        if abs(d) > th.lang_share_pp:
            flags.append(_flag("lang_share", lang, la.get(lang, 0.0), lb.get(lang, 0.0), f"language share {d:+.2f} pp"))
    ta, tb = a.get(pipeline.TOKENIZER), b.get(pipeline.TOKENIZER)
    if ta and tb:
        for s in sorted(set(ta["per_source"]) & set(tb["per_source"])):
            x, y = ta["per_source"][s].get("ours"), tb["per_source"][s].get("ours")
            if x and y and _rel(x, y) > th.compression_rel:
                flags.append(_flag("compression", s, x, y, f"our tokens/char {x:.3f} -> {y:.3f} "
                                                           f"({100 * (y - x) / x:+.1f}%)"))
    ka, kb = a.get("packing"), b.get("packing")
    if ka and kb and ka["shard_bytes"] and kb["shard_bytes"]:
        x, y = max(ka["shard_bytes"]), max(kb["shard_bytes"])
        if _rel(x, y) > th.shard_bytes_rel or len(ka["shard_bytes"]) != len(kb["shard_bytes"]):
            flags.append(_flag("shards", pipeline.PACKED, [len(ka["shard_bytes"]), x], [len(kb["shard_bytes"]), y],
                               f"{len(ka['shard_bytes'])} shards (max {x / 2**20:.2f} MiB) -> {len(kb['shard_bytes'])} "
                               f"(max {y / 2**20:.2f} MiB)"))
    ca, cb = a.get("contamination_hits"), b.get("contamination_hits")
    if ca is not None and cb is not None and cb > ca:
        flags.append(_flag("contamination", "benchmarks", ca, cb, f"contamination hits {ca} -> {cb}"))
    ra, rb = a.get("certificate"), b.get("certificate")
    if ra and rb and ra["passed"] and not rb["passed"]:  # a step that found its canaries no longer does
        flags.append(_flag("certificate", "canaries", ra["line"], rb["line"], f"recall certificate {rb['line']}"))
    for stage in a.get("wall_s", {}):
        x, y = a["wall_s"].get(stage), b.get("wall_s", {}).get(stage)
        if x and y and max(x, y) / max(min(x, y), 1e-9) > th.wall_ratio and max(x, y) > 5:
            flags.append(_flag("wall_time", stage, x, y, f"{x:.1f} s -> {y:.1f} s (informative: shared machines are "
                                                         f"noisy)"))
    return flags
