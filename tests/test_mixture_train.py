"""Stage 5 on ``pack.by_source`` data with a two-phase ``train.mixture``: the realized shares of the
batches actually trained track each phase, mixture.{json,md} are written, a run stopped before the
phase switch resumes bit-exactly, and the epoch limit is enforced."""

import json

import pytest
import yaml

import pack_shuffle
import smoke_train
from minideepseek.artifact import read_manifest
from tests.chain import build_chain, run_in

TRAIN = {"n_layer": 1, "d_model": 32, "n_head": 2, "seq_len": 32, "micro_batch": 4, "grad_accum": 2,
         "val_blocks": 4, "max_steps": 10, "warmup": 2, "lr": 0.01, "min_lr": 0.001, "eval_interval": 5,
         "loss_chunk": 64, "decode_samples": 0, "generate_tokens": 0, "bench_steps": 0, "checkpoint_interval": 2,
         "num_threads": 1, "fail_on_criteria": False,
         "mixture": [{"until": 0.6, "weights": {"the_stack_v2": 0.25, "fineweb_edu": 0.75}},
                     {"until": 1.0, "weights": {"the_stack_v2": 0.75, "fineweb_edu": 0.25}}]}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = build_chain(tmp_path_factory.mktemp("mixtrain"))
    cfg = yaml.safe_load((root / "t.yaml").read_text())
    cfg["pack"]["by_source"] = True
    cfg["train"] = TRAIN
    (root / "t.yaml").write_text(yaml.safe_dump(cfg))
    assert run_in(root, pack_shuffle, "--config", "t.yaml") == 0
    return root


@pytest.mark.slow
def test_two_phase_mixture_train_and_resume(chain):
    root = chain
    assert run_in(root, smoke_train, "--config", "t.yaml") == 0
    out = root / "data/t/smoke_train"
    # the registry's report lists are what the stages wrote: every file (a mixture run writes them all), and
    # nothing else (so a withdrawal that removes the model removes every report describing it)
    from minideepseek import pipeline

    listed = {r for s in pipeline.STAGES for r in s.reports}
    written = {p.name for p in (root / "reports/t").iterdir()}
    # written with canaries.enabled only, and with a `quality` filter in a chain only
    optional = {"certificate.json", "certificate.md", "quality_report.json", "quality_report.md"}
    assert written <= listed, sorted(written - listed)
    assert listed - written == optional
    for s in pipeline.STAGES:
        in_manifest = {f["path"] for f in read_manifest(root / "data/t" / s.artifact).files}
        assert set(s.reports) - optional <= in_manifest, (s.name, sorted(set(s.reports) - optional - in_manifest))
    rep = json.loads((root / "reports/t/mixture.json").read_text())
    assert "## Per phase" in (root / "reports/t/mixture.md").read_text()
    png = (root / "reports/t/mixture.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000  # the realized-vs-target plot
    assert all(set(w["share"]) == {"the_stack_v2", "fineweb_edu"} for w in rep["window"]["windows"])
    # 80 samples in phase 0 (steps 1-6 x 8), 32 in phase 1: Tijdeman keeps every prefix within 1 sample
    p0, p1 = rep["phases"]
    assert p0["steps"] == [1, 6] and p1["steps"] == [7, 10]
    assert p0["max_deviation_pp"] <= 100 / 48 and p1["max_deviation_pp"] <= 100 / 32
    assert p0["realized"]["fineweb_edu"] == pytest.approx(0.75, abs=1 / 48)
    # realized counts come from batches.jsonl: recount them here from the packed per-source ranges
    table = read_manifest(root / "data/t/packed")["by_source"]
    windows = 2  # 64-token blocks, 32-token samples
    code_lo, code_hi = table["the_stack_v2"]["block_range"]
    code = [sum(code_lo <= s // windows < code_hi for r in json.loads(line)["samples"] for s in r)
            for line in (out / "batches.jsonl").read_text().splitlines()]
    assert sum(code[:6]) == round(0.25 * 48) and sum(code[6:]) == round(0.75 * 32)
    assert set(rep["epochs"]) == {"the_stack_v2", "fineweb_edu"} and rep["epochs"]["fineweb_edu"]["epochs"] > 0
    vl = rep["val_loss_by_source"]
    assert sum(v["held_out_blocks"] for v in vl.values()) == TRAIN["val_blocks"]
    assert all(v["held_out_blocks"] >= 1 and 0 < v["val_loss"] < 10 for v in vl.values())  # stratified
    # the run summary carries the epochs table and the realized-mix figures
    from minideepseek import summary

    assert run_in(root, summary, "t.yaml") == 0
    summ = (root / "reports/t/summary.md").read_text()
    assert "planned epochs w·D/U" in summ and f"{rep['epochs']['fineweb_edu']['epochs']:.3f}" in summ
    assert f"within {rep['max_phase_deviation_pp']} pp of the schedule per phase" in summ
    # the step ledger replays the mixture sampler: every step verified, exposures add up, phases as scheduled
    from minideepseek.train.blame import blame_doc, blame_step, exposures
    from minideepseek.train.ledger import Replay

    rp = Replay.open(out.parent)
    assert rp.mixture is not None and all(blame_step(rp, s)["verified"] for s in range(1, 11))
    ex = exposures(rp)
    assert sum(e["tokens"] for e in ex.values()) == 10 * 4 * 2 * 32
    for doc in sorted(ex, key=lambda d: -ex[d]["exposures"])[:5]:
        for o in blame_doc(rp, doc)["occurrences"]:
            assert o["phase"] == (0 if o["step"] <= 6 else 1) and o["epoch"] is None
    rp.close()
    ref = (out / "batches.jsonl").read_text()
    ref_fp = read_manifest(out)["fingerprint"]
    # stopped at step 5 (before the switch at 6), resumed: the same batches and weights
    assert run_in(root, smoke_train, "--config", "t.yaml", "--force", "--set", "train.stop_at_step=5") == 0
    assert run_in(root, smoke_train, "--config", "t.yaml", "--force") == 0
    man = read_manifest(out)
    assert man["counters"]["resumed_from"] == 5  # the stop's checkpoint; phase 1 starts at step 7
    assert (out / "batches.jsonl").read_text() == ref and man["fingerprint"] == ref_fp


def test_epoch_limit_and_unknown_source_refused(chain):
    root = chain
    assert run_in(root, smoke_train, "--config", "t.yaml", "--set", "train.max_epochs_per_source=0.01") == 2
    cfg = yaml.safe_load((root / "t.yaml").read_text())
    bad = dict(cfg["train"])
    bad["mixture"] = [{"until": 1.0, "weights": {"the_stack_v2": 0.5, "nope": 0.5}}]
    (root / "bad.yaml").write_text(yaml.safe_dump({**cfg, "train": bad}))
    assert run_in(root, smoke_train, "--config", "bad.yaml") == 2
