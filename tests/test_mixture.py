"""The mixture sampler (train/mixture.py): window bound, determinism, resume across a phase switch,
DDP split, per-source epochs, schedule validation, epoch accounting."""

import numpy as np
import pytest

from minideepseek.config import ConfigError
from minideepseek.train.mixture import MixtureSampler, epochs_table, validate_schedule

SOURCES = {"code": np.arange(0, 300), "math": np.arange(1000, 1050), "web": np.arange(5000, 5700)}
SCHED = [(0.8, {"code": 0.3, "math": 0.1, "web": 0.6}), (1.0, {"code": 0.4, "math": 0.4, "web": 0.2})]


def _sampler(world: int = 1, **kw) -> MixtureSampler:
    args = {"sources": SOURCES, "schedule": SCHED, "seed": 5, "max_steps": 50, "micro_batch": 4, "grad_accum": 2,
            "world": world}
    args.update(kw)
    return MixtureSampler(**args)


def _prefix_error(src: np.ndarray, w: np.ndarray) -> float:
    counts = np.cumsum(np.eye(len(w))[src], axis=0)
    n = np.arange(1, len(src) + 1)[:, None]
    return float(np.abs(counts - w[None, :] * n).max())


@pytest.mark.parametrize("case", range(12))
def test_prefix_and_window_bound(case):
    """|c_i(n) - w_i n| <= 1 - 1/(2S-2) for every prefix, hence any window of W slots is within
    2(1 - delta) of w_i W, for random weights (including a zero weight)."""
    rng = np.random.default_rng(case)
    S = int(rng.integers(2, 7))
    w = rng.dirichlet(np.full(S, float(rng.choice([0.3, 1.0, 3.0]))))
    if case % 3 == 0:
        w[0] = 0.0
        w /= w.sum()
    names = [f"s{i}" for i in range(S)]
    weights = {n: float(x) for n, x in zip(names, w)}
    weights[names[-1]] += 1.0 - sum(weights.values())
    m = MixtureSampler({n: np.arange(7) for n in names}, [(1.0, weights)], 0, 600, 4)
    src, _ = m.assign(m.initial(), 2400)
    active = int(np.count_nonzero(w))
    bound = 1 - 1 / (2 * active - 2) if active > 1 else 0.0
    ww = m.phases[0].weights
    assert _prefix_error(src, ww) <= bound + 1e-9
    W = 100
    counts = np.cumsum(np.vstack([np.zeros(S), np.eye(S)[src]]), axis=0)
    win = counts[W:] - counts[:-W]  # every window of W consecutive slots
    assert np.abs(win - ww * W).max() <= 2 * bound + 1e-9
    assert not np.any(src == 0) or w[0] > 0  # a zero-weight source is never drawn


def test_phase_switch_and_shares():
    m = _sampler()
    per_step = 4 * 2
    src, st = m.assign(m.initial(), 50 * per_step)
    assert st.slot == 400 and sum(st.draws) == 400
    p0, p1 = src[:40 * per_step], src[40 * per_step:]  # phase 0 ends at step round(0.8 * 50) = 40
    for part, w in ((p0, SCHED[0][1]), (p1, SCHED[1][1])):
        for i, n in enumerate(m.names):
            assert abs(np.count_nonzero(part == i) - w[n] * len(part)) < 1


def test_pure_function_and_resume_across_phase_switch():
    a, b = _sampler(), _sampler()
    g_all = [a.batch_at(g)[0] for g in range(100)]  # 100 global micro-batches = 50 steps
    # streamed from the start == each batch computed from its index alone (a fresh object)
    st = b.initial()
    for g in range(100):
        samples, _, st = b.micro_batch_at(st)
        assert np.array_equal(samples, g_all[g])
    # resume from a state saved before the phase switch (g=70, switch at g=80), in a new sampler
    c = _sampler()
    st = c.state_at(70)
    for g in range(70, 100):
        samples, _, st = c.micro_batch_at(st)
        assert np.array_equal(samples, g_all[g])


def test_ddp_split_disjoint_and_cursors_cover_epochs():
    m = _sampler(world=2, max_steps=10)
    st = m.initial()
    seen = {0: [], 1: []}
    for g in range(10 * 2 * 2):
        samples, _, st = m.micro_batch_at(st)
        seen[g % 2].append(samples)
    r0, r1 = np.concatenate(seen[0]), np.concatenate(seen[1])
    assert not set(r0.tolist()) & set(r1.tolist())  # no source wraps in 160 slots: disjoint ranks
    # a source's cursor walks a permutation of its samples, then the next epoch's permutation
    small = MixtureSampler({"a": np.arange(10), "b": np.arange(100, 110)}, [(1.0, {"a": 0.5, "b": 0.5})], 1, 10, 4)
    draws = [small.draw(0, k) for k in range(20)]
    assert sorted(draws[:10]) == list(range(10)) == sorted(draws[10:])
    assert draws[:10] != draws[10:]


def test_rank_loader_matches_sampler():
    from minideepseek.train.loader import LoaderState
    from minideepseek.train.mixture import MixtureRankLoader

    class Plan:
        def gather(self, s, _):
            return s

    m = _sampler(world=2)
    loaders = [MixtureRankLoader(Plan(), m, r, LoaderState()) for r in range(2)]
    for g in range(0, 40, 2):
        for r in range(2):
            assert np.array_equal(loaders[r].next_samples(), m.batch_at(g + r)[0])
    resumed = MixtureRankLoader(Plan(), _sampler(world=2), 1, loaders[1].state)
    assert np.array_equal(resumed.next_samples(), m.batch_at(41)[0])


def test_validation_errors():
    names = ["a", "b"]
    with pytest.raises(ConfigError, match="sum to 1"):
        validate_schedule([(1.0, {"a": 0.5, "b": 0.6})], names)
    with pytest.raises(ConfigError, match="unknown source"):
        validate_schedule([(1.0, {"a": 0.5, "zz": 0.5})], names)
    with pytest.raises(ConfigError, match="previous phase"):
        validate_schedule([(0.5, {"a": 1.0}), (0.4, {"a": 1.0}), (1.0, {"b": 1.0})], names)
    with pytest.raises(ConfigError, match="until: 1.0"):
        validate_schedule([(0.5, {"a": 1.0})], names)
    with pytest.raises(ConfigError, match="no training samples"):
        MixtureSampler({"a": np.arange(3), "b": np.arange(0)}, [(1.0, {"a": 0.5, "b": 0.5})], 0, 5, 1)


def test_epochs_table():
    m = _sampler()  # 400 slots: phase 0 = 320, phase 1 = 80, seq_len 10 -> D = 3200 / 800 tokens
    t = epochs_table(m, {"code": 3000, "math": 500, "web": 7000}, seq_len=10, warn_epochs=0.5)
    assert t["math"]["phases"][0]["epochs"] == pytest.approx(0.1 * 3200 / 500)
    assert t["math"]["epochs"] == pytest.approx(0.1 * 3200 / 500 + 0.4 * 800 / 500)
    assert t["math"]["over_warning"] and not t["web"]["over_warning"]


def test_stratified_heldout():
    from minideepseek.train.loader import stratified_heldout

    strata = [(0, 3), (3, 103), (103, 104), (104, 1104)]
    held = stratified_heldout(strata, 16, seed=2)
    assert len(held) == len(set(held.tolist())) == 16
    per = [int(np.count_nonzero((held >= lo) & (held < hi))) for lo, hi in strata]
    assert per[0] >= 1 and per[1] >= 1 and per[2] == 0 and per[3] > per[1]  # a 1-block source keeps its block
    assert np.array_equal(held, stratified_heldout(strata, 16, seed=2))


def test_phase_ends_as_fraction_step_or_tokens():
    """A phase may end at a fraction of the run, an absolute step or a number of training tokens; all
    three give the sampler the same schedule, and an end outside the run is a config error."""
    from minideepseek.config import build
    from minideepseek.train.config import MixturePhase, TrainConfig

    w = {"code": 1.0}
    per_step = 4 * 2 * 1 * 256  # micro_batch x grad_accum x world x seq_len
    ends = [MixturePhase(until=0.6, weights=w), MixturePhase(until_step=30, weights=w),
            MixturePhase(until_tokens=30 * per_step + 100, weights=w)]
    assert {p.fraction(50, per_step) for p in ends} == {0.6}
    with pytest.raises(ConfigError, match="outside the run's steps 1-50"):
        MixturePhase(until_step=51, weights=w).fraction(50, per_step)
    with pytest.raises(ConfigError, match="exactly one of until"):
        MixturePhase(until=0.5, until_step=3, weights=w)
    tc = build(TrainConfig, {"mixture": [{"until_step": 40, "weights": {"code": 0.5, "web": 0.5}},
                                         {"until": 1.0, "weights": {"code": 0.2, "web": 0.8}}]}, "train")
    sched = [(p.fraction(50, per_step), dict(p.weights)) for p in tc.mixture]
    m = MixtureSampler({"code": np.arange(100), "web": np.arange(100, 300)}, sched, 5, 50, 4, 2)
    assert [ph.end_slot for ph in m.phases] == [40 * 8, 50 * 8]
