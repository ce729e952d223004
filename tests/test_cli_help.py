"""Every top-level script's --help: fast (no heavy imports), rendered as written, and its examples work.

The examples are read from the scripts' docstrings (what --help prints) and fed to the script's own
parser; a stage script's `--config`/`--set` are then loaded into its frozen config, so an example
naming a key that does not exist, or a value the config refuses, fails here.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("mix_sampler.py", "cross_source_dedup.py", "train_tokenizer.py", "pack_shuffle.py", "smoke_train.py",
           "withdraw.py", "report.py")
# the stage config each script loads (module, class)
STAGE_CONFIGS = {
    "mix_sampler.py": ("minideepseek.sampling.config", "MixSamplerConfig"),
    "cross_source_dedup.py": ("minideepseek.crossdedup.config", "DedupStageConfig"),
    "train_tokenizer.py": ("minideepseek.tokenizer.config", "TokenizerStageConfig"),
    "pack_shuffle.py": ("minideepseek.packing.config", "PackStageConfig"),
    "smoke_train.py": ("minideepseek.train.config", "TrainStageConfig"),
    "withdraw.py": ("minideepseek.withdraw.config", "WithdrawStageConfig"),
}
HEAVY = ("torch", "datasets", "tokenizers", "pyarrow", "pandas", "numpy", "datasketch", "matplotlib")


def _load(script: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_script_{script[:-3]}", ROOT / script)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def examples(script: str, doc: str) -> list[list[str]]:
    """argv of every example line in ``doc`` that runs ``script`` (continuations joined, comments cut)."""
    text = re.sub(r"\\\n\s*", " ", doc)
    out = []
    for line in text.splitlines():
        if script not in line:
            continue
        words = shlex.split(line, comments=True)
        at = [i for i, w in enumerate(words) if Path(w).name == script]
        if at and any(w in ("python", "torchrun") or w.endswith("/python") for w in words[:at[0]]):
            # a shell command substitution stands for its output; the one used computes a document hash
            out.append(["0" * 64 if w.startswith("$(") else w for w in words[at[0] + 1:]])
    return out


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_examples_parse_and_load(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    mod = _load(script)
    exs = examples(script, mod.__doc__ or "")
    assert len(exs) >= 2, f"{script}: expected its docstring examples, found {exs}"
    for argv in exs:
        if script == "report.py":
            from minideepseek.dashboard.drift import Thresholds

            args = mod.parse_args(argv)
            assert args.cmd in ("show", "compare", "bill", "blame", "whatif")
            if args.cmd == "blame":  # exactly one question: a step (>= 1) or a document id
                assert (args.step is None) != (args.doc is None) and (args.step is None or args.step >= 1)
            Thresholds.parse(args.threshold)
            if args.cmd == "bill":  # its assumptions validate (keep rates, exponents' stage names)
                from minideepseek.bill import BillAssumptions

                BillAssumptions(filter_keep=args.filter_keep, exponents={
                    k: float(v) for k, _, v in (e.partition("=") for e in args.exponent)})
            continue
        args = mod.build_parser().parse_args(argv)
        from minideepseek.runconfig import load_stage_config

        modname, cls = STAGE_CONFIGS[script]
        cfg = load_stage_config(getattr(importlib.import_module(modname), cls), args.config, args.overrides, quiet=True)
        if "sampler.target_docs" in " ".join(args.overrides):
            assert cfg.run.name != "demo", f"{script} {argv}: a resized run must not write over data/demo"
        if script == "withdraw.py":
            from minideepseek.tickets import SELECTOR_KINDS, Selector

            for kind in SELECTOR_KINDS:
                for v in getattr(args, kind) or []:
                    Selector(kind, v)


def test_examples_reader_sees_continuations() -> None:
    doc = "    python x.py --a 1 \\\n        --b 2   # c\n    bash run.sh x.py --no\n    python y.py --z\n"
    assert examples("x.py", doc) == [["--a", "1", "--b", "2"]]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_renders_docstring_as_written(script: str) -> None:
    """The docstring reaches --help verbatim: no escape (a `\\` continuation) is swallowed by Python."""
    src = (ROOT / script).read_text(encoding="utf-8")
    m = re.match(r'r?"""(.*?)"""', src, re.S)
    assert m, f"{script} has no module docstring"
    assert _load(script).__doc__ == m.group(1)
    out = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for line in m.group(1).splitlines():
        if line.strip().startswith(("python ", ".venv/bin/python ", "torchrun ")):
            assert line.rstrip() in out, f"{script} --help does not show {line!r}"
        # pasted from --help, a bare `python` (not the checkout's venv) fails with ModuleNotFoundError
        assert not line.strip().startswith("python "), f"{script} --help example uses a bare python: {line!r}"


@pytest.mark.stage
def test_help_imports_nothing_heavy() -> None:
    """--help of every script must not import torch/datasets/tokenizers/pyarrow (seconds each)."""
    code = ("import runpy, sys\nsys.argv = [sys.argv[1], '--help']\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY:' + ' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    for script in SCRIPTS:
        r = subprocess.run([sys.executable, "-c", code, script], cwd=ROOT, capture_output=True, text=True, check=True)
        assert "usage:" in r.stdout, script
        heavy = r.stdout.rsplit("HEAVY:", 1)[1].strip()
        assert heavy == "", f"{script} --help imported {heavy}"


@pytest.mark.stage
def test_config_error_printed_once(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "pack_shuffle.py"), "--config", str(ROOT / "configs/demo.yaml"),
                        "--set", "pack.seq_len=-1", "--set", f"run.data_dir={tmp_path}"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("pack.seq_len=-1") == 1, r.stderr


def test_config_logged_as_digest_and_yaml(caplog: pytest.LogCaptureFixture) -> None:
    import yaml

    from minideepseek.config import config_hash
    from minideepseek.runconfig import load_stage_config
    from minideepseek.sampling.config import MixSamplerConfig

    with caplog.at_level("DEBUG", logger="minideepseek.runconfig"):
        cfg = load_stage_config(MixSamplerConfig, ROOT / "configs/demo.yaml", ["sampler.target_docs=700",
                                                                               "run.name=digest"])
    info = [r.getMessage() for r in caplog.records if r.levelname == "INFO" and "config " in r.getMessage()]
    assert len(info) == 1 and "\n" not in info[0] and len(info[0]) < 400
    assert "run digest" in info[0] and config_hash(cfg)[:12] in info[0] and "sampler.target_docs=700" in info[0]
    debug = [r.getMessage() for r in caplog.records if r.levelname == "DEBUG" and "resolved config" in r.getMessage()]
    assert len(debug) == 1
    tree = yaml.safe_load(debug[0].split("\n", 1)[1])
    assert tree["run"]["name"] == "digest" and tree["sampler"]["target_docs"] == 700
    assert "\n  " in debug[0]  # indented, not one line


def test_report_compare_takes_out_after_the_runs(tmp_path: Path) -> None:
    """`report.py compare A B --out DIR` (as its --help shows) writes the dashboard into DIR."""
    out = tmp_path / "dash"
    r = subprocess.run([sys.executable, "report.py", "compare", "reports/examples/demo", "reports/examples/demo_b",
                        "--out", str(out), "--threshold", "token_share_pp=2"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert {p.name for p in out.iterdir()} == {"dashboard.html", "dashboard.md", "dashboard.json"}
    import json

    assert json.loads((out / "dashboard.json").read_text())["thresholds"]["token_share_pp"] == 2


PIPELINE_STAGES = ("mix_sampler", "cross_source_dedup", "train_tokenizer", "pack_shuffle", "smoke_train")


def _commands(text: str) -> list[list[str]]:
    """Shell lines of ``text`` (continuations joined, comments cut, leading VAR=value dropped)."""
    out = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # prose with an unbalanced quote
            continue
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words:
            out.append(words)
    return out


def _check_script_call(script: str, argv: list[str]) -> None:
    mod = _load(script)
    argv = ["0" * 64 if w.startswith("$(") else w for w in argv]
    if script == "report.py":
        from minideepseek.dashboard.drift import Thresholds

        Thresholds.parse(mod.parse_args(argv).threshold)
        return
    args = mod.build_parser().parse_args(argv)
    from minideepseek.runconfig import load_stage_config

    modname, cls = STAGE_CONFIGS[script]
    load_stage_config(getattr(importlib.import_module(modname), cls), args.config, args.overrides, quiet=True)
    _own_run_name([script, *argv], args.overrides)
    if script == "withdraw.py":
        from minideepseek.tickets import SELECTOR_KINDS, Selector

        for kind in SELECTOR_KINDS:
            for v in getattr(args, kind) or []:
                Selector(kind, v)


def _own_run_name(argv: list[str], sets: list[str]) -> None:
    """A documented example that resizes a run must name its own run, not write over the config's."""
    if any(x.startswith(("sampler.target_docs=", "sampler.target_tokens=")) for x in sets):
        assert any(x.startswith("run.name=") for x in sets), f"{argv}: resizes the run without --set run.name=..."


def _check_pipeline_call(argv: list[str]) -> None:
    """run_pipeline.sh's own argument loop, in Python: stage names, executor, and every stage's config."""
    from minideepseek.runconfig import load_stage_config

    withdraw = bool(argv) and argv[0] == "withdraw"
    rest, config, sets, extra = argv[1:] if withdraw else argv, "configs/demo.yaml", [], []
    i = 0
    while i < len(rest):
        w = rest[i]
        if w in ("--config", "--from", "--only", "--set", "--executor", "--ray-address", "--log-level"):
            v = rest[i + 1]
            if w == "--config":
                config = v
            elif w == "--set":
                sets.append(v)
            elif w in ("--from", "--only"):
                assert v in PIPELINE_STAGES, f"run_pipeline.sh {argv}: unknown stage {v}"
            elif w == "--executor":
                assert v in ("local", "ray"), argv
            elif w == "--log-level":
                assert v.upper() in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), argv
            i += 2
        elif w in ("--force", "--restart", "-h", "--help"):
            i += 1
        elif w == "--strict":
            sets.append("sampler.strict=true")
            i += 1
        else:
            assert withdraw, f"run_pipeline.sh {argv}: unknown argument {w}"
            extra.append(w)
            i += 1
    _own_run_name(argv, sets)
    for script in ("mix_sampler.py", "cross_source_dedup.py", "train_tokenizer.py", "pack_shuffle.py",
                   "smoke_train.py"):
        modname, cls = STAGE_CONFIGS[script]
        load_stage_config(getattr(importlib.import_module(modname), cls), config, sets, quiet=True)
    if withdraw:
        _check_script_call("withdraw.py", extra + ["--config", config] + [x for s in sets for x in ("--set", s)])


def test_readme_and_pipeline_usage_examples_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command in the README's code blocks and run_pipeline.sh's usage that runs a stage script or
    the pipeline parses, and its --config/--set load into every stage config it reaches."""
    monkeypatch.chdir(ROOT)
    readme = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", readme, re.S))
    usage = "\n".join(line[1:] for line in (ROOT / "run_pipeline.sh").read_text().splitlines()[1:14]
                      if line.startswith("#"))
    usage = re.sub(r"\[(--[^\]]*)\]", r"\1", usage)  # usage notation: [--opt VALUE] is an optional part
    seen = 0
    for words in _commands(blocks + "\n" + usage):
        if words[:2] == ["bash", "run_pipeline.sh"]:
            _check_pipeline_call(words[2:])
            seen += 1
        elif len(words) > 1 and Path(words[0]).name == "python" and words[1] in SCRIPTS and "--help" not in words:
            _check_script_call(words[1], words[2:])
            seen += 1
    assert seen >= 20, f"only {seen} commands found in README code blocks and run_pipeline.sh usage"
