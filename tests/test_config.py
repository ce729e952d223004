"""Config validation: every mistake is an error that names the fix."""

from pathlib import Path

import pytest
import yaml

from minideepseek.config import ConfigError, apply_overrides
from minideepseek.runconfig import load_stage_config
from minideepseek.sampling.config import MixSamplerConfig

BASE = {
    "run": {"name": "t", "seed": 1},
    "sources": [
        {"name": "a", "type": "local", "path": "x", "weight": 0.6},
        {"name": "b", "type": "demo", "domain": "zh", "weight": 0.4},
    ],
    "sampler": {"target_tokens": 1000},
}


def _load(tmp_path: Path, data: dict, overrides: list[str] | None = None) -> MixSamplerConfig:
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_stage_config(MixSamplerConfig, p, overrides)


def test_valid_config_and_overrides(tmp_path):
    cfg = _load(tmp_path, BASE, ["sources.a.weight=0.5", "sources.1.weight=0.5", "run.seed=7"])
    assert [s.weight for s in cfg.sources] == [0.5, 0.5]
    assert cfg.run.seed == 7 and cfg.sampler.unit == "tokens"


def test_target_override_replaces_the_other_unit(tmp_path):
    cfg = _load(tmp_path, BASE, ["sampler.target_docs=2000"])
    assert cfg.sampler.target_docs == 2000 and cfg.sampler.target_tokens is None


@pytest.mark.parametrize("override, needle", [
    (["sources.a.weight=0.7"], "sum to 1.100000"),
    (["sampler.target_tokens=-5"], "must be a positive integer"),
    (["sources.a.type=ftp"], "choose one of ['hf', 'local', 'warc', 'demo']"),
    (["sampler.sampels=3"], "unknown key(s) ['sampels'] in c.sampler; valid keys"),
    (["sources.b.domain=klingon"], "choose one of ['web_en'"),
    (["sources.a.split=train"], "do not apply to type 'local'"),
    (["sampler.shortfall=ignore"], "choose one of ['renormalize', 'shrink', 'error']"),
    (["sampler.target_docs=10", "sampler.target_tokens=10"], "exactly one of target_docs"),
    (["run.name=a b"], "use letters, digits"),
    (["sources.b.name=a"], "duplicate source name(s) ['a']"),
])
def test_bad_values_name_the_fix(tmp_path, override, needle):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, BASE, override)
    assert needle in str(err.value)


def test_weights_error_suggests_normalized_weights(tmp_path):
    with pytest.raises(ConfigError, match=r"e.g. a=0.6364, b=0.3636"):
        _load(tmp_path, BASE, ["sources.a.weight=0.7"])


def test_unknown_section_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown section"):
        _load(tmp_path, {**BASE, "sampeler": {}})
    with pytest.raises(ConfigError, match="not found"):
        load_stage_config(MixSamplerConfig, tmp_path / "nope.yaml")


def test_override_syntax_errors():
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_overrides({}, ["oops"])
    with pytest.raises(ConfigError, match="no list item 'zz'"):
        apply_overrides({"sources": [{"name": "a"}]}, ["sources.zz.weight=1"])
    assert apply_overrides({"s": {"x": 1}}, ["s.y=[1, 2]"]) == {"s": {"x": 1, "y": [1, 2]}}


@pytest.mark.parametrize("name", ["demo", "classroom", "deepseek_v3_1b"])
def test_shipped_configs_are_valid(name):
    root = Path(__file__).resolve().parents[1]
    cfg = load_stage_config(MixSamplerConfig, root / "configs" / f"{name}.yaml")
    assert abs(sum(s.weight for s in cfg.sources) - 1) < 1e-6


def test_demo_variants_stay_in_step_with_the_demo() -> None:
    """configs/demo_mixture.yaml and configs/gpu_8x.yaml are the demo with a few named differences; a
    change to the demo (a filter, a dedup setting) must reach them too."""
    root = Path(__file__).resolve().parent.parent / "configs"
    demo = yaml.safe_load((root / "demo.yaml").read_text(encoding="utf-8"))
    mix = yaml.safe_load((root / "demo_mixture.yaml").read_text(encoding="utf-8"))
    assert {k: v for k, v in mix.items() if k not in ("run", "train")} == {k: v for k, v in demo.items()
                                                                             if k not in ("run", "train")}
    assert {k: v for k, v in mix["train"].items() if k != "mixture"} == demo["train"] and mix["train"]["mixture"]
    gpu = yaml.safe_load((root / "gpu_8x.yaml").read_text(encoding="utf-8"))
    same = [k for k in demo if k not in ("run", "train", "pack")]
    assert {k: gpu[k] for k in same} == {k: demo[k] for k in same}
    assert {k: v for k, v in gpu["pack"].items() if k != "max_shard_bytes"} == \
        {k: v for k, v in demo["pack"].items() if k != "max_shard_bytes"}
    assert demo["pack"]["by_source"] and gpu["pack"]["by_source"]  # the trainer sets the mix (issue 18)
