"""The data bill's arithmetic on a small run written here (manifests + reports as the stages write them)."""

import json
from pathlib import Path

import pytest

import report
from minideepseek.bill import BillAssumptions, project, run_facts


def _run(tmp: Path) -> tuple[Path, Path]:
    rep, data = tmp / "reports" / "r", tmp / "data" / "r"
    walls = {"mixed_raw": 40.0, "mixed_dedup": 10.0, "tokenizer": 20.0, "packed": 5.0}
    counters = {"mixed_raw": {"per_source": {"a": {"chars": 3_000_000, "tokens": 800_000},
                                             "b": {"chars": 1_000_000, "tokens": 200_000}}},
                "tokenizer": {"train_chars": 1_800_000}, "mixed_dedup": {}, "packed": {"tokens_produced": 900_000}}
    for a, w in walls.items():
        (data / a).mkdir(parents=True)
        (data / a / "manifest.json").write_text(json.dumps({
            "wall_s": w, "peak_rss_mb": 450.0, "cpu_count": 2, "counters": counters[a],
            "outputs": {"total_bytes": {"mixed_raw": 5_000_000, "mixed_dedup": 4_500_000, "tokenizer": 1_000,
                                        "packed": 3_700_000}[a]}}))
    rep.mkdir(parents=True)
    for name, body in {"source_mix": {"totals": {"tokens": 1_000_000}},
                       "filter_report": {"totals": {"evaluated": 1000, "dropped": 200}},
                       "dedup_report": {"docs_in": 800, "docs_out": 720, "params": {"num_perm": 128}},
                       "packing_report": {"tokens_produced": 900_000}}.items():
        (rep / f"{name}.json").write_text(json.dumps(body))
    return rep, data


def test_linear_projection_and_keep_rates(tmp_path):
    f = run_facts(*_run(tmp_path))
    assert f["filter_keep"] == pytest.approx(0.8) and f["dedup_keep"] == pytest.approx(0.9)
    assert f["tokenizer_sample_ratio"] == pytest.approx(1_800_000 / (4_000_000 * 0.9))
    b = project(f, BillAssumptions(targets=(9e6, 18e6), cores=(2,)))
    r1, r2 = b["rows"]
    # 9e6 packed tokens = 10x the run: every stage's CPU-s (wall x 2 CPUs) x 10, linear
    assert r1["stages"]["packed"]["core_h"] == pytest.approx(5 * 2 * 10 / 3600)
    assert r1["stages"]["mixed_raw"]["core_h"] == pytest.approx(40 * 2 * 10 / 3600)
    assert r2["total_core_h"] == pytest.approx(2 * r1["total_core_h"])
    assert r1["stages"]["packed"]["rss_gb"] == pytest.approx(450 / 1024)  # stage 4 streams
    assert r1["stages"]["mixed_dedup"]["rss_gb"] == pytest.approx((250 + 200 * 10) / 1024)
    assert r1["storage"]["packed_uint32_gb"] == pytest.approx(4 * 9e6 / 1e9)
    assert r1["storage"]["packed_gb"] == pytest.approx(3_700_000 / 900_000 * 9e6 / 1e9)
    # a crawl that keeps 10% instead of 80%: stage 1 reads 8x more, the others are unchanged
    c = project(f, BillAssumptions(targets=(9e6,), cores=(2,), filter_keep=0.1))["rows"][0]
    assert c["stages"]["mixed_raw"]["core_h"] == pytest.approx(8 * r1["stages"]["mixed_raw"]["core_h"])
    assert c["stages"]["mixed_dedup"]["core_h"] == pytest.approx(r1["stages"]["mixed_dedup"]["core_h"])
    # a superlinear stage
    d = project(f, BillAssumptions(targets=(9e6,), cores=(2,), exponents={"mixed_dedup": 1.5}))["rows"][0]
    assert d["stages"]["mixed_dedup"]["core_h"] == pytest.approx(10 * 2 * 10 ** 1.5 / 3600)


def test_cli_writes_cost_md(tmp_path):
    _run(tmp_path)
    rc = report.main(["bill", "r", "--reports-dir", str(tmp_path / "reports"), "--data-dir", str(tmp_path / "data"),
                      "--tokens", "1e9", "--cores", "8", "--filter-keep", "0.5"])
    assert rc == 0
    md = (tmp_path / "reports" / "r" / "cost.md").read_text()
    assert "| 1B tokens |" in md and "wall on 8 cores" in md and "~32 GB" in md
    assert json.loads((tmp_path / "reports" / "r" / "cost.json").read_text())["assumptions"]["filter_keep"] == 0.5
    with pytest.raises(ValueError, match="filter"):
        BillAssumptions(filter_keep=1.5)


def test_streaming_stages_stay_flat_and_the_tokenizer_sample_is_capped(tmp_path):
    rep, data = _run(tmp_path)
    man = json.loads((data / "tokenizer" / "manifest.json").read_text())
    man["config"] = {"tokenizer": {"max_train_chars": 3_000_000}}  # the run's own ceiling on stage 3's sample
    (data / "tokenizer" / "manifest.json").write_text(json.dumps(man))
    b = project(run_facts(rep, data), BillAssumptions(targets=(9e6, 15e12), cores=(2,)))
    small, huge = b["rows"]
    for s in ("mixed_raw", "packed"):  # stage 1 spools its sources, stage 4 streams: flat at the run's peak
        assert small["stages"][s]["rss_gb"] == huge["stages"][s]["rss_gb"] == pytest.approx(450 / 1024), s
    assert huge["stages"]["mixed_dedup"]["rss_gb"] > 1000  # the in-memory index grows
    # 3M characters = 750K DeepSeek tokens at the run's 4 chars/token: stage 3 reads no more at any size
    assert huge["units"]["tokenizer"] == pytest.approx(750_000)
    assert huge["stages"]["tokenizer"]["core_h"] == small["stages"]["tokenizer"]["core_h"] or \
        huge["units"]["tokenizer"] == small["units"]["tokenizer"]


def test_scale_fit_path_errors_are_one_line(tmp_path, capsys):
    _run(tmp_path)
    args = ["bill", "r", "--reports-dir", str(tmp_path / "reports"), "--data-dir", str(tmp_path / "data")]
    assert report.main([*args, "--scale-fit", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert "--scale-fit" in err and "no such file" in err and "Traceback" not in err
    (tmp_path / "bad.json").write_text("{}")
    assert report.main([*args, "--scale-fit", str(tmp_path / "bad.json")]) == 2
    assert "not a bench_scale fit.json" in capsys.readouterr().err
    assert report.main([*args, "--scale-fit", "none"]) == 0
    assert "no scale fit" in (tmp_path / "reports" / "r" / "cost.md").read_text()
