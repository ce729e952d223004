"""Stage 3 on small real data: special ids, stratified held-out split, round trip, determinism."""

import json
import sysconfig
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer

import cross_source_dedup
import mix_sampler
import train_tokenizer
from minideepseek.stage import read_manifest
from minideepseek.tokenizer.config import TokenizerConfig
from minideepseek.tokenizer.sample import stratified_split

STDLIB = Path(sysconfig.get_paths()["stdlib"])
ZH = ("天下大势，分久必合，合久必分。周末七国分争，并入于秦。及秦灭之后，楚、汉分争，又并入于汉。"
      "汉朝自高祖斩白蛇而起义，一统天下，后来光武中兴，传至献帝，遂分为三国。")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    code = sorted(p for p in STDLIB.glob("*.py") if 3_000 < p.stat().st_size < 30_000)[:60]
    rows = {"code": [{"id": p.stem, "text": p.read_text(encoding="utf-8")} for p in code],
            # real Chinese prose (三国演义, public domain), cut into varied documents
            "zh": [{"id": f"z{i}", "text": ZH[i % 17:] + ZH[: i % 17] + f" 第{i}回"} for i in range(40)]}
    for name, rs in rows.items():
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs))
    cfg = {
        "run": {"name": "t", "seed": 5, "data_dir": str(tmp / "data"), "reports_dir": str(tmp / "reports")},
        "sources": [
            {"name": "the_stack_v2", "type": "local", "path": str(tmp / "code.jsonl"), "id_field": "id",
             "fmt": "code", "weight": 0.8},
            {"name": "wanjuan_zh", "type": "local", "path": str(tmp / "zh.jsonl"), "id_field": "id", "weight": 0.2},
        ],
        "sampler": {"target_docs": 100, "num_proc": 1},
        "dedup": {"num_proc": 1, "scurve_docs": 10, "near": False},
        "decontam": {"enabled": False},
        "tokenizer": {"vocab_size": 3000, "heldout_min_docs": 3, "min_chars_per_source": 1000},
    }
    p = tmp / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    assert mix_sampler.main(["--config", str(p)]) == 0
    assert cross_source_dedup.main(["--config", str(p)]) == 0
    return tmp, p


def test_tokenizer_stage(run):
    tmp, cfg = run
    assert train_tokenizer.main(["--config", str(cfg)]) == 0
    out = tmp / "data" / "t" / "tokenizer"
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert [tok.token_to_id(t) for t in ("<|endoftext|>", "<|pad|>", "<|unk|>")] == [0, 1, 2]
    assert tok.get_vocab_size() == 3000
    assert json.loads((out / "special_tokens_map.json").read_text())["eos_token"] == "<|endoftext|>"
    assert json.loads((out / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    sample = json.loads((out / "sample.json").read_text())
    for s in sample.values():
        assert s["heldout"] and not set(s["heldout"]) & set(s["train"]), "held-out docs are never trained on"
    rep = json.loads((tmp / "reports" / "t" / "tokenizer_eval.json").read_text())
    assert rep["round_trip"]["ours"]["ok"] == rep["round_trip"]["ours"]["docs"] > 0
    assert rep["reached_target"] and {"ours", "deepseek_v3"} <= set(rep["per_source"]["wanjuan_zh"])
    zh = rep["per_source"]["wanjuan_zh"]["ours"]
    assert zh["cjk_chars"] > 0 and 0 < zh["tokens_per_char"] < 1.5
    text = "def f(x):\n    return x  # 注释 ünïcödé ﬁ"
    assert tok.decode(tok.encode(text).ids) == __import__("unicodedata").normalize("NFKC", text)
    # determinism: a forced rebuild gives byte-identical files
    first = read_manifest(out)
    assert train_tokenizer.main(["--config", str(cfg), "--force"]) == 0
    assert read_manifest(out)["fingerprint"] == first["fingerprint"]


def test_vocab_shortfall_is_stated_and_deepseek_pre_split(run):
    tmp, cfg = run
    assert train_tokenizer.main(["--config", str(cfg), "--set", "tokenizer.vocab_size=200000",
                                 "--set", "tokenizer.pre_tokenizer=deepseek"]) == 0
    rep = json.loads((tmp / "reports" / "t" / "tokenizer_eval.json").read_text())
    assert not rep["reached_target"] and "lower tokenizer.vocab_size" in rep["why_not"]
    tok = Tokenizer.from_file(str(tmp / "data" / "t" / "tokenizer" / "tokenizer.json"))
    pieces = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("x=12345 天下大势")]
    assert "123" in pieces and "45" in pieces, "digits split in runs of <= 3"


def test_stratified_floor():
    cfg = TokenizerConfig(sample_ratio=0.1, min_chars_per_source=5_000, heldout_min_docs=2)
    sources = ["big"] * 1000 + ["small"] * 50
    chars = [1000] * 1000 + [200] * 50
    splits, stats = stratified_split(cfg, 1, sources, chars)
    assert stats["big"]["train_docs"] == round(0.1 * (1000 - 50)) and not stats["big"]["floor_applied"]
    assert stats["small"]["floor_applied"] and stats["small"]["train_chars"] >= 5_000
    assert stats["big"]["every_10th_docs"] == 100
