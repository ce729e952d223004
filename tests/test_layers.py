"""The pipeline's shape is written once (minideepseek/pipeline.py) and the packages respect its layers:
no stage package imports a later stage's package, the shared floors import no stage at all."""

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minideepseek import pipeline

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "minideepseek"
# Top-level modules that are clients of every stage (they read all artifacts/reports); every other
# top-level module is a floor under the stages.
TOP_CLIENTS = {"summary", "readme_figures", "validate", "cli"}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported minideepseek module) for every import in ``path``, top-level or inside functions."""
    mod = _module(path)
    pkg_parts = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg_parts[:len(pkg_parts) - (n.level - 1)]
                target = ".".join(base + ([n.module] if n.module else []))
            else:
                target = n.module or ""
            names = [f"{target}.{a.name}" for a in n.names] if target == "minideepseek" else [target]
            out += [(n.lineno, t) for t in names]
        elif isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names]
    return [(ln, t) for ln, t in out if t.startswith("minideepseek.")]


def _layer(mod: str) -> int:
    """Layer of a minideepseek module: a package's layer from the registry; top-level floors 0."""
    parts = mod.split(".")
    name = parts[1]
    if (PKG / name).is_dir():
        return pipeline.layer_of(name)
    return len(pipeline.STAGES) + 1 if name in TOP_CLIENTS else 0


def test_registry_is_consistent() -> None:
    names = pipeline.names()
    assert len(set(names)) == len(names) and len(set(pipeline.artifacts())) == len(names)
    for i, s in enumerate(pipeline.STAGES):
        assert (ROOT / s.script).is_file(), s.script
        assert (PKG / s.package / "__init__.py").is_file(), s.package
        fields = {f.name for f in dataclasses.fields(s.config_class())}
        assert fields == {"run", *s.sections}, (s.name, fields)
        earlier = {t.artifact for t in pipeline.STAGES[:i]}
        assert set(s.upstream) <= earlier, f"{s.name} reads an artifact of a later stage"
        assert callable(pipeline.entry(s)) and pipeline.entry(s).__module__ == f"minideepseek.{s.package}.stage"
        if s.executor:  # the CPU stages print their line through cli.stage_script
            assert callable(pipeline.summary_line(s))
        if s.remove_ids:
            assert callable(pipeline.hook(s))
        assert pipeline.stage(s.artifact) is s and pipeline.stage(s.script) is s
    with pytest.raises(KeyError, match="stages:"):
        pipeline.stage("nope")


@pytest.mark.stage
def test_no_package_imports_a_later_stage() -> None:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        me = _module(path)
        if me == "minideepseek":
            continue  # the package's face: a docstring
        mine = _layer(me)
        my_pkg = me.split(".")[1]
        for line, target in _imports(path):
            if target.split(".")[1] == my_pkg:
                continue
            if _layer(target) > mine:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} (layer {_layer(target)} > {mine})")
    assert not bad, "imports that run up the layers:\n" + "\n".join(bad)


@pytest.mark.stage
def test_layer_walk_sees_upward_imports(tmp_path: Path) -> None:
    """The walk above must be able to fail: an import from stage 1's package of stage 4's is reported."""
    fake = PKG / "sampling" / "_layer_probe.py"
    fake.write_text("def f():\n    from ..packing.stage import run_pack\n    return run_pack\n")
    try:
        with pytest.raises(AssertionError, match="_layer_probe.py:2 imports minideepseek.packing.stage"):
            test_no_package_imports_a_later_stage()
    finally:
        fake.unlink()


def test_stage_list_is_defined_once() -> None:
    """No file but the registry spells out three or more stage or artifact names in one line (a copy
    of the stage list); tests may state expected names."""
    names, arts = set(pipeline.names()), set(pipeline.artifacts())
    files = [*ROOT.glob("*.py"), *ROOT.glob("*.sh"), *PKG.rglob("*.py"), *(ROOT / "bench").rglob("*.py"),
             *(ROOT / "scripts").glob("*")]
    copies = []
    for f in files:
        if f == PKG / "pipeline.py" or not f.is_file():
            continue
        for i, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            quoted = set(re.findall(r"[\"'](\w+)[\"']", line))
            bare = set(re.findall(r"\b(\w+)\b", line)) if f.suffix == ".sh" else set()
            if len((quoted | bare) & names) >= 3 or len(quoted & arts) >= 3:
                copies.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert not copies, "stage list copies:\n" + "\n".join(copies)


def test_run_pipeline_reads_the_registry() -> None:
    out = subprocess.run([sys.executable, "-m", "minideepseek.pipeline", "list"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert tuple(out) == pipeline.names()
    ex = subprocess.run([sys.executable, "-m", "minideepseek.pipeline", "list", "--executor"], cwd=ROOT,
                        capture_output=True, text=True, check=True).stdout.split()
    assert ex == [s.name for s in pipeline.STAGES if s.executor]
    usage = subprocess.run(["bash", "run_pipeline.sh", "--help"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "stages: " + " ".join(pipeline.names()) in usage


def test_config_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Plan builds every stage's config and every expected hash from one parse of the file."""
    from minideepseek import runconfig

    calls = []
    real = runconfig.load_yaml
    monkeypatch.setattr(runconfig, "load_yaml", lambda p: calls.append(p) or real(p))
    cfg = tmp_path / "c.yaml"
    cfg.write_text((ROOT / "configs" / "demo.yaml").read_text(encoding="utf-8"))
    plan = pipeline.Plan(cfg, ["run.name=once"])
    hashes = plan.expected_hashes()
    plan.validate_all()
    for s in pipeline.STAGES:
        assert plan.upstream_hashes(s.name) == {a: hashes[a] for a in s.upstream}
    assert len(calls) == 1
    cfg.write_text(cfg.read_text() + "\n# edited\n")  # an edited file is parsed again
    pipeline.Plan(cfg, ["run.name=once"]).expected_hashes()
    assert len(calls) == 2


# A line may spell a registry name when the literal means something else of the same name (the
# ``tokenizer:`` config section): it says so with this marker and a reason.
NOT_AN_ARTIFACT = "# not-an-artifact:"
PENDING: set[tuple[str, str]] = set()  # (file, name) allowed while a move is under way; empty now


def registry_name_literals(root: Path) -> list[str]:
    """``file:line: name`` for every quoted literal of a stage's artifact or report file name in
    ``root/minideepseek/**/*.py``, outside pipeline.py and the package of the stage that owns it. A client
    reads them through the registry (``pipeline.PACKED``, ``pipeline.stage(...).artifact``,
    ``pipeline.report("x.json")``: the checked lookup, which fails at import when the stage renames it)."""
    owner = {s.artifact: s.package for s in pipeline.STAGES}
    owner.update({r: s.package for s in pipeline.STAGES for r in s.reports})
    alts = "|".join(re.escape(n) for n in sorted(owner, key=len, reverse=True))
    literal = re.compile(rf"""(['"])({alts})\1""")
    pkg_dir = root / "minideepseek"
    bad = []
    for path in sorted(pkg_dir.rglob("*.py")):
        rel = path.relative_to(pkg_dir)
        if rel == Path("pipeline.py"):
            continue
        package = rel.parts[0] if len(rel.parts) > 1 else None
        shown = path.relative_to(root).as_posix()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NOT_AN_ARTIFACT in line:
                continue
            for m in literal.finditer(line):
                name = m.group(2)
                if owner[name] == package or (shown, name) in PENDING:
                    continue
                if name in pipeline.artifacts() or not line[:m.start()].endswith("pipeline.report("):
                    bad.append(f"{shown}:{i}: {name}")
    return bad


def test_only_the_registry_and_the_owner_name_an_artifact_or_report() -> None:
    """No file outside pipeline.py and the owning stage package spells a stage's artifact directory or
    report file name: renaming one in the registry then renames it everywhere (issue 32)."""
    bad = registry_name_literals(ROOT)
    assert not bad, ("artifact or report names spelled outside the registry and their owner (use pipeline.PACKED, "
                     "pipeline.stage(...).artifact, pipeline.report(...)):\n" + "\n".join(bad))
    with pytest.raises(KeyError, match="no stage publishes"):
        pipeline.report("source_mixture.json")
    assert pipeline.report_owner("certificate.json").name == "cross_source_dedup"


def test_registry_name_scan_finds_a_literal(tmp_path: Path) -> None:
    """The scan sees an artifact path spelled by a client, a report named outside pipeline.report, and lets
    the owner and the marked config section pass."""
    pkg = tmp_path / "minideepseek"
    (pkg / "export").mkdir(parents=True)
    (pkg / "packing").mkdir()
    (pkg / "export" / "megatron.py").write_text('a = run_dir / "mixed_raw"\nb = f"{run_dir / \'packed\'}"\n'
                                                'c = rep / "dedup_report.json"\nd = pipeline.report("dedup_report.json")\n'
                                                'e = cfg.get("tokenizer")  # not-an-artifact: the config section\n')
    (pkg / "packing" / "stage.py").write_text('out = run_dir / "packed" / "packing_report.json"\n')
    assert registry_name_literals(tmp_path) == ["minideepseek/export/megatron.py:1: mixed_raw",
                                                "minideepseek/export/megatron.py:2: packed",
                                                "minideepseek/export/megatron.py:3: dedup_report.json"]


MAX_FUNCTION_LINES = 80  # issue 32: a function longer than this does several things; split it into its steps


def _long_functions(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                size = n.end_lineno - n.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(root.parent)}:{n.lineno} {n.name} ({size} lines)")
    return out


def test_no_function_in_the_package_is_longer_than_the_limit(tmp_path) -> None:
    assert _long_functions(PKG) == []
    # the check can fail: a planted 81-line function is reported with its place
    pkg = tmp_path / "minideepseek"
    pkg.mkdir()
    (pkg / "big.py").write_text("def big():\n" + "    x = 1\n" * 80)
    assert _long_functions(pkg) == ["minideepseek/big.py:1 big (81 lines)"]
