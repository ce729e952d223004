"""Stage 1 end to end on small real local data: quotas, rejects, determinism, skip, resume."""

import json
import sysconfig
from pathlib import Path

import datasets
import pytest
import yaml
from realtext import stdlib_docstrings

import mix_sampler
from minideepseek.artifact import StaleInputError, read_manifest
from minideepseek.config import ConfigError
from minideepseek.records import text_hash
from minideepseek.stage import require_upstream

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _docstrings(limit: int) -> list[tuple[str, str]]:
    return stdlib_docstrings(limit, 300, 2500)


def _corpus(root: Path) -> dict[str, Path]:
    """Real text: small stdlib modules as code, stdlib docstrings as prose and as HTML pages,
    plus bad records (invalid UTF-8, blank, malformed JSON)."""
    code, prose, web = root / "code", root / "prose", root / "web"
    for d in (code, prose, web):
        d.mkdir(parents=True)
    mods = sorted(p for p in STDLIB.glob("**/*.py") if 600 < p.stat().st_size < 3_000 and "test" not in p.parts)
    for p in mods[:200]:
        name = p.relative_to(STDLIB).as_posix().replace("/", "__")
        (code / f"{name}.txt").write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    docs = _docstrings(700)
    with (prose / "docs.jsonl").open("w", encoding="utf-8") as fh:
        for name, doc in docs[:400]:
            fh.write(json.dumps({"id": name, "text": doc, "url": f"https://docs.python.org/3/{name}"}) + "\n")
        fh.write("{not json\n")
    (code / "broken.txt").write_bytes(b"\xff\xfe not utf-8 \x00\x01")
    (code / "blank.txt").write_text("   \n\n")
    for i in range(60):
        name, body = docs[400 + i * 5]
        paras = "".join(f"<p>{d}</p>" for _, d in docs[400 + i * 5:405 + i * 5])
        (web / f"p{i}.html").write_text(
            f"<html><head><title>{name}</title></head><body><nav>Home | Index | Modules</nav>"
            f"<main><h1>{name}</h1>{paras}<p>Inline math \\(e^{{i\\pi}} + 1 = 0\\) here.</p></main>"
            "<footer>Copyright</footer></body></html>", encoding="utf-8")
    return {"code": code, "prose": prose, "web": web}


def _config(tmp_path: Path, dirs: dict[str, Path], **sampler) -> Path:
    cfg = {
        "run": {"name": "t", "seed": 7, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "reports")},
        "sources": [
            {"name": "code", "type": "local", "path": str(dirs["code"]), "fmt": "code", "weight": 0.5, "lang": "code"},
            {"name": "prose", "type": "hf", "path": "json", "data_files": [str(dirs["prose"] / "docs.jsonl")],
             "id_field": "id", "url_field": "url", "weight": 0.3, "shuffle_buffer": 8, "lang": "en"},
            {"name": "web", "type": "local", "path": str(dirs["web"]), "weight": 0.2, "lang": "en"},
        ],
        "sampler": {"target_tokens": 100_000, "num_proc": 1, "min_chars": 20, **sampler},
    }
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _corpus(tmp_path_factory.mktemp("corpus"))


@pytest.mark.stage
def test_hf_json_with_a_malformed_line_is_a_clear_error(tmp_path, corpus):
    # datasets' json builder cannot skip a broken line: the stage fails loudly, not silently
    cfg = _config(tmp_path, corpus)
    with pytest.raises(Exception, match="(?i)json|parse"):
        mix_sampler.main(["--config", str(cfg)])


def _clean_corpus(tmp_path: Path, corpus: dict[str, Path]) -> dict[str, Path]:
    prose = tmp_path / "prose"
    prose.mkdir()
    lines = (corpus["prose"] / "docs.jsonl").read_text().splitlines()
    (prose / "docs.jsonl").write_text("\n".join(line for line in lines if line.startswith('{"')) + "\n")
    return {**corpus, "prose": prose}


@pytest.mark.stage
def test_stage1_quotas_rejects_and_schema(tmp_path, corpus):
    dirs = _clean_corpus(tmp_path, corpus)
    assert mix_sampler.main(["--config", str(_config(tmp_path, dirs))]) == 0
    out = tmp_path / "data" / "t" / "mixed_raw"
    ds = datasets.load_from_disk(str(out))
    mix = json.loads((tmp_path / "reports" / "t" / "source_mix.json").read_text())
    by = {r["source"]: r for r in mix["sources"]}
    assert mix["unit"] == "tokens" and mix["totals"]["tokens"] == sum(ds["n_tokens"])
    assert mix["totals"]["all_within_tolerance"], mix["totals"]
    assert abs(mix["totals"]["tokens"] - 100_000) < 1_000
    # bad records are counted by reason and kept with their origin
    assert by["code"]["rejects"] == {"blank_text": 1, "invalid_utf8": 1}
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    assert {r["reason"] for r in rejects} >= {"blank_text", "invalid_utf8"} and all(r["url"] for r in rejects)
    row = ds[0]
    assert set(row) >= {"id", "source", "text", "url", "license", "lang", "n_chars", "hash", "audit_trace"}
    assert row["hash"] == text_hash(row["text"]) and row["n_chars"] == len(row["text"])
    web = [r for r in ds if r["source"] == "web"]
    assert web and all("Home | Index" not in r["text"] for r in web), "nav boilerplate removed"
    assert any("\\(e^{i\\pi} + 1 = 0\\)" in r["text"] for r in web), "MathJax survives extraction"
    assert len(set(ds["id"])) == len(ds), "ids unique even where the source reuses one"
    man = read_manifest(out)
    assert man["counters"]["duplicate_source_ids"].get("prose", 0) >= 1
    assert man["config"]["sampler"]["target_tokens"] == 100_000 and man["outputs"]["files"]


@pytest.mark.stage
def test_determinism_skip_and_resume(tmp_path, corpus, caplog):
    dirs = _clean_corpus(tmp_path, corpus)
    cfg = _config(tmp_path, dirs)
    out = tmp_path / "data" / "t" / "mixed_raw"
    assert mix_sampler.main(["--config", str(cfg)]) == 0
    first = read_manifest(out)
    # up to date: skipped, nothing rewritten
    mtime = (out / "manifest.json").stat().st_mtime_ns
    assert mix_sampler.main(["--config", str(cfg)]) == 0
    assert (out / "manifest.json").stat().st_mtime_ns == mtime
    # a crashed earlier run left a temp dir and the artifact is gone: the rerun cleans and rebuilds
    import shutil

    shutil.rmtree(out)
    crashed = out.parent / "mixed_raw.tmp-99999"
    crashed.mkdir()
    (crashed / "data-00000-of-00001.arrow").write_bytes(b"half")
    assert mix_sampler.main(["--config", str(cfg), "--set", "sampler.num_proc=2"]) == 0
    second = read_manifest(out)
    assert not crashed.exists()
    assert first["fingerprint"] == second["fingerprint"], "same config + seed -> byte-identical files"
    assert [f["sha256"] for f in first["outputs"]["files"]] == [f["sha256"] for f in second["outputs"]["files"]]
    # a config change rebuilds; another seed samples differently
    assert mix_sampler.main(["--config", str(cfg), "--set", "run.seed=8"]) == 0
    assert read_manifest(out)["fingerprint"] != first["fingerprint"]


@pytest.mark.stage
def test_stale_upstream_is_refused(tmp_path, corpus):
    dirs = _clean_corpus(tmp_path, corpus)
    cfg = _config(tmp_path, dirs)
    run_dir = tmp_path / "data" / "t"
    with pytest.raises(StaleInputError, match=r"run `\S*python mix_sampler.py"):
        require_upstream(run_dir, "mixed_raw", "mix_sampler.py")
    assert mix_sampler.main(["--config", str(cfg)]) == 0
    man = require_upstream(run_dir, "mixed_raw", "mix_sampler.py")
    with pytest.raises(StaleInputError, match="different config"):
        require_upstream(run_dir, "mixed_raw", "mix_sampler.py", expected_config_hash="0" * 64)
    assert require_upstream(run_dir, "mixed_raw", "mix_sampler.py", man["config_hash"]) == man


@pytest.mark.stage
def test_docs_target_and_error_budget(tmp_path, corpus):
    dirs = _clean_corpus(tmp_path, corpus)
    cfg = _config(tmp_path, dirs)
    assert mix_sampler.main(["--config", str(cfg), "--set", "sampler.target_docs=40"]) == 0
    ds = datasets.load_from_disk(str(tmp_path / "data" / "t" / "mixed_raw"))
    assert len(ds) == 40 and ds["source"].count("code") == 20 and ds["source"].count("web") == 8
    with pytest.raises(ConfigError, match="over the error budget"):
        from minideepseek.runconfig import load_stage_config
        from minideepseek.sampling.config import MixSamplerConfig
        from minideepseek.sampling.stage import run_mix_sampler

        c = load_stage_config(MixSamplerConfig, cfg, ["sampler.min_chars=100000", "sampler.max_chars=200000"])
        run_mix_sampler(c)
