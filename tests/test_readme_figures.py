"""README figures are generated from the committed example reports and cannot drift from them; the
pipeline summary states the smoke-train figures and no raw dicts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minideepseek import readme_figures as rf
from minideepseek.runconfig import RunConfig
from minideepseek.summary import figures, markdown

ROOT = Path(__file__).resolve().parents[1]


EXAMPLES = ROOT / "reports" / "examples"


def test_committed_pages_match_committed_examples() -> None:
    """Fails when a generated region of README.md or docs/*.md differs from the committed example reports
    (reports/examples/, never a user's run): regenerate with scripts/regen_examples.sh."""
    paths = rf.pages(ROOT)
    assert ROOT / "README.md" in paths, "README lost its <!-- figures:NAME --> regions"
    regions = {m.group("name") for p in paths for m in rf.MARKER.finditer(p.read_text(encoding="utf-8"))}
    assert {"stages", "demo", "demo.times", "dashboard", "scale"} <= {r.split("@")[0] for r in regions}, regions
    for path in paths:
        text = path.read_text(encoding="utf-8")
        want = rf.render(text, rf.Reports(EXAMPLES / "demo"))
        assert want == text, f"{path.relative_to(ROOT)}: figures differ from reports/examples: run scripts/regen_examples.sh"


def _example(tmp_path: Path) -> tuple[Path, Path]:
    reports = tmp_path / "reports"
    shutil.copytree(EXAMPLES / "demo", reports / "demo")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- figures:demo -->\nstale\n<!-- /figures:demo -->\n"
                      "<!-- figures:demo.times -->\n<!-- /figures:demo.times -->\nend\n", encoding="utf-8")
    return reports, readme


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minideepseek.readme_figures", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_check_mode_and_rewrite(tmp_path: Path) -> None:
    reports, readme = _example(tmp_path)
    args = ("--reports-dir", str(reports), "--readme", str(readme))
    r = _cli(*args, "--check")
    assert r.returncode == 1 and "-stale" in r.stdout, r.stdout + r.stderr
    assert "stale" in readme.read_text()  # --check changes nothing
    assert _cli(*args).returncode == 0
    text = readme.read_text()
    assert "stale" not in text and text.startswith("intro\n") and text.endswith("end\n")
    smoke = json.loads((reports / "demo" / "smoke_train.json").read_text())
    assert f"{smoke['loss']['first']:.2f} -> {smoke['loss']['last']:.2f}" in text
    assert _cli(*args, "--check").returncode == 0
    # a changed report changes the figures: --check catches it
    mix = json.loads((reports / "demo" / "source_mix.json").read_text())
    mix["totals"]["docs"] += 1
    (reports / "demo" / "source_mix.json").write_text(json.dumps(mix))
    assert _cli(*args, "--check").returncode == 1


def test_missing_key_fails_clearly(tmp_path: Path) -> None:
    reports, readme = _example(tmp_path)
    pk = json.loads((reports / "demo" / "packing_report.json").read_text())
    del pk["split_docs"]
    (reports / "demo" / "packing_report.json").write_text(json.dumps(pk))
    with pytest.raises(rf.FiguresError, match=r"packing_report\.json has no key 'split_docs'"):
        rf.render(readme.read_text(), rf.Reports(reports / "demo"))
    r = _cli("--reports-dir", str(reports), "--readme", str(readme), "--check")
    assert r.returncode == 2 and "split_docs" in r.stderr


def test_unknown_region_is_an_error(tmp_path: Path) -> None:
    reports, _ = _example(tmp_path)
    with pytest.raises(rf.FiguresError, match="figures:nope"):
        rf.render("<!-- figures:nope -->\n<!-- /figures:nope -->", rf.Reports(reports / "demo"))


def test_withdrawal_region_reads_its_own_run(tmp_path: Path) -> None:
    reports, _ = _example(tmp_path)
    block = "<!-- figures:withdraw@wd -->\n<!-- /figures:withdraw@wd -->"
    assert "No withdrawal example" in rf.render(block, rf.Reports(reports / "demo"))
    src = EXAMPLES / "demo_withdraw" / "withdrawals"
    assert src.is_dir(), "the withdrawal example (scripts/regen_examples.sh) is not committed"
    shutil.copytree(src, reports / "wd" / "withdrawals")
    note = json.loads(next((reports / "wd" / "withdrawals").glob("*.json")).read_text())
    text = rf.render(block, rf.Reports(reports / "demo"))
    assert f"Ticket `{note['ticket']}`" in text and f"{note['repack']['removed_tokens']:,} tokens removed" in text


def test_summary_has_smoke_train_figures_and_no_raw_dicts(tmp_path: Path) -> None:
    reports, _ = _example(tmp_path)
    f = figures(RunConfig(name="demo", reports_dir=str(reports), data_dir=str(tmp_path / "data")))
    md = markdown(f)
    st = json.loads((reports / "demo" / "smoke_train.json").read_text())
    s = f["smoke_train"]
    assert (s["loss_first"], s["loss_last"]) == (st["loss"]["first"], st["loss"]["last"])
    assert (s["val_first"], s["val_last"]) == (st["val"]["first"], st["val"]["last"])
    assert s["median_tokens_per_s"] == st["throughput"]["median_tokens_per_s"] and s["passed"] is st["criteria"]["passed"]
    line = next(x for x in md.splitlines() if x.startswith("- smoke train:"))
    assert f"loss {st['loss']['first']:.3f} -> {st['loss']['last']:.3f}" in line
    assert ("PASS" if st["criteria"]["passed"] else "FAIL") in line
    assert "None" not in md and "{'" not in md and "{\"" not in md


def test_packing_report_names_stage1_target_unit(tmp_path: Path) -> None:
    from minideepseek.packing.report import report_markdown
    from minideepseek.packing.stage import stage1_target

    pk = json.loads((EXAMPLES / "demo" / "packing_report.json").read_text())
    docs = report_markdown({**pk, "stage1_target": {"unit": "docs", "value": 400}})
    assert "met the recipe in documents (400 targeted)" in docs and "DeepSeek-V3 tokens" not in docs
    toks = report_markdown({**pk, "stage1_target": {"unit": "tokens", "value": 4_000_000}})
    assert "met the recipe in DeepSeek-V3 tokens (4,000,000 targeted)" in toks
    assert "not recorded" in report_markdown({k: v for k, v in pk.items() if k != "stage1_target"})
    # read from stage 1's manifest
    raw = tmp_path / "run" / "mixed_raw"
    raw.mkdir(parents=True)
    (raw / "manifest.json").write_text(json.dumps({"config": {"sampler": {"target_docs": 400, "target_tokens": None}}}))
    assert stage1_target(tmp_path / "run") == {"unit": "docs", "value": 400}


def _scale_results(target: float, wall_s: float, rss_mb: float) -> list[dict]:
    stage = {"wall_s": wall_s, "cpu_s": 2 * wall_s, "peak_rss_tree_mb": rss_mb, "bytes_written": 2**30,
             "throughput": {"tokens_per_cpu_s": 1000}, "git_commit": "abcdef0123"}
    return [{"target_tokens": target, "sampled_tokens": target * 0.9, "packed_tokens": target * 0.6,
             "stages": {a: dict(stage) for a in ("mixed_raw", "mixed_dedup", "tokenizer", "packed")}}]


@pytest.mark.parametrize(("target", "wall_s", "rss_mb", "expect"), [
    (1e9, 1000.0, 4000.0, ["1.11 h** wall = **1.23 h** scaled linearly to 1B sampled tokens (goal <= 2 h: met)",
                           "3.9 GB** as measured (mix_sampler; goal <= 16 GB: met)"]),
    (1e9, 1700.0, 20000.0, ["1.89 h** wall = **2.10 h** scaled", "(goal <= 2 h: **not met**)",
                            "goal <= 16 GB: **not met**"]),
    (1e8, 2000.0, 20000.0, ["goal <= 2 h: the goal is for 1B"]),
])
def test_scale_block_states_the_largest_size_against_the_goals(tmp_path: Path, target: float, wall_s: float,
                                                               rss_mb: float, expect: list[str]) -> None:
    (tmp_path / "scale").mkdir()
    (tmp_path / "scale" / "results.json").write_text(json.dumps(_scale_results(target, wall_s, rss_mb)))
    fits = {a: {"wall_exponent": 1.0, "time_exponent": 1.0, "rss_exponent": 0.1, "rss_linear": None,
                "cpu_linear": [1.0, 2e-6]} for a in ("mixed_raw", "mixed_dedup", "tokenizer", "packed")}
    (tmp_path / "scale" / "fit.json").write_text(json.dumps({"fit": fits}))
    text = rf.scale(rf.Reports(tmp_path / "demo"))
    assert "| pack_shuffle | 1.0 | 1.0 | 0.1 | 1.0 + 2.00 |  |" in text and "abcdef0" in text
    for e in expect:
        assert e in text, (e, text)


def test_scale_block_projects_1b_from_the_sizes_that_sampled_their_target(tmp_path: Path) -> None:
    """The projection uses only sizes that sampled their whole target (a size whose sources ran dry
    sampled another mix), linear through the two largest: fixed cost kept, marginal cost per token."""
    def size(target: float, sampled: float, wall: float) -> dict:
        r = _scale_results(target, wall, 1000.0)[0]
        r["sampled_tokens"] = sampled
        return r
    results = [size(1e7, 1e7, 100.0), size(1e8, 1e8, 550.0), size(1e9, 7e8, 3000.0)]
    (tmp_path / "scale").mkdir()
    (tmp_path / "scale" / "results.json").write_text(json.dumps(results))
    fits = {a: {"wall_exponent": 1.0, "time_exponent": 1.0, "rss_exponent": 0.1, "rss_linear": None,
                "cpu_linear": None} for a in ("mixed_raw", "mixed_dedup", "tokenizer", "packed")}
    (tmp_path / "scale" / "fit.json").write_text(json.dumps({"fit": fits}))
    lo, hi, per = rf.project_wall(results)
    assert (lo["target_tokens"], hi["target_tokens"]) == (1e7, 1e8), "the short 1B size is not used"
    assert per["mixed_raw"] == pytest.approx(550.0 + 5e-6 * 9e8)  # 450 s per 90M tokens
    text = rf.scale(rf.Reports(tmp_path / "demo"))
    assert "mix_sampler 84 min" in text and f"= **{4 * per['mixed_raw'] / 3600:.2f} h** (goal <= 2 h: **not met**" in text
    assert rf.project_wall(results[1:]) is None


def test_scale_goals_block_states_the_measured_1b_run_its_mix_and_the_resume_figures(tmp_path: Path) -> None:
    """The README's scale block: the largest size per stage against both goals, stage 1's account of the
    recipe, the projection as a cross-check once a 1B size sampled its target, and the resume figures."""
    def size(target: float, sampled: float, wall: float) -> dict:
        r = _scale_results(target, wall, 3000.0)[0]
        r["sampled_tokens"] = sampled
        return r
    top = size(1e9, 1.0004e9, 1500.0)
    top["mix"] = {"recipe_met": True, "tolerance_pp": 0.5, "max_abs_deviation_pp": 0.0123, "misses": [],
                  "short_sources": [], "share_tokens": {}}
    (tmp_path / "scale").mkdir()
    (tmp_path / "scale" / "results.json").write_text(json.dumps([size(1e7, 1e7, 100.0), size(1e8, 1e8, 550.0), top]))
    row = {"stage": "mixed_raw", "units": 350, "killed_after_unit": 210, "killed_s": 60.0, "resumed_s": 50.0,
           "uninterrupted_s": 100.0, "redone_s": 10.0, "redone_without_resume_s": 60.0, "identical": True}
    (tmp_path / "scale" / "resume_100m.json").write_text(json.dumps({"stages": [row, {**row, "stage": "mixed_dedup",
                                                                                         "identical": False}]}))
    text = rf.scale_goals(rf.Reports(tmp_path / "demo"))
    assert "| mix_sampler | 25.0 | 50.0 | 2.93 | 1.00 | abcdef0 |" in text
    assert "stages 1-4 took **1.67 h** wall (goal <= 2 h: met)" in text and "scaled linearly" not in text
    assert "goal <= 16 GB: met" in text and "within 0.012 pp of its token share" in text and "ran dry: none" in text
    assert text.count("Cross-check against the measured 1B run: projected") == 1
    assert re.search(r"The measured run took 1\.67 h, \d+\.\dx this line: the run, not the line, is the verdict",
                     text), text
    assert "mix_sampler killed after 210 of 350 units (60.0 s in)" in text and "**fingerprint differs**" in text
    top["mix"] = {**top["mix"], "recipe_met": False, "short_sources": ["arxiv"]}
    (tmp_path / "scale" / "results.json").write_text(json.dumps([size(1e7, 1e7, 100.0), size(1e8, 1e8, 550.0), top]))
    text = rf.scale_goals(rf.Reports(tmp_path / "demo"))
    assert "The recipe's mix: **missed**" in text and "ran dry: arxiv" in text


def test_a_stage_continued_after_a_kill_is_a_lower_bound_in_both_scale_blocks(tmp_path: Path) -> None:
    """A 1B stage that a session end killed and ``bench_scale.py --continue-killed`` finished from its units:
    its wall is shown as "≥" the sum of the two parts, the total as "at least", and the note says the CPU and
    RSS are the continued part's only; a size without one has none of it."""
    top = _scale_results(1e9, 1500.0, 3000.0)[0]
    top["sampled_tokens"] = 1e9
    killed = {"units_finished": 2911, "started_utc": "2026-12-06T03:59:23Z", "last_unit_utc": "2026-12-06T06:04:04Z",
              "wall_s_at_least": 7481.4, "continued_wall_s": 600.0}
    st = top["stages"]["mixed_raw"]
    st.update(wall_s=8081.4, wall_is_lower_bound=True, continued_killed_run=killed)
    (tmp_path / "scale").mkdir()
    (tmp_path / "scale" / "fit.json").write_text(json.dumps({"fit": {a: {"wall_exponent": 1.0, "time_exponent": 1.0,
                                                                       "rss_exponent": 0.1} for a in top["stages"]}}))
    (tmp_path / "scale" / "results.json").write_text(json.dumps([top]))
    (tmp_path / "scale" / "resume_100m.json").write_text(json.dumps({"stages": []}))
    for text in (rf.scale_goals(rf.Reports(tmp_path / "demo")), rf.scale(rf.Reports(tmp_path / "demo"))):
        assert "| mix_sampler | ≥ " in text
        assert "stages 1-4 took at least **" in text and "goal <= 2 h: **not met**" in text
        assert "ran at least 124.7 min" in text and "2,911 units" in text and "finished from those units in 10.0 min" in text
        assert "CPU and peak RSS are the continued part's only" in text
    del st["wall_is_lower_bound"], st["continued_killed_run"]
    st["wall_s"] = 1500.0
    (tmp_path / "scale" / "results.json").write_text(json.dumps([top]))
    text = rf.scale_goals(rf.Reports(tmp_path / "demo"))
    assert "≥" not in text and "at least" not in text and "--set" not in text
    # a size measured with settings added to the demo config's (bench_scale.py --set) names them
    top["extra_sets"] = ["sampler.signals_headroom=0.5"]
    (tmp_path / "scale" / "results.json").write_text(json.dumps([top]))
    text = rf.scale_goals(rf.Reports(tmp_path / "demo"))
    assert "packed, `--set sampler.signals_headroom=0.5`): stages 1-4 took" in text


def test_bench_scale_records_a_continued_stage_as_a_lower_bound_and_keeps_its_cpu_out_of_the_fit() -> None:
    """``bench_scale``'s rule for a stage finished by ``--continue-killed``, also applied to a measurement recorded
    before the rule (its ``wall_s`` the continued part's): the wall becomes killed part + continued part, rates
    per second shrink with it, tokens per CPU-second is withheld (the CPU is the continued part's), applying it
    twice changes nothing, and the CPU fits leave that size out while the wall fit keeps it."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_bench_scale", ROOT / "bench" / "bench_scale.py")
    bs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bs)
    m = {"wall_s": 3600.0, "cpu_s": 5000.0, "peak_rss_tree_mb": 4000.0, "units": 1.2e9, "bytes_written": 2**30,
         "continued_killed_run": {"units_finished": 2911, "wall_s_at_least": 7200.0},
         "throughput": {"docs_per_s": 140.0, "mb_per_s": 0.99, "tokens_per_s": 270000, "tokens_per_cpu_s": 200000}}
    bs._lower_bound_wall(m)
    assert m["wall_s"] == 10800.0 and m["wall_is_lower_bound"] is True
    assert m["continued_killed_run"]["continued_wall_s"] == 3600.0
    assert m["throughput"] == {"docs_per_s": 46.7, "mb_per_s": 0.33, "tokens_per_s": 90000, "tokens_per_cpu_s": None}
    before = json.dumps(m, sort_keys=True)
    bs._lower_bound_wall(m)
    assert json.dumps(m, sort_keys=True) == before

    def size(packed: float, wall: float, cpu: float) -> dict:
        return {"packed_tokens": packed, "sampled_tokens": packed * 1.5,
                "stages": {a: {"wall_s": wall, "cpu_s": cpu, "peak_rss_tree_mb": 1000.0, "units": packed * 1.5,
                               "bytes_written": 2**20, "throughput": {"docs_per_s": 1.0, "mb_per_s": 1.0,
                                                                      "tokens_per_s": 1}} for a in bs.STAGES}}
    results = [size(1e7, 50.0, 100.0), size(1e8, 500.0, 1000.0), size(1e9, 0.0, 0.0)]
    results[2]["stages"]["mixed_raw"] = {**m, "units": 1.5e9}
    for a in bs.STAGES[1:]:
        results[2]["stages"][a].update(wall_s=5000.0, cpu_s=10000.0)
    f = bs.fit(results)
    assert f["mixed_raw"]["time_exponent"] == 1.0 and f["mixed_raw"]["wall_is_lower_bound"] is True  # 2 sizes
    assert f["mixed_raw"]["cpu_linear"][1] == pytest.approx((1000.0 - 100.0) / (1.5e8 - 1.5e7))  # 10M and 100M
    assert f["mixed_raw"]["wall_exponent"] > 1.0  # the 1B wall (10,800 s) is in the wall fit
    assert "wall_is_lower_bound" not in f["mixed_dedup"] and f["mixed_dedup"]["time_exponent"] == 1.0
    assert "| ≥ 10800.0 |" in bs.markdown(results, f) and "n/a (continued)" in bs.markdown(results, f)


@pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="the machine's CPU counters are Linux's /proc/stat")
def test_bench_scale_measures_what_else_the_machine_did_beside_a_stage(tmp_path: Path) -> None:
    """A stage's row says the machine's other busy CPU-seconds and the hypervisor's steal beside its own:
    a CPU-bound process started next to the stage shows up as other CPU, not as the stage's."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_bench_scale", ROOT / "bench" / "bench_scale.py")
    bs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bs)
    spin = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"]
    beside = subprocess.Popen(spin)  # the "something else" on the machine
    try:
        m = bs.run_stage(spin, dict(os.environ), tmp_path / "stage.log")
    finally:
        beside.wait()
    assert m["cpu_s"] >= 0.9  # the stage's own second
    assert m["machine_busy_cpu_s"] >= m["cpu_s"] + m["other_cpu_s"] - 0.5
    assert m["other_cpu_s"] >= 0.5 and m["steal_s"] >= 0  # most of the other process's second, while it ran


def test_goal_sentence_says_what_else_the_machine_did_when_it_was_measured() -> None:
    """A row measured with the machine's counters says the other processes' CPU-seconds and the steal beside
    the stages' own; a row measured before them says nothing about it (no invented zero)."""
    top = _scale_results(1e9, 900.0, 2000.0)[0]
    names = {a: a for a in top["stages"]}
    assert "Meanwhile" not in rf.goal_sentence(top, names)
    for k, st in enumerate(top["stages"].values()):
        st.update(other_cpu_s=10.0 * (k + 1), steal_s=1.5)
    cpu = sum(st["cpu_s"] for st in top["stages"].values())
    assert (f"other processes (the bench's own monitor included) used 100 CPU-seconds beside the stages' {cpu:,.0f}, "
            "and the hypervisor took 6 s of CPU (steal)") in rf.goal_sentence(top, names)
