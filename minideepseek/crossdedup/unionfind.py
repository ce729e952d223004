"""Union-find over document indices (path halving + union by size), numpy-backed."""

from __future__ import annotations

import numpy as np


class UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = np.arange(n, dtype=np.int64)
        self.size = np.ones(n, dtype=np.int64)

    def find(self, x: int) -> int:
        p = self.parent
        while p[x] != x:
            p[x] = p[p[x]]
            x = int(p[x])
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]

    def clusters(self) -> dict[int, list[int]]:
        """root -> members (sorted), only for clusters with more than one member."""
        out: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            r = self.find(i)
            if self.size[r] > 1:
                out.setdefault(r, []).append(i)
        return out
