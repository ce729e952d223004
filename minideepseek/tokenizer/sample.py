"""Training sample and the two held-out splits, per source.

1. **Out-of-component** held-out: per source, whole corpus components (a demo-corpus package, a URL
   host, a local file: :func:`component_of`) are held out in a seeded order, as many as fit in
   ``component_heldout_fraction`` of the source's characters (the smallest one when none fits; none
   when the source has a single component). Text from a package the tokenizer never saw is what a
   user's own data looks like; documents drawn at random from trained-on packages flatter it (their
   boilerplate, names and idioms were learned).
2. **Random** held-out: of the remaining documents, in a seeded order, the first 5% (at least 10, at
   most 200) — the previous split, reported separately so the difference is visible.

Neither is ever trained on. Of the rest, ``sample_ratio`` goes into the training sample, topped up to
``min_chars_per_source`` characters when a small source would otherwise be under-represented (the
floor is what keeps Chinese or math from vanishing under a dominant English source). Above
``max_train_chars`` in all, every source keeps the same share of its sample (a prefix of the same
seeded order, the floor still kept), so the ceiling bounds stage 3 without changing the mix. The seed's
every-10th-row sample is computed alongside for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ..records import trace_component
from ..rng import rng_for
from .config import TokenizerConfig

# stage 1 writes "source:<source>:<component or format>" as the first audit entry; a format name
# there means the source has no component of its own (hf / local) and the URL decides
_FORMATS = frozenset({"text", "code", "html", "wikitext", "roff", "tex", "markdown", "json", "jsonl", "parquet"})


def component_of(first_trace: str, url: str) -> str:
    """The corpus component a document comes from: the demo package recorded by stage 1, else the URL's
    host (web pages), else the file (``file://`` records of a local source, line anchors dropped), else
    the URL's scheme + first path segment (``deb://package/...``)."""
    comp = trace_component([first_trace])
    if comp and comp not in _FORMATS:
        return comp
    if not url:
        return ""
    u = urlsplit(url)
    if u.scheme in ("http", "https"):
        return u.netloc.lower()
    if u.scheme == "file":
        return "file:" + u.path
    return f"{u.scheme}:{u.netloc}" if u.netloc else url.split("#")[0]


@dataclass
class Split:
    train: list[int] = field(default_factory=list)
    heldout: list[int] = field(default_factory=list)  # random documents of trained-on components
    heldout_component: list[int] = field(default_factory=list)  # whole components never trained on
    components_heldout: list[str] = field(default_factory=list)


def _pick_components(cfg: TokenizerConfig, seed: int, name: str, idx: np.ndarray, comps: list[str],
                     chars: np.ndarray) -> list[str]:
    size: dict[str, int] = {}
    for i in idx:
        size[comps[i]] = size.get(comps[i], 0) + int(chars[i])
    names = sorted(c for c in size if c)
    if len(names) < 2 or cfg.component_heldout_fraction <= 0:
        return []
    budget = cfg.component_heldout_fraction * int(chars[idx].sum())
    order = [names[j] for j in rng_for(seed, "tokenizer-components", name).permutation(len(names))]
    picked: list[str] = []
    used = 0
    for c in order:
        if used + size[c] <= budget and len(picked) < len(names) - 1:
            picked.append(c)
            used += size[c]
    if not picked:  # every component is bigger than the budget: the smallest one still makes the point
        picked = [min(names, key=lambda c: (size[c], c))]
    return sorted(picked)


def stratified_split(cfg: TokenizerConfig, seed: int, sources: list[str], n_chars: list[int],
                     components: list[str] | None = None) -> tuple[dict[str, Split], dict[str, Any]]:
    by_source: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        by_source.setdefault(s, []).append(i)
    comps = components if components is not None else [""] * len(sources)
    chars = np.asarray(n_chars, dtype=np.int64)
    naive_mask = np.zeros(len(sources), dtype=bool)
    naive_mask[::10] = True  # the seed's dataset.select(range(0, len(dataset), 10))
    out: dict[str, Split] = {}
    stats: dict[str, Any] = {}
    rests: dict[str, np.ndarray] = {}
    takes: dict[str, int] = {}
    pre_stats: dict[str, tuple[np.ndarray, list[str], np.ndarray, np.ndarray]] = {}
    for name in sorted(by_source):
        all_idx = np.asarray(by_source[name])
        held_comps = _pick_components(cfg, seed, name, all_idx, comps, chars)
        in_held = np.array([comps[i] in held_comps for i in all_idx], dtype=bool)
        held_c, idx = all_idx[in_held], all_idx[~in_held]
        order = idx[rng_for(seed, "tokenizer-sample", name).permutation(len(idx))]
        k = int(min(cfg.heldout_max_docs, max(cfg.heldout_min_docs, round(cfg.heldout_fraction * len(idx)))))
        k = min(k, max(0, len(idx) - 1))  # keep at least one document to train on
        held, rest = order[:k], order[k:]
        take = int(round(cfg.sample_ratio * len(rest)))
        cum = np.cumsum(chars[rest])
        if take < len(rest) and (take == 0 or cum[take - 1] < cfg.min_chars_per_source):
            take = max(take, int(np.searchsorted(cum, cfg.min_chars_per_source)) + 1)
        take = min(take, len(rest))
        rests[name], takes[name] = rest, take
        out[name] = Split(heldout=sorted(held.tolist()), heldout_component=sorted(held_c.tolist()),
                          components_heldout=held_comps)
        pre_stats[name] = (all_idx, held_comps, held_c, held)
    total = sum(int(chars[rests[n][:takes[n]]].sum()) for n in rests)
    scale = cfg.max_train_chars / total if cfg.max_train_chars and total > cfg.max_train_chars else 1.0
    for name in sorted(by_source):
        all_idx, held_comps, held_c, held = pre_stats[name]
        rest, take = rests[name], takes[name]
        uncapped = take
        if scale < 1.0 and take:  # the same share of every source's sample: a prefix of its order
            cum = np.cumsum(chars[rest[:take]])
            have = float(cum[-1])
            want = max(scale * have, min(float(cfg.min_chars_per_source), have))
            take = min(take, int(np.searchsorted(cum, want)) + 1)
        train = sorted(rest[:take].tolist())
        out[name].train = train
        naive = all_idx[naive_mask[all_idx]]
        stats[name] = {
            "docs": len(all_idx), "components": len({comps[i] for i in all_idx}),
            "components_heldout": held_comps, "heldout_component_docs": len(held_c),
            "heldout_component_chars": int(chars[held_c].sum()),
            "heldout_docs": len(held), "heldout_chars": int(chars[held].sum()),
            "train_docs": len(train), "train_chars": int(chars[train].sum()),
            "floor_applied": uncapped > int(round(cfg.sample_ratio * len(rest))),
            "capped_from_docs": uncapped if take < uncapped else None,
            "every_10th_docs": int(len(naive)), "every_10th_chars": int(chars[naive].sum()),
        }
    tot = sum(v["train_chars"] for v in stats.values()) or 1
    tot10 = sum(v["every_10th_chars"] for v in stats.values()) or 1
    for v in stats.values():
        v["train_char_share"] = round(v["train_chars"] / tot, 4)
        v["every_10th_char_share"] = round(v["every_10th_chars"] / tot10, 4)
    return out, stats
