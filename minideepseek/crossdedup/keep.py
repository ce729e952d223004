"""Which near duplicates stage 2 removes, given the verified edges (pairs with Jaccard >= threshold).

Two policies over the same edges and the same keep order (source priority, then longest, then
smallest id: ``rank[i]`` is document i's position in that order, lower keeps first):

- ``greedy`` (default): visit documents in keep order; keep each one unless it has a verified edge
  to a document already kept, in which case it is removed *as a duplicate of that kept document*
  (the kept neighbour with the highest Jaccard). So every removal has a kept partner at or above
  the threshold, and no two kept documents share a verified edge. A chain A~B~C with A and C below
  the threshold keeps A and C.
- ``transitive``: union-find over the edges, one kept document per connected component (the best
  ranked) -- the classic pipeline. Chains remove documents that are far from the survivor: their
  Jaccard to it can be well below the threshold.

Both are pure functions of (edges, rank), so the local and the Ray engines, which produce the same
edges, remove the same documents.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .unionfind import UnionFind

Edge = tuple[int, int, float]  # (doc a, doc b, verified Jaccard)


def greedy_keep(edges: Sequence[Edge], rank: Sequence[int] | np.ndarray) -> dict[int, tuple[int, float]]:
    """removed doc -> (kept partner, its verified Jaccard) under the greedy policy."""
    adj: dict[int, list[tuple[int, float]]] = {}
    for a, b, j in edges:
        adj.setdefault(a, []).append((b, j))
        adj.setdefault(b, []).append((a, j))
    kept: set[int] = set()
    removed: dict[int, tuple[int, float]] = {}
    for d in sorted(adj, key=lambda x: rank[x]):
        partners = [(j, -int(rank[nb]), nb) for nb, j in adj[d] if nb in kept]
        if partners:
            j, _, nb = max(partners)  # the closest kept twin; ties: the better-ranked one
            removed[d] = (nb, j)
        else:
            kept.add(d)
    return removed


def transitive_keep(edges: Sequence[Edge], rank: Sequence[int] | np.ndarray) -> dict[int, int]:
    """removed doc -> the kept document of its union-find component (no Jaccard bound between them)."""
    nodes = sorted({a for a, _, _ in edges} | {b for _, b, _ in edges})
    pos = {d: k for k, d in enumerate(nodes)}
    uf = UnionFind(len(nodes))
    for a, b, _ in edges:
        uf.union(pos[a], pos[b])
    removed: dict[int, int] = {}
    for members in uf.clusters().values():
        docs = [nodes[m] for m in members]
        keep = min(docs, key=lambda x: rank[x])
        removed.update({d: keep for d in docs if d != keep})
    return removed


def kept_edges(edges: Sequence[Edge], removed: set[int] | dict) -> list[Edge]:
    """Verified edges whose two documents both survive (the residual check expects none)."""
    return [(a, b, j) for a, b, j in edges if a not in removed and b not in removed]
