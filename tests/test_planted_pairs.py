"""The planted-pair benchmark, small: real text (stdlib docstrings) edited to known exact Jaccard by
every edit kind, run through the real stage 2 with its default configuration."""

import pytest
from realtext import stdlib_docstrings

from minideepseek.crossdedup.planted import EDIT_KINDS, build_pairs, run_stage, score

LEVELS = (0.5, 0.65, 0.74, 0.78, 0.82, 0.86, 0.9)


@pytest.fixture(scope="module")
def planted():
    docs = [d for _, d in stdlib_docstrings(600, 600, 4000, unique=True)]
    pairs, stats = build_pairs({"web": docs}, LEVELS, 3, seed=1, width=0.03)
    return pairs, stats


def test_pairs_land_in_their_bins_with_every_edit_kind(planted):
    pairs, stats = planted
    assert stats["short_of_docs"] == 0
    assert {p.kind for p in pairs} == set(EDIT_KINDS)
    for p in pairs:
        assert p.target <= p.jaccard < p.target + 0.03


def test_default_stage2_finds_planted_pairs_and_removes_nothing_below_threshold(planted, tmp_path):
    pairs, _ = planted
    rep, removed = run_stage(pairs, tmp_path)
    s = score(pairs, rep, removed, 0.8, LEVELS, 0.03)
    above = [p for p in pairs if p.jaccard >= 0.82]
    assert len(above) >= 40
    found = {x["id"][:-1] for x in removed}
    recall = sum(f"p{k:05d}" in found for k, p in enumerate(pairs) if p.jaccard >= 0.82) / len(above)
    assert recall >= 0.97, s["missed_at_or_above_threshold"]
    # zero false removals: every near-duplicate removal names a kept document >= the threshold
    assert s["false_removals"] == 0 and s["min_removal_jaccard"] >= 0.8
    assert all(x["reason"] == "near" and x["jaccard"] >= 0.8 for x in removed)
    assert s["residual"]["verified_edges_between_kept"] == 0
    # pairs below 0.78 are never removed as each other's duplicates
    low = {f"p{k:05d}" for k, p in enumerate(pairs) if p.jaccard < 0.78}
    assert not [x for x in removed if x["id"][:-1] in low and x["kept"][:-1] == x["id"][:-1]]
    assert rep["params"]["bands"] == 16 and rep["params"]["rows"] == 6


def test_residual_check_estimates_what_a_strict_banding_misses(planted, tmp_path):
    pairs, _ = planted
    rep, removed = run_stage(pairs, tmp_path, {"bands": 2, "rows": 20})  # P(candidate | J=0.85) ~ 0.08
    res = rep["near"]["residual"]
    missed = sum(1 for k, p in enumerate(pairs) if p.jaccard >= 0.8
                 and not {f"p{k:05d}a", f"p{k:05d}b"} & {x["id"] for x in removed})
    assert missed >= 20
    assert res["verified_edges_between_kept"] == 0
    assert res["exact_at_or_above_threshold"] >= 5 and all(j >= 0.8 for _, _, j in res["found"])
    # found pairs are the planted twins the strict banding missed (stdlib docstrings also hold a few
    # genuine near duplicates of each other: those count too)
    assert sum(a[:-1] == b[:-1] for a, b, _ in res["found"]) >= len(res["found"]) - 2
    assert 0.5 * missed <= res["estimated_missed_near_dups"] <= 2 * missed


def test_transitive_policy_removes_at_least_as_much_and_names_its_survivor(planted, tmp_path):
    pairs, _ = planted
    rep, removed = run_stage(pairs, tmp_path, {"cluster": "transitive", "verify": "estimated"})
    pol = rep["near"]["policy"]
    assert pol["cluster"] == "transitive" and pol["transitive_removes"] >= pol["greedy_removes"]
    assert len([x for x in removed if x["reason"] == "near"]) == pol["transitive_removes"]
    assert all(0 < x["jaccard"] <= 1 for x in removed)
