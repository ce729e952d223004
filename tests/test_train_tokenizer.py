"""Stage 3 on small real data: special ids, stratified held-out split, round trip, determinism."""

import json
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

import cross_source_dedup
import mix_sampler
import train_tokenizer
from minideepseek.artifact import read_manifest
from minideepseek.config import ConfigError
from minideepseek.tokenizer.config import TokenizerConfig
from minideepseek.tokenizer.sample import stratified_split
from tests.chain import code_zh_chain, code_zh_rows

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    # urls name the origin: six code hosts and four Chinese ones, the components the split holds out whole
    p = code_zh_chain(tmp, code_zh_rows(60, 30_000, urls=True), 5, {
        "sampler": {"target_docs": 100, "num_proc": 1},
        "tokenizer": {"vocab_size": 3000, "heldout_min_docs": 3, "min_chars_per_source": 1000,
                      "component_heldout_fraction": 0.2},
    }, (mix_sampler, cross_source_dedup))
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
    text = "def f(x):\n    return x  # 注释，（全角）ünïcödé ﬁ e\u0301"
    assert tok.decode(tok.encode(text).ids) == text, "lossless by default: no NFKC"
    assert rep["normalizer"] == "none" and rep["lossless"] and not rep["normalizer_changes"]
    for split in ("component", "random"):
        for by_tok in rep["splits"][split]["per_source"].values():
            assert by_tok["ours"]["round_trip_ok"] == by_tok["ours"]["docs"] > 0
            assert "vs_deepseek_tokens_per_char" in by_tok["ours"]
    # the strange-token sample shows each token once, by its bytes
    assert len(set(rep["tokens"]["strange_sample"])) == len(rep["tokens"]["strange_sample"])
    assert not any("\ufffd" in x for x in rep["tokens"]["strange_sample"] + rep["tokens"]["longest"])
    # determinism: a forced rebuild gives byte-identical files
    first = read_manifest(out)
    assert train_tokenizer.main(["--config", str(cfg), "--force"]) == 0
    assert read_manifest(out)["fingerprint"] == first["fingerprint"]


def test_vocab_shortfall_fails_unless_allowed_and_deepseek_pre_split(run, capsys):
    tmp, cfg = run
    before = read_manifest(tmp / "data" / "t" / "tokenizer")
    assert train_tokenizer.main(["--config", str(cfg), "--set", "tokenizer.vocab_size=200000",
                                 "--set", "tokenizer.allow_smaller_vocab=false", "--force"]) == 2
    assert "allow_smaller_vocab" in capsys.readouterr().err
    assert read_manifest(tmp / "data" / "t" / "tokenizer") == before, "a failed stage leaves the old artifact"
    # the default caps the vocabulary at what the sample reaches, and says so (an automatic sizing decision)
    assert train_tokenizer.main(["--config", str(cfg), "--set", "tokenizer.vocab_size=200000",
                                 "--set", "tokenizer.pre_tokenizer=deepseek"]) == 0
    rep = json.loads((tmp / "reports" / "t" / "tokenizer_eval.json").read_text())
    assert not rep["reached_target"] and "lower tokenizer.vocab_size" in rep["why_not"]
    assert "NOT reached" in (tmp / "reports" / "t" / "tokenizer_eval.md").read_text()
    man = read_manifest(tmp / "data" / "t" / "tokenizer")
    [size] = man["sizing"]
    assert size["setting"] == "tokenizer.vocab_size" and size["configured"] == 200_000
    assert size["used"] == rep["vocab_size_final"] < 200_000
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


def test_training_sample_ceiling_keeps_each_sources_share_and_floor():
    """Above tokenizer.max_train_chars every source keeps the same share of its sample (a prefix of its
    seeded order, so the capped sample is a subset of the uncapped one); a small source keeps its floor."""
    sources = ["en"] * 3000 + ["code"] * 1500 + ["zh"] * 60
    rng = np.random.default_rng(4)
    chars = rng.integers(500, 3000, len(sources)).tolist()
    free_cfg = TokenizerConfig(min_chars_per_source=40_000, heldout_min_docs=2, max_train_chars=0)
    free, free_stats = stratified_split(free_cfg, 1, sources, chars)
    total = sum(v["train_chars"] for v in free_stats.values())
    cap = 2_000_000
    assert total > 2 * cap
    capped, stats = stratified_split(TokenizerConfig(min_chars_per_source=40_000, heldout_min_docs=2,
                                                     max_train_chars=cap), 1, sources, chars)
    got = sum(v["train_chars"] for v in stats.values())
    assert cap <= got <= cap + 3 * 3000 + 40_000  # one document of overshoot per source, plus the floor
    for s in ("en", "code"):
        share = stats[s]["train_chars"] / free_stats[s]["train_chars"]
        assert abs(share - cap / total) < 0.01, (s, share)
        assert stats[s]["capped_from_docs"] == free_stats[s]["train_docs"]
    assert stats["zh"]["train_chars"] >= 40_000 or stats["zh"]["train_chars"] == free_stats["zh"]["train_chars"]
    for s in capped:
        assert set(capped[s].train) <= set(free[s].train)
        assert capped[s].heldout == free[s].heldout and capped[s].heldout_component == free[s].heldout_component
    with pytest.raises(ConfigError, match="max_train_chars"):
        TokenizerConfig(max_train_chars=10)


def test_out_of_component_split(run):
    tmp, cfg = run
    assert train_tokenizer.main(["--config", str(cfg)]) == 0
    sample = json.loads((tmp / "data" / "t" / "tokenizer" / "sample.json").read_text())
    ds = datasets_rows(tmp / "data" / "t" / "mixed_dedup")
    host = {r["id"]: r["url"].split("/")[2] for r in ds}
    for name, s in sample.items():
        held = set(s["heldout_components"])
        assert held, f"{name}: at least one whole component held out"
        train_hosts = {host[d] for d in s["train"]}
        assert not held & train_hosts, "no training document comes from a held-out component"
        assert {host[d] for d in s["heldout"]} >= held, "every document of a held-out component is held out"
        assert sum(host[d] in held for d in ds_ids(ds, name)) == sum(host[d] in held for d in s["heldout"])
    rep = json.loads((tmp / "reports" / "t" / "tokenizer_eval.json").read_text())
    comp, rnd = rep["splits"]["component"]["per_source"], rep["splits"]["random"]["per_source"]
    assert set(comp) == set(rnd) == {"the_stack_v2", "wanjuan_zh"}
    md = (tmp / "reports" / "t" / "tokenizer_eval.md").read_text()
    assert "Out-of-component held-out" in md and "Random held-out" in md


def datasets_rows(path):
    from minideepseek.arrow_io import iter_dataset_rows

    return list(iter_dataset_rows(path, columns=["id", "source", "url"]))


def ds_ids(rows, source):
    return [r["id"] for r in rows if r["source"] == source]


def test_lossy_normalizer_is_reported(run):
    tmp, cfg = run
    assert train_tokenizer.main(["--config", str(cfg), "--set", "tokenizer.normalizer=nfkc"]) == 0
    rep = json.loads((tmp / "reports" / "t" / "tokenizer_eval.json").read_text())
    assert rep["normalizer"] == "nfkc" and not rep["lossless"]
    zh = rep["normalizer_changes"]["wanjuan_zh"]
    # the full-width comma of every fixture document becomes ASCII
    assert zh["chars_changed"] > 0 and 0 < zh["changed_share"] < 0.2
    assert zh["top_rewrites"][0]["from"] == repr("，") and zh["top_rewrites"][0]["to"] == repr(",")
    rt = rep["round_trip"]["ours"]
    assert rt["ok"] < rt["docs"], "NFKC loses the Chinese punctuation: raw round trip fails"
    md = (tmp / "reports" / "t" / "tokenizer_eval.md").read_text()
    assert "LOSSY" in md and "What the `nfkc` normalizer rewrites" in md
    tok = Tokenizer.from_file(str(tmp / "data" / "t" / "tokenizer" / "tokenizer.json"))
    assert tok.decode(tok.encode("天下，大势").ids) == "天下,大势"


def test_heldout_evaluation_cap_reads_a_prefix_of_each_split(run):
    """tokenizer.eval_max_chars: each (split, source) evaluates a prefix of its held-out documents in
    dataset order, stopping once the cap is reached; 0 evaluates everything, the same texts as a full
    scan of the dataset picks; the report says what was evaluated of what was held out."""
    from minideepseek.arrow_io import read_columns
    from minideepseek.tokenizer.sample import component_of
    from minideepseek.tokenizer.stage import heldout_texts

    tmp, cfg = run
    src = tmp / "data" / "t" / "mixed_dedup"
    meta = read_columns(src, ["source", "n_chars", "url", "audit_trace", "text"])
    comps = [component_of(t[0] if t else "", u or "") for t, u in zip(meta["audit_trace"], meta["url"])]
    tc = TokenizerConfig(vocab_size=3000, heldout_min_docs=3, min_chars_per_source=1000, component_heldout_fraction=0.2)
    splits, _ = stratified_split(tc, 1234, meta["source"], meta["n_chars"], comps)
    full = {"random": {n: [meta["text"][i] for i in sorted(s.heldout)] for n, s in splits.items()},
            "component": {n: [meta["text"][i] for i in sorted(s.heldout_component)] for n, s in splits.items()}}
    held, cov = heldout_texts(src, splits, meta["n_chars"], 0)
    assert held == full
    cap = 20_000
    held, cov = heldout_texts(src, splits, meta["n_chars"], cap)
    n_capped = 0
    for kind in ("random", "component"):
        for name, texts in held[kind].items():
            whole = full[kind][name]
            assert texts == whole[:len(texts)], "a prefix in dataset order"
            c = cov[kind][name]
            assert (c["docs"], c["chars"], c["heldout_docs"]) == (len(texts), sum(map(len, texts)), len(whole))
            if whole:
                assert texts, "at least one document"
                assert sum(map(len, texts[:-1])) < cap, "stops at the first document that reaches the cap"
            if len(texts) < len(whole):
                n_capped += 1
                assert c["chars"] >= cap
    assert n_capped, "the fixture's splits are larger than the cap"
    # the stage: the report's per-source figures are measured on exactly the evaluated documents
    assert train_tokenizer.main(["--config", str(cfg), "--set", f"tokenizer.eval_max_chars={cap}"]) == 0
    rep = json.loads((tmp / "reports" / "t" / "tokenizer_eval.json").read_text())
    ec = rep["eval_coverage"]
    assert ec["max_chars"] == cap and ec["capped"]
    for kind, by_src in rep["splits"].items():
        for name, by_tok in by_src["per_source"].items():
            assert by_tok["ours"]["docs"] == ec["splits"][kind][name]["docs"]
    assert "tokenizer.eval_max_chars" in (tmp / "reports" / "t" / "tokenizer_eval.md").read_text()
    with pytest.raises(ConfigError, match="eval_max_chars"):
        TokenizerConfig(eval_max_chars=-1)
