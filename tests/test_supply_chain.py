"""Supply chain: demo-corpus downloads checked against the repo's expected hashes (tampered cached
files, Debian drift, unpinned packages, pinning), crafted archives that try to write outside the
cache, the hash-pinned lock, and Ray's local instance bound to loopback."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from minideepseek.demo_corpus.build import MANIFEST, DemoCorpus, build_demo_corpus, corpus_root
from minideepseek.demo_corpus.fetch import Fetcher, Package, Shortfall, Source
from minideepseek.demo_corpus.pins import EXPECTED_FILE, Expected, IntegrityError, pin_from_manifest
from minideepseek.summary import demo_corpus_warnings

ROOT = Path(__file__).resolve().parents[1]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _wheel_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def cache(tmp_path):
    """A cache holding one PyPI wheel and one Debian package (as a download would leave them)."""
    dl = tmp_path / "cache" / "downloads"
    whl = dl / "pypi" / "foo-1.0" / "foo-1.0-py3-none-any.whl"
    whl.parent.mkdir(parents=True)
    whl.write_bytes(_wheel_bytes({"foo/data.txt": b"hello"}))
    deb = dl / "debian" / "bar-doc_2.0-1_all.deb"
    deb.parent.mkdir(parents=True)
    deb.write_bytes(b"not really a deb, only its hash matters here")
    exp = Expected(pypi={"foo==1.0": {whl.name: _sha(whl.read_bytes())}},
                   debian={"bar-doc": {"version": "2.0-1", "file": deb.name, "sha256": _sha(deb.read_bytes())}},
                   content=CONTENT_PIN)
    return dl, whl, deb, exp


def test_cached_files_are_verified_and_a_tampered_one_is_an_error(cache):
    dl, whl, deb, exp = cache
    f = Fetcher(dl, exp)
    assert f.open(Source("pypi", "foo", "1.0")).warnings == ()
    assert f.open(Source("debian", "bar-doc")).warnings == ()
    good = _sha(whl.read_bytes())
    whl.write_bytes(whl.read_bytes() + b"\0")  # the cached copy is altered
    with pytest.raises(IntegrityError) as e:
        f.open(Source("pypi", "foo", "1.0"))
    msg = str(e.value)
    assert str(whl) in msg and f"expected {good}" in msg and f"found {_sha(whl.read_bytes())}" in msg
    assert "python -m minideepseek.demo_corpus pin" in msg and "\n" not in msg  # how to accept, one line
    deb.write_bytes(b"same version, other bytes")
    with pytest.raises(IntegrityError, match="sha256 mismatch for Debian bar-doc 2.0-1"):
        f.open(Source("debian", "bar-doc"))


def _real_wheel(name: str, version: str) -> bytes:
    """A minimal installable wheel (pip reads its METADATA to check the name and version)."""
    di = f"{name}-{version}.dist-info"
    return _wheel_bytes({f"{name}/__init__.py": b"", f"{di}/METADATA": f"Metadata-Version: 2.1\nName: {name}\n"
                         f"Version: {version}\n".encode(), f"{di}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n", f"{di}/RECORD": b""})


@pytest.mark.stage
def test_pip_download_is_wheel_only_hash_enforced_and_isolated(tmp_path, monkeypatch):
    """No network: pip sees only a local folder (PIP_NO_INDEX + PIP_FIND_LINKS). A ``pip/`` planted in the
    cache where pip used to run, and an sdist whose setup.py would run at download time: neither runs
    (with the previous fetch.py the planted pip ran). A wheel whose bytes differ from the pin is refused
    by pip before it is kept."""
    marker = tmp_path / "code_ran.txt"
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    dl = tmp_path / "cache" / "downloads"
    for where in (dl / "pypi" / "pip", dl / "pip"):  # the old working directory and its parent
        where.mkdir(parents=True)
        (where / "__init__.py").write_text(payload)
        (where / "__main__.py").write_text(payload)
    links = tmp_path / "links"
    links.mkdir()
    whl = links / "wheelpkg-1.0-py3-none-any.whl"
    whl.write_bytes(_real_wheel("wheelpkg", "1.0"))
    sdist = links / "sdonly-1.0.tar.gz"
    setup = tarfile.TarInfo("sdonly-1.0/setup.py")
    code = (payload + "from setuptools import setup\nsetup(name='sdonly', version='1.0')\n").encode()
    setup.size = len(code)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.addfile(setup, io.BytesIO(code))
    sdist.write_bytes(buf.getvalue())
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.chdir(dl / "pypi")
    exp = Expected(pypi={"wheelpkg==1.0": {whl.name: _sha(whl.read_bytes())},
                         "sdonly==1.0": {sdist.name: _sha(sdist.read_bytes())}})
    f = Fetcher(dl, exp)
    got = f.pypi("wheelpkg", "1.0")
    assert got.name == whl.name and got.read_bytes() == whl.read_bytes() and f.open(Source("pypi", "wheelpkg", "1.0"))
    with pytest.raises(Shortfall, match="wheels only"):
        f.pypi("sdonly", "1.0")
    assert not marker.exists()  # neither the planted pip nor the sdist's build ran
    other = tmp_path / "other" / "downloads"
    with pytest.raises(Shortfall):
        Fetcher(other, Expected(pypi={"wheelpkg==1.0": {whl.name: "0" * 64}})).pypi("wheelpkg", "1.0")
    assert not list(other.rglob("*.whl"))  # refused by pip's --require-hashes, nothing kept


def test_debian_drift_and_unpinned_packages_are_warnings(cache):
    dl, whl, deb, exp = cache
    newer = deb.with_name("bar-doc_2.1-1_all.deb")
    deb.rename(newer)  # the archive served another version
    pkg = Fetcher(dl, exp).open(Source("debian", "bar-doc"))
    assert len(pkg.warnings) == 1 and pkg.warnings[0].startswith("drift: Debian bar-doc: expected version 2.0-1")
    assert "served 2.1-1" in pkg.warnings[0]
    # a package of the sources list that the expected list does not name: reported, not trusted silently
    empty = Expected(path="expected_hashes.json")
    for src in (Source("pypi", "foo", "1.0"), Source("debian", "bar-doc")):
        (w,) = Fetcher(dl, empty).open(src).warnings
        assert w.startswith("unpinned: ") and src.name in w and "demo_corpus pin" in w
    # another file for a pinned PyPI version (another platform's wheel, an sdist): an error
    other = Expected(pypi={"foo==1.0": {"foo-1.0.tar.gz": "0" * 64}})
    with pytest.raises(IntegrityError, match="no expected sha256 for this file"):
        Fetcher(dl, other).open(Source("pypi", "foo", "1.0"))


RECORD = b'{"doc_key": "debian:bar-doc:x", "domain": "zh", "component": "bar", "format": "text", "raw": "hi"}\n'
CONTENT_PIN = {"v1": {"bar": {"version": "2.0-1", "sha256": _sha(RECORD), "n_docs": 1}}}


def _fake_build(cache_dir: Path, deb: Path, version: str, records: bytes = RECORD) -> DemoCorpus:
    """A complete cached build (manifest + one domain file) as build_demo_corpus leaves it."""
    root = corpus_root(cache_dir, ("debian",))
    root.mkdir(parents=True)
    dom = root / "zh.jsonl.gz"
    dom.write_bytes(gzip.compress(records, mtime=0))
    comp = {"component": "bar", "domain": "zh", "tier": "debian", "status": "ok", "source": "debian",
            "package": "bar-doc", "version": version, "file": deb.name, "path": str(deb),
            "sha256": _sha(deb.read_bytes()), "warnings": [], "content_sha256": _sha(records),
            "n_docs": records.count(b"\n")}
    domains = {d: {"file": None, "file_sha256": None, "components": []} for d in ("web_en", "code", "math", "academic")}
    domains["zh"] = {"file": dom.name, "file_sha256": _sha(dom.read_bytes()), "components": ["bar"]}
    man = {"builder_version": 1, "tiers": ["debian"], "domains": domains, "components": [comp], "shortfalls": [],
           "built_at": "x", "build_seconds": 0.0}
    (root / MANIFEST).write_text(json.dumps(man))
    return DemoCorpus(root, man)


def test_reused_build_is_rechecked_and_strict_refuses_drift(cache):
    dl, whl, deb, exp = cache
    cache_dir = dl.parent
    built = _fake_build(cache_dir, deb, "2.0-1")
    corpus = build_demo_corpus(cache_dir, tiers=("debian",), expected=exp)
    assert corpus.integrity_warnings == [] and corpus.manifest["integrity"]["verified"] == 1
    corpus.require_pinned()  # strict passes when everything matches
    # re-pinned to another version since the build: drift, recorded in the manifest (in memory)
    moved = Expected(debian={"bar-doc": {"version": "1.9-1", "file": "bar-doc_1.9-1_all.deb", "sha256": "1" * 64}},
                     content=CONTENT_PIN)
    corpus = build_demo_corpus(cache_dir, tiers=("debian",), expected=moved)
    (w,) = corpus.integrity_warnings
    assert w.startswith("drift: Debian bar-doc: expected version 1.9-1") and "served 2.0-1" in w
    assert corpus.manifest["components"][0]["warnings"] == [w]
    with pytest.raises(IntegrityError, match="demo_corpus.strict: 1 package"):
        corpus.require_pinned()
    # the run summary reads the same warnings from stage 1's inputs
    raw_manifest = {"inputs": [{"detail": {"components": corpus.manifest["components"]}}]}
    assert demo_corpus_warnings(raw_manifest) == [w]
    # a cached domain file altered after the build
    dom = built.root / "zh.jsonl.gz"
    dom.write_bytes(dom.read_bytes() + b"x")
    with pytest.raises(IntegrityError, match="zh.jsonl.gz: sha256 mismatch for the cached demo corpus domain zh"):
        build_demo_corpus(cache_dir, tiers=("debian",), expected=exp)


def test_reused_build_rewritten_with_its_manifest_is_refused_by_the_repo_pins(cache):
    """Whoever can write the cache can rewrite a domain file *and* the manifest that records its hashes:
    the records are then checked against the repo's content pins, which the cache cannot change."""
    dl, whl, deb, exp = cache
    planted = RECORD.replace(b'"raw": "hi"', b'"raw": "planted text"')
    _fake_build(dl.parent, deb, "2.0-1", planted)  # self-consistent: manifest hashes match the planted file
    with pytest.raises(IntegrityError, match="built records of component bar"):
        build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)
    unpinned = build_demo_corpus(dl.parent, tiers=("debian",), expected=Expected(
        pypi=exp.pypi, debian=exp.debian))  # the repo does not pin this component: reported, strict refuses
    assert [w[:36] for w in unpinned.integrity_warnings] == ["unpinned: the built records of compo"]
    with pytest.raises(IntegrityError, match="demo_corpus.strict"):
        unpinned.require_pinned()


def test_reused_build_with_records_its_manifest_does_not_list_is_refused(cache):
    dl, whl, deb, exp = cache
    extra = RECORD.replace(b'"component": "bar"', b'"component": "evil"')
    built = _fake_build(dl.parent, deb, "2.0-1", RECORD + extra)
    man = json.loads((built.root / MANIFEST).read_text())
    man["components"][0].update(content_sha256=_sha(RECORD), n_docs=1)  # the manifest only knows "bar"
    (built.root / MANIFEST).write_text(json.dumps(man))
    with pytest.raises(IntegrityError, match="records of component evil"):
        build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)
    man["domains"]["zh"]["file"] = "../../../etc/passwd"
    (built.root / MANIFEST).write_text(json.dumps(man))
    with pytest.raises(IntegrityError, match="names the file"):
        build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)


def _derive(built: DemoCorpus, records: bytes, source_sha: str) -> None:
    """Rewrite a fake build as the scale bench leaves a derived corpus: new records, the manifest's hashes
    of them, and the demo-corpus records it claims to come from."""
    dom = built.root / "zh.jsonl.gz"
    dom.write_bytes(gzip.compress(records, mtime=0))
    man = json.loads((built.root / MANIFEST).read_text())
    man["domains"]["zh"]["file_sha256"] = _sha(dom.read_bytes())
    man["components"][0].update(content_sha256=_sha(records), n_docs=records.count(b"\n"))
    man["derived"] = {"by": "bench/bench_scale.py", "from_components": {
        "bar": {"version": "2.0-1", "content_sha256": source_sha}}}
    (built.root / MANIFEST).write_text(json.dumps(man))


def test_derived_corpus_is_read_only_on_purpose_and_only_from_pinned_sources(cache, monkeypatch):
    """The scale bench's recombined corpus has records no pin can hash: it is refused unless
    ``MINIDEEPSEEK_ALLOW_DERIVED_CORPUS=1``, and even then the records it claims to come from must match
    the repo's pins; its own records are still checked against its manifest."""
    from minideepseek.demo_corpus.build import DERIVED_ENV

    dl, whl, deb, exp = cache
    recombined = RECORD.replace(b'"raw": "hi"', b'"raw": "hi hi, recombined"') * 3
    built = _fake_build(dl.parent, deb, "2.0-1")
    _derive(built, recombined, _sha(RECORD))
    monkeypatch.delenv(DERIVED_ENV, raising=False)
    with pytest.raises(IntegrityError, match=f"derived by bench/bench_scale.py.*set {DERIVED_ENV}=1"):
        build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)
    monkeypatch.setenv(DERIVED_ENV, "1")
    corpus = build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)
    assert corpus.integrity_warnings == [] and "derived" in corpus.manifest["integrity"]
    assert len(list(corpus.iter_domain("zh"))) == 3
    # its domain files match their sha256s: their records are not read back again (at 1B, minutes)
    from minideepseek.demo_corpus import build as build_mod

    def no_reread(corpus: DemoCorpus) -> None:
        raise AssertionError("a derived corpus whose files match was re-hashed record by record")

    with monkeypatch.context() as m:
        m.setattr(build_mod, "record_hashes", no_reread)
        assert build_demo_corpus(dl.parent, tiers=("debian",), expected=exp).manifest["derived"]
    # a claimed source the repo pins with another hash: refused even with the opt-in
    _derive(built, recombined, _sha(b"other records"))
    with pytest.raises(IntegrityError, match="built records of component bar"):
        build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)
    # the derived records altered after the build: their own manifest check still holds
    _derive(built, recombined, _sha(RECORD))
    dom = built.root / "zh.jsonl.gz"
    dom.write_bytes(gzip.compress(recombined + RECORD, mtime=0))
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        build_demo_corpus(dl.parent, tiers=("debian",), expected=exp)


def test_stage1_demo_corpus_strict_stops_on_drift(cache, tmp_path, monkeypatch, capsys):
    import yaml

    import mix_sampler
    from minideepseek.config import config_hash
    from minideepseek.demo_corpus import pins
    from minideepseek.runconfig import load_stage_config
    from minideepseek.sampling.config import MixSamplerConfig

    dl, whl, deb, exp = cache
    _fake_build(dl.parent, deb, "2.0-1")
    drift = Expected(debian={"bar-doc": {"version": "1.9-1", "file": "bar-doc_1.9-1_all.deb", "sha256": "1" * 64}},
                     content=CONTENT_PIN)
    monkeypatch.setattr(pins.Expected, "load", classmethod(lambda cls, path=None: drift))
    cfg = {"run": {"name": "s", "seed": 1, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep"),
                   "cache_dir": str(dl.parent)},
           "sources": [{"name": "zh", "type": "demo", "domain": "zh", "weight": 1.0}],
           "sampler": {"target_docs": 1, "demo_tiers": ["debian"], "num_proc": 1},
           "demo_corpus": {"strict": True}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert mix_sampler.main(["--config", str(path)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "demo_corpus.strict: 1 package" in err[0] and "drift: Debian bar-doc" in err[0]
    assert not (tmp_path / "data" / "s" / "mixed_raw").exists()
    # strict decides whether a run proceeds, not what it produces: the config hash ignores it
    loose = load_stage_config(MixSamplerConfig, path, ["demo_corpus.strict=false"])
    assert config_hash(loose) == config_hash(load_stage_config(MixSamplerConfig, path))
    path.write_text(yaml.safe_dump({**cfg, "demo_corpus": {"strictt": True}}))
    with pytest.raises(Exception, match="strictt"):
        load_stage_config(MixSamplerConfig, path)


def test_pin_records_the_build_and_names_what_it_could_not_pin(cache, tmp_path):
    dl, whl, deb, exp = cache
    built = _fake_build(dl.parent, deb, "2.0-1")
    sources = [("debian", "bar-doc", None), ("debian", "new-pkg", None), ("pypi", "baz", "3.0")]
    data, notes = pin_from_manifest(built.manifest, dl, Expected(), sources)
    assert data["debian"] == {"bar-doc": {"version": "2.0-1", "file": deb.name, "sha256": _sha(deb.read_bytes())}}
    assert any(n.startswith("NOT PINNED: Debian new-pkg") for n in notes)
    assert any(n.startswith("NOT PINNED: PyPI baz==3.0") for n in notes)
    deb.write_bytes(b"altered after the build")  # a tampered cache is never pinned
    with pytest.raises(IntegrityError, match="differs from the build's record"):
        pin_from_manifest(built.manifest, dl, Expected(), sources)


def test_repo_expected_list_covers_every_demo_corpus_package():
    """The committed list names every PyPI file and Debian package of the corpus (re-pin after adding
    one: `python -m minideepseek.demo_corpus pin`)."""
    from minideepseek.demo_corpus.components import default_components

    exp = Expected.load(EXPECTED_FILE)
    srcs = {(c.source.kind, c.source.name, c.source.version) for c in default_components()}
    missing = [f"{n}=={v}" for k, n, v in srcs if k == "pypi" and f"{n}=={v}" not in exp.pypi]
    missing += [n for k, n, v in srcs if k == "debian" and n not in exp.debian]
    assert not missing, f"not in {EXPECTED_FILE.name}: {sorted(missing)}; run `python -m minideepseek.demo_corpus pin`"
    for files in exp.pypi.values():
        assert files and all(len(h) == 64 for h in files.values())
    assert all(len(d["sha256"]) == 64 and d["version"] for d in exp.debian.values())


# --- crafted archives: members with '..', absolute paths, symlinks -------------------------------

EVIL_NAMES = ("../../escaped.txt", "/tmp/minideepseek-absolute-escape.txt", "ok/../../../up.txt")


def _tar_bytes(members: list[tarfile.TarInfo], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for info in members:
            data = info.name.encode() if info.isfile() else None
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _crafted_tar_members(prefix: str) -> list[tarfile.TarInfo]:
    out = [tarfile.TarInfo(prefix + n) if not n.startswith("/") else tarfile.TarInfo(n) for n in EVIL_NAMES]
    link = tarfile.TarInfo(prefix + "docs/passwd.txt")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    up = tarfile.TarInfo(prefix + "docs/up")
    up.type, up.linkname = tarfile.SYMTYPE, "../../../.."
    hard = tarfile.TarInfo(prefix + "docs/hard.txt")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/hostname"
    through = tarfile.TarInfo(prefix + "docs/up/through-link.txt")  # a file "inside" the symlinked dir
    return [*out, link, up, hard, through, tarfile.TarInfo(prefix + "docs/fine.txt")]


def _ar(members: dict[str, bytes]) -> bytes:
    """A minimal ar archive (the .deb container)."""
    out = [b"!<arch>\n"]
    for name, data in members.items():
        out.append(f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode())
        out.append(data + (b"\n" if len(data) % 2 else b""))
    return b"".join(out)


def _snapshot(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob("*")}


@pytest.mark.parametrize("kind", ["wheel", "sdist", "deb"])
def test_crafted_archive_writes_nothing_outside_the_cache(tmp_path, monkeypatch, kind):
    cache_dir = tmp_path / "work" / "cache"
    pkgdir = cache_dir / "downloads" / kind
    pkgdir.mkdir(parents=True)
    if kind == "wheel":
        file = pkgdir / "evil-1.0-py3-none-any.whl"
        file.write_bytes(_wheel_bytes({**{n: n.encode() for n in EVIL_NAMES}, "docs/fine.txt": b"docs/fine.txt"}))
    elif kind == "sdist":
        file = pkgdir / "evil-1.0.tar.gz"
        file.write_bytes(_tar_bytes(_crafted_tar_members("evil-1.0/")))
    else:
        if shutil.which("dpkg-deb") is None:
            pytest.skip("dpkg-deb not installed (the debian tier needs it)")
        file = pkgdir / "evil_1.0_all.deb"
        control = _tar_bytes([tarfile.TarInfo("./control")])
        file.write_bytes(_ar({"debian-binary": b"2.0\n", "control.tar.gz": control,
                              "data.tar.gz": _tar_bytes(_crafted_tar_members("./"))}))
        assert subprocess.run(["dpkg-deb", "--fsys-tarfile", str(file)], capture_output=True).returncode == 0
    run_dir = tmp_path / "work" / "cwd"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)  # relative '..' members would land next to the cache from here
    abs_target = Path("/tmp/minideepseek-absolute-escape.txt")
    abs_target.unlink(missing_ok=True)
    before = _snapshot(tmp_path)
    pkg = Package(Source(kind="debian" if kind == "deb" else "pypi", name="evil", version="1.0"), "1.0", file, None)
    got = dict(pkg.members(lambda path: True))
    assert _snapshot(tmp_path) == before  # nothing written anywhere under the test's tree
    assert not abs_target.exists() and not (tmp_path / "escaped.txt").exists() and not (tmp_path / "up.txt").exists()
    # every member came back as bytes in memory; links were neither followed nor returned
    assert got.get("docs/fine.txt", b"").endswith(b"docs/fine.txt")  # (its data is its own member name)
    assert all(isinstance(v, bytes) for v in got.values())
    assert b"root:" not in b"".join(got.values())  # /etc/passwd never read through the symlink
    assert not any(k.endswith(("passwd.txt", "hard.txt", "docs/up")) for k in got)


# --- the hash-pinned lock -------------------------------------------------------------------------

def test_lock_pins_every_package_with_a_hash_and_matches_requirements():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import lock_requirements
    finally:
        sys.path.pop(0)
    assert lock_requirements.check(ROOT / "requirements.txt", ROOT / "requirements.lock") == []
    text = (ROOT / "requirements.lock").read_text()
    entries = [e for e in text.replace("\\\n", " ").splitlines() if e.strip() and not e.startswith("#")]
    assert len(entries) > 50 and all("==" in e and "--hash=sha256:" in e for e in entries)
    names = {e.split("==")[0].lower() for e in entries}
    assert {"torch", "pip", "pytest", "ruff", "ray", "transformers", "megatron-core"} <= names
    ensure = (ROOT / "scripts" / "ensure_venv.sh").read_text()
    assert "--require-hashes" in ensure and "--upgrade pip" not in ensure.replace("`pip install --upgrade pip`", "")


def test_check_venv_names_every_difference_from_the_lock(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import check_venv
    finally:
        sys.path.pop(0)
    lock = (ROOT / "requirements.lock").read_text()
    assert check_venv.main([str(ROOT / "requirements.lock")]) == 0  # this venv is exactly the lock
    have = check_venv.installed()
    edited = tmp_path / "lock"
    edited.write_text(lock.replace("\nclick==", "\nclick==0.0.1 \\\n    --hash=sha256:00\nxclick==")
                      + "not-installed-pkg==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    diff = check_venv.differences(check_venv.pinned(edited), have)
    assert f"click is {have['click']}, the lock pins 0.0.1" in diff
    assert "missing not-installed-pkg==1.0" in diff and f"not in the lock: click=={have['click']}" not in diff
    assert check_venv.main([str(edited)]) == 1


def _fake_venv(tmp_path: Path, stamp: str) -> Path:
    """A venv directory whose python is this checkout's venv python (so check_venv sees the real packages)."""
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    py = venv / "bin" / "python"
    py.write_text(f"#!/bin/sh\nexec {ROOT / '.venv' / 'bin' / 'python'} \"$@\"\n")
    py.chmod(0o755)
    (venv / "leftover-from-an-old-lock").write_text("x")
    (venv / ".requirements.sha256").write_text(stamp + "\n")
    return venv


def test_ensure_venv_reuses_only_a_venv_built_from_this_lock(tmp_path):
    """Same lock and same packages: reused as is. Another lock's stamp: the venv is removed and built
    anew (here the new interpreter refuses to start, so nothing is downloaded)."""
    want = hashlib.sha256((ROOT / "requirements.txt").read_bytes() + (ROOT / "requirements.lock").read_bytes())
    fake_python = tmp_path / "python3"
    fake_python.write_text(f"#!/bin/sh\nif [ \"$1\" = -m ]; then echo \"would run: $*\"; exit 7; fi\n"
                           f"exec {ROOT / '.venv' / 'bin' / 'python'} \"$@\"\n")
    fake_python.chmod(0o755)

    def ensure(venv: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(ROOT / "scripts" / "ensure_venv.sh")], cwd=ROOT, capture_output=True,
                              text=True, env={**os.environ, "VENV": str(venv), "PYTHON": str(fake_python)}, timeout=120)

    venv = _fake_venv(tmp_path / "a", want.hexdigest())
    res = ensure(venv)
    assert res.returncode == 0 and (venv / "leftover-from-an-old-lock").exists(), res.stderr
    venv = _fake_venv(tmp_path / "b", "0" * 64)
    res = ensure(venv)
    assert res.returncode == 7 and "would run: -m venv" in res.stdout and not venv.exists(), res.stderr


# --- Ray's local instance -------------------------------------------------------------------------

def test_ray_local_instance_binds_loopback_without_dashboard():
    from minideepseek.executor import ray_init_kwargs

    local = ray_init_kwargs(None, 2)
    assert local["include_dashboard"] is False
    assert local["_node_ip_address"] == "127.0.0.1"
    remote = ray_init_kwargs("10.0.0.1:6379", None)  # joining a cluster: its own network settings
    assert remote["address"] == "10.0.0.1:6379" and "_node_ip_address" not in remote
