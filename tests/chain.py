"""A small real pipeline run (stages 1-4) for the withdrawal and dashboard tests: 50 stdlib modules as
code, 35 stdlib docstrings + a planted near-duplicate as prose, 64-token blocks in 16 KiB shards (so
documents cross blocks and shards)."""

import json
import os
import sysconfig
from pathlib import Path

import yaml

import cross_source_dedup
import mix_sampler
import pack_shuffle
import train_tokenizer
from tests.realtext import stdlib_docstrings

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SEQ = 64


def build_chain(tmp: Path, name: str = "t", weights: tuple[float, float] = (0.55, 0.45),
                sections: dict | None = None) -> Path:
    """Write the sources and config under ``tmp`` and run stages 1-4 in ``tmp/run`` (relative data and
    report dirs, so the directory can be copied); returns ``tmp/run``. ``sections``: config sections
    merged over the defaults below (a section's keys replace those given here)."""
    # code from the last stdlib files, docstrings from the first: no docstring is inside a code document
    code = sorted(p for p in STDLIB.glob("*.py") if 3_000 < p.stat().st_size < 12_000)[-50:]
    docs = stdlib_docstrings(35, 300, 3000, unique=True)  # + the twin = 36 = the prose quota: all sampled
    prose = [{"id": n, "text": doc, "url": f"https://docs.example.org/{n}"} for n, doc in docs]
    words = prose[0]["text"].split(" ")  # a planted near-duplicate of the first docstring
    prose.append({"id": "planted_twin", "text": " ".join(words[:-1] + ["(copy)"]), "url": "https://mirror.example/x"})
    rows = {"code": [{"id": p.stem, "text": p.read_text(encoding="utf-8"), "url": f"file://{p.name}"} for p in code],
            "prose": prose}
    for src, rs in rows.items():
        (tmp / f"{src}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs))
    cfg = {
        "run": {"name": name, "seed": 3, "data_dir": "data", "reports_dir": "reports"},
        "sources": [
            {"name": "the_stack_v2", "type": "local", "path": str(tmp / "code.jsonl"), "id_field": "id",
             "url_field": "url", "fmt": "code", "weight": weights[0]},
            {"name": "fineweb_edu", "type": "local", "path": str(tmp / "prose.jsonl"), "id_field": "id",
             "url_field": "url", "weight": weights[1]},
        ],
        "sampler": {"target_docs": 80, "num_proc": 1, "min_chars": 50},
        "dedup": {"num_proc": 1, "scurve_docs": 10, "threshold": 0.7},
        "decontam": {"enabled": False},
        "tokenizer": {"vocab_size": 1500, "heldout_min_docs": 2, "min_chars_per_source": 1000, "eval_reference": False},
        "pack": {"seq_len": SEQ, "max_shard_bytes": 16 << 10, "batch_docs": 8, "decode_samples": 3},
    }
    for sec, keys in (sections or {}).items():
        cfg[sec] = {**cfg.get(sec, {}), **keys}
    root = tmp / "run"
    root.mkdir(exist_ok=True)
    (root / f"{name}.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    for stage in (mix_sampler, cross_source_dedup, train_tokenizer, pack_shuffle):
        assert run_in(root, stage, "--config", f"{name}.yaml") == 0
    return root


def run_in(root: Path, mod, *argv: str) -> int:
    """``mod.main(argv)`` with ``root`` as the working directory (configs name paths relative to it)."""
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return mod.main(list(argv))
    finally:
        os.chdir(cwd)


# Real Chinese prose (三国演义, public domain), rotated into varied short documents.
ZH = ("天下大势，分久必合，合久必分。周末七国分争，并入于秦。及秦灭之后，楚、汉分争，又并入于汉。"
      "汉朝自高祖斩白蛇而起义，一统天下，后来光武中兴，传至献帝，遂分为三国。")


def code_zh_rows(n_code: int, max_bytes: int, n_zh: int = 40, urls: bool = False) -> dict[str, list[dict]]:
    """``n_code`` stdlib modules of 3 KB..``max_bytes`` as code and ``n_zh`` Chinese documents;
    ``urls``: each row names an origin (six code hosts, four Chinese sites) for component splits."""
    code = sorted(p for p in STDLIB.glob("*.py") if 3_000 < p.stat().st_size < max_bytes)[:n_code]
    rows = {"code": [{"id": p.stem, "text": p.read_text(encoding="utf-8")} for p in code],
            "zh": [{"id": f"z{i}", "text": ZH[i % 17:] + ZH[: i % 17] + f" 第{i}回"} for i in range(n_zh)]}
    if urls:
        for i, r in enumerate(rows["code"]):
            r["url"] = f"https://code{i % 6}.example/{r['id']}"
        for i, r in enumerate(rows["zh"]):
            r["url"] = f"https://zh{i % 4}.example/{i}"
    return rows


def code_zh_chain(tmp: Path, rows: dict[str, list[dict]], seed: int, sections: dict, stages: tuple) -> Path:
    """Write ``rows`` as JSONL sources (code 0.8 / Chinese 0.2), a config with ``sections`` on top of
    exact-dedup-only stage-2 settings, and run ``stages`` (script modules) on it; returns the config."""
    for name, rs in rows.items():
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs))
    cfg = {
        "run": {"name": "t", "seed": seed, "data_dir": str(tmp / "data"), "reports_dir": str(tmp / "reports")},
        "sources": [
            {"name": "the_stack_v2", "type": "local", "path": str(tmp / "code.jsonl"), "id_field": "id",
             "fmt": "code", "weight": 0.8},
            {"name": "wanjuan_zh", "type": "local", "path": str(tmp / "zh.jsonl"), "id_field": "id", "weight": 0.2},
        ],
        "dedup": {"num_proc": 1, "scurve_docs": 10, "near": False},
        "decontam": {"enabled": False},
        **sections,
    }
    p = tmp / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    for stage in stages:
        assert stage.main(["--config", str(p)]) == 0
    return p
