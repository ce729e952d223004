"""The step ledger (issue 35) on a small real chain: every step of a smoke run rebuilds from the packed
data and the schedule to the token digest stage 5 recorded; per-document exposures add up to the tokens
trained; documents in the dropped tail or in validation blocks say so; a tampered record is a mismatch
(exit 4); a withdrawal's note lists the steps that trained the withdrawn document."""

import json
import shutil

import numpy as np
import pytest
import yaml

import report
import smoke_train
import withdraw
from minideepseek import readme_figures
from minideepseek.train.blame import blame_doc, blame_step, exposures
from minideepseek.train.ledger import Replay, token_digest
from tests.chain import build_chain, run_in

# 64-token blocks read as two 32-token windows; 3 optimizer steps of 2 x 3 sequences each
TRAIN = {"n_layer": 1, "d_model": 32, "n_head": 2, "seq_len": 32, "micro_batch": 3, "grad_accum": 2,
         "val_blocks": 3, "max_steps": 12, "warmup": 2, "lr": 0.01, "min_lr": 0.001, "eval_interval": 6,
         "loss_chunk": 64, "decode_samples": 0, "generate_tokens": 0, "bench_steps": 0, "checkpoint_interval": 5,
         "num_threads": 1, "fail_on_criteria": False, "auto_size": False}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = build_chain(tmp_path_factory.mktemp("blame"))
    cfg = yaml.safe_load((root / "t.yaml").read_text())
    cfg["train"] = TRAIN
    (root / "t.yaml").write_text(yaml.safe_dump(cfg))
    assert run_in(root, smoke_train, "--config", "t.yaml") == 0
    return root


@pytest.fixture
def rp(trained):
    r = Replay.open(trained / "data" / "t")
    yield r
    r.close()


def test_every_step_rebuilds_to_its_recorded_digest(rp):
    assert rp.steps == TRAIN["max_steps"] and rp.mixture is None and rp.plan.windows == 2
    for step in range(1, rp.steps + 1):
        r = blame_step(rp, step)
        assert r["verified"] and not r["unrecorded"], step
        (rk,) = r["ranks"]
        assert len(rk["sequences"]) == TRAIN["micro_batch"] * TRAIN["grad_accum"]
        # the listed spans tile each sequence: every input position belongs to exactly one document
        for sq in rk["sequences"]:
            spans = sorted(d["span"] for d in sq["documents"])
            assert spans[0][0] == 0 and spans[-1][1] == TRAIN["seq_len"]
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    # the digest is of the tokens themselves: recomputed from the recorded sample ids
    rec = rp.recorded[0]
    toks = [rp.tokens_of(np.array(rec["samples"][0][i:i + 3])) for i in (0, 3)]
    assert token_digest(toks) == rec["token_hash"][0]


def test_exposures_add_up_to_the_tokens_trained(rp):
    ex = exposures(rp)
    trained_tokens = rp.steps * TRAIN["micro_batch"] * TRAIN["grad_accum"] * TRAIN["seq_len"]
    assert sum(e["tokens"] for e in ex.values()) == trained_tokens
    # and one document's own query agrees with the table
    doc = max(ex, key=lambda d: ex[d]["exposures"])
    b = blame_doc(rp, doc)
    assert (b["exposures"], b["tokens_trained"]) == (ex[doc]["exposures"], ex[doc]["tokens"])
    assert b["steps"] == sorted({o["step"] for o in b["occurrences"]}) and b["first_checkpoint"] >= b["steps"][0]
    assert b["first_checkpoint"] in (5, 10, 12)
    # the plain loader has one phase; its epochs are counted
    assert sum(x["exposures"] for x in b["exposures_by_phase_epoch"]) == b["exposures"]


def test_tail_validation_and_unknown_documents_say_why(rp, trained):
    tail = json.loads((trained / "data/t/packed/packing_report.json").read_text())["tail_docs"]
    assert tail["dropped_entirely"] or tail["truncated"], "the chain must leave a packing tail to test"
    for d in tail["dropped_entirely"]:
        b = blame_doc(rp, d)
        assert not b["steps"] and "dropped tail" in b["not_trained"][0]["reason"]
    for d in tail["truncated"]:
        assert any("dropped tail" in n["reason"] for n in blame_doc(rp, d)["not_trained"])
    vb = int(rp.plan.val_block_ids[0])
    j = next(iter(rp.docs.in_block(vb)))
    b = blame_doc(rp, str(rp.docs.ids[j]))
    assert any(n.get("block") == vb and "validation" in n["reason"] for n in b["not_trained"])
    assert all(o["block"] != vb for o in b["occurrences"])
    assert "not in this run's packed data" in blame_doc(rp, "no/such-doc")["not_trained"][0]["reason"]


def test_cli_writes_reports_and_a_tampered_record_is_a_mismatch(trained, tmp_path, capsys):
    root = tmp_path / "run"
    shutil.copytree(trained, root)
    assert run_in(root, report, "blame", "t", "--step", "3") == 0
    md = (root / "reports/t/blame/step-0000003.md").read_text()
    assert "VERIFIED" in md and json.loads((root / "reports/t/blame/step-0000003.json").read_text())["verified"]
    rp = Replay.open(root / "data/t")
    doc = str(rp.docs.ids[rp.pieces_in(rp.recorded[2]["samples"][0][0])[0][0]])
    rp.close()
    assert run_in(root, report, "blame", "t", "--doc", doc) == 0
    assert "| 3 | 0 |" in capsys.readouterr().out  # step 3, rank 0 is among its occurrences
    # the docs' generated figures read these saved queries
    fig = readme_figures.blame(readme_figures.Reports(root / "reports/t"))
    d = json.loads(next((root / "reports/t/blame").glob("doc-*.json")).read_text())
    assert "Step 3 of 12 (" in fig and "verified (the rebuilt batches match" in fig
    assert f"Document `{doc}` (" in fig and f"{d['exposures']} exposure(s)" in fig and f"(first {d['steps'][0]}," in fig
    bj = root / "data/t/smoke_train/batches.jsonl"
    lines = bj.read_text().splitlines()
    rec = json.loads(lines[2])
    rec["token_hash"][0] = "0" * 32
    lines[2] = json.dumps(rec)
    bj.write_text("\n".join(lines) + "\n")
    assert run_in(root, report, "blame", "t", "--step", "3") == 4
    assert "MISMATCH" in (root / "reports/t/blame/step-0000003.md").read_text()


def test_withdrawal_note_lists_the_steps_that_trained_it(trained, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(trained, root)
    rp = Replay.open(root / "data/t")
    doc = max(exposures(rp).items(), key=lambda kv: kv[1]["exposures"])[0]
    steps = blame_doc(rp, doc)["steps"]
    rp.close()
    assert run_in(root, report, "blame", "t", "--doc", doc) == 0  # a query result quoting the document
    assert run_in(root, withdraw, "--config", "t.yaml", "--id", doc) == 0  # verified: the query result went too
    note = next((root / "reports/t/withdrawals").glob("*.md")).read_text()
    line = next(x for x in note.splitlines() if x.startswith("- training:"))
    assert f"trained in steps {', '.join(map(str, steps))} (" in line and "checkpoints from step" in line
    assert not (root / "reports/t/blame").exists() and not (root / "data/t/smoke_train").exists()
    fig = readme_figures.withdrawal(readme_figures.Reports(root / "reports/t"))
    assert f"The smoke train had read 1 of the 1 documents in {len(steps)} of its 12 steps" in fig
