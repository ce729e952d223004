"""Stage 2's decisions in isolation: banding for recall, the keep policies, decontamination's best match."""

import json

import pytest
from realtext import stdlib_docstrings

from minideepseek.crossdedup.decontam import BenchmarkSpec, ContaminationIndex, DecontamConfig
from minideepseek.crossdedup.keep import greedy_keep, kept_edges, transitive_keep
from minideepseek.dedup import lsh_params, recall_params, s_curve


@pytest.mark.parametrize("threshold,num_perm", [(0.8, 128), (0.7, 128), (0.9, 256), (0.85, 64), (0.5, 128)])
def test_recall_banding_reaches_the_threshold_with_fewest_false_candidates(threshold, num_perm):
    b, r = recall_params(threshold, num_perm, 0.99)
    assert b * r <= num_perm
    assert s_curve(threshold, b, r) >= 0.99
    # every other feasible banding has at least as many expected candidates below the threshold
    from minideepseek.dedup.lsh import _false_positive

    fp = _false_positive(threshold, b, r)
    for bb in range(1, num_perm + 1):
        for rr in range(1, num_perm // bb + 1):
            if s_curve(threshold, bb, rr) >= 0.99:
                assert _false_positive(threshold, bb, rr) >= fp - 1e-12
    # datasketch's optimum misses far more at the threshold
    assert s_curve(threshold, *lsh_params(threshold, num_perm)) < s_curve(threshold, b, r)


def test_recall_banding_falls_back_to_most_recall_when_unreachable():
    b, r = recall_params(0.8, 4, 0.999)  # 4 permutations cannot reach 0.999 at J = 0.8
    assert s_curve(0.8, b, r) == max(s_curve(0.8, bb, rr) for bb in range(1, 5) for rr in range(1, 4 // bb + 1))


def test_greedy_never_chains_and_transitive_does():
    # chain 0 ~ 1 ~ 2 ~ 3 (0 and 2 are not near duplicates); rank = index
    edges = [(0, 1, 0.85), (1, 2, 0.82), (2, 3, 0.9)]
    rank = [0, 1, 2, 3]
    g = greedy_keep(edges, rank)
    assert g == {1: (0, 0.85), 3: (2, 0.9)}  # 0 and 2 kept: no verified edge between them
    assert kept_edges(edges, g) == []
    t = transitive_keep(edges, rank)
    assert t == {1: 0, 2: 0, 3: 0}  # 2 and 3 "duplicate" 0 without any edge to it
    # a removed document names the kept neighbour with the highest Jaccard
    g2 = greedy_keep([(0, 5, 0.81), (1, 5, 0.95)], [0, 1, 9, 9, 9, 2])
    assert g2 == {5: (1, 0.95)}


def test_greedy_respects_rank_not_index():
    edges = [(0, 1, 0.9)]
    assert greedy_keep(edges, {0: 1, 1: 0}) == {0: (1, 0.9)}


def test_decontam_names_the_item_with_the_largest_overlap(tmp_path):
    docs = [d for _, d in stdlib_docstrings(40, 600, 3000, unique=True)]
    small, big = docs[0], docs[1]
    # item A shares only its first sentence-ish words with the document, item B shares much more
    words_big = big.split()
    item_a = " ".join(small.split()[:30])
    item_b = " ".join(words_big[:60])
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "A", "text": item_a}) + "\n" + json.dumps({"id": "B", "text": item_b}) + "\n")
    idx = ContaminationIndex(DecontamConfig(ngram=8, benchmarks=(
        BenchmarkSpec(name="b", type="jsonl", path=str(bench), id_field="id"),)))
    # the document contains item A first (whole), then part of item B (40 of its 60 words)
    doc = item_a + "\nunrelated filler words here\n" + " ".join(words_big[:40])
    hits = idx.scan("d", "web", doc)
    assert [h.item_id for h in hits] == ["B", "A"]  # B: more shared n-grams, although A comes first
    best = hits[0]
    assert best.matches == max(h.matches for h in hits)
    assert 0 < best.share <= 1 and best.item_ngrams > 0
    a = next(h for h in hits if h.item_id == "A")
    assert a.share == 1.0  # all of A's n-grams are in the document
