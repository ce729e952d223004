"""Offline tests of the demo corpus builder: splitters, readers, and the atomic cached build.

Nothing here downloads: container formats are checked on tiny inputs shaped like the real
files, and the build logic runs on fake components over directories in ``tmp_path``.
"""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from minideepseek.demo_corpus import DOMAINS, MANIFEST, DemoCorpus, build_demo_corpus, corpus_root
from minideepseek.demo_corpus import __main__ as cli
from minideepseek.demo_corpus import build as build_mod
from minideepseek.demo_corpus import fetch as fetch_mod
from minideepseek.demo_corpus.components import (
    ENWIKI,
    Component,
    Doc,
    Notes,
    collect_enwiki,
    collect_fortunes,
    collect_mpmath,
    select_files,
)
from minideepseek.demo_corpus.fetch import Fetcher, Package, Shortfall, Source
from minideepseek.demo_corpus.splitters import (
    iter_mediawiki_pages,
    keep_vignette,
    r_description_license,
    split_fortunes,
    split_json_chapters,
    split_module_docstrings,
    stable_sample,
)

WIKI_XML = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo><sitename>Wikipedia</sitename><base>https://en.wikipedia.org/wiki/Main_Page</base></siteinfo>
  <page>
    <title>AccessibleComputing</title><ns>0</ns><id>10</id>
    <redirect title="Computer accessibility" />
    <revision><id>1</id><text xml:space="preserve">#REDIRECT [[Computer accessibility]]</text></revision>
  </page>
  <page>
    <title>Anarchism</title><ns>0</ns><id>12</id>
    <revision><id>2</id><model>wikitext</model>
      <text xml:space="preserve">'''Anarchism''' is a [[political philosophy]].&lt;ref&gt;Cite&lt;/ref&gt;
{{Infobox|a=1}}</text></revision>
  </page>
  <page>
    <title>Albert Einstein</title><ns>0</ns><id>736</id>
    <revision><id>3</id><text xml:space="preserve">== Life ==
Born in [[Ulm]].</text></revision>
  </page>
</mediawiki>
"""


def test_mediawiki_splitter_keeps_raw_wikitext(tmp_path: Path) -> None:
    dump = tmp_path / "enwiki.xml.bz2"
    dump.write_bytes(bz2.compress(WIKI_XML.encode()))
    with bz2.open(dump) as fh:
        pages = list(iter_mediawiki_pages(fh))
    assert [p.page_id for p in pages] == [10, 12, 736]
    assert pages[0].redirect == "Computer accessibility"
    assert pages[1].redirect is None and pages[1].title == "Anarchism"
    # markup survives; only XML entities are decoded
    assert pages[1].text.startswith("'''Anarchism''' is a [[political philosophy]].<ref>Cite</ref>")
    assert "{{Infobox|a=1}}" in pages[1].text


def test_enwiki_collector_reads_wheel_and_skips_redirects(tmp_path: Path) -> None:
    whl = tmp_path / "gensim-4.4.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr(ENWIKI, bz2.compress(WIKI_XML.encode()))
        zf.writestr("gensim/__init__.py", "")
    pkg = Package(Source("pypi", "gensim", "4.4.0"), "4.4.0", whl, None)
    notes = Notes()
    docs = list(collect_enwiki(pkg, notes))
    assert [d.title for d in docs] == ["Anarchism", "Albert Einstein"]
    assert docs[1].doc_key == "pypi:gensim:enwiki#00000736"
    assert docs[1].url == "https://en.wikipedia.org/wiki/Albert_Einstein"
    assert {d.fmt for d in docs} == {"wikitext"} and notes.skipped == {"redirect": 1}


def test_fortunes_splitter_keeps_ansi_and_drops_blank() -> None:
    data = (
        "\x1b[32m《静夜思》\x1b[m\n床前明月光，\n%\n\n%\n疑是地上霜。\n%\n".encode()
        + b"bad \xff entry\n%\nlast entry without separator\n"
    )
    entries = split_fortunes(data)
    assert len(entries) == 4
    assert entries[0] == "\x1b[32m《静夜思》\x1b[m\n床前明月光，\n".encode()
    assert entries[2] == b"bad \xff entry\n"
    assert entries[3] == b"last entry without separator\n"


def test_fortunes_collector_numbers_entries(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "usr/share/games/fortunes").mkdir(parents=True)
    (root / "usr/share/games/fortunes/tang300").write_bytes("一\n%\n二\n%\n".encode())
    (root / "usr/share/games/fortunes/tang300.dat").write_bytes(b"\x00\x01")
    pkg = Package(Source("dir", "fortunes-zh", "2.98", root, scheme="debian"), "2.98", root, None)
    docs = list(collect_fortunes(pkg, Notes()))
    assert [d.doc_key for d in docs] == [
        "debian:fortunes-zh:usr/share/games/fortunes/tang300#00001",
        "debian:fortunes-zh:usr/share/games/fortunes/tang300#00002",
    ]


MPMATH_MODULE = '''"""
Extended docstrings for functions.py
"""

pi = r"""
`\\pi`, roughly equal to 3.141592654.

.. math ::

    \\pi = 4 \\arctan 1
"""

degree = r"""Represents one degree of angle, `1^{\\circ} = \\pi/180`."""

N_TERMS = 10

def helper():
    """not a module-level assignment"""

pi = """redefined"""
'''


def test_mpmath_docstring_splitter() -> None:
    docs = split_module_docstrings(MPMATH_MODULE)
    assert [name for name, _ in docs] == ["pi", "degree", "pi@20"]
    assert "\\pi = 4 \\arctan 1" in docs[0][1] and docs[0][1].startswith("\n`\\pi`")


def test_mpmath_collector_one_record_per_docstring(tmp_path: Path) -> None:
    whl = tmp_path / "mpmath-1.3.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("mpmath/function_docs.py", MPMATH_MODULE)
    pkg = Package(Source("pypi", "mpmath", "1.3.0"), "1.3.0", whl, None)
    docs = list(collect_mpmath(pkg, Notes()))
    assert [d.doc_key for d in docs][:2] == ["pypi:mpmath:mpmath/function_docs.py#pi",
                                              "pypi:mpmath:mpmath/function_docs.py#degree"]
    assert docs[1].url == "pypi://mpmath/1.3.0/mpmath/function_docs.py#degree"


def test_json_chapters_title_is_first_line() -> None:
    data = json.dumps(["第一回 宴桃园豪杰三结义\n\n\t滚滚长江东逝水", "第二回 张翼德怒鞭督邮\n正文"]).encode()
    chapters = split_json_chapters(data)
    assert chapters[0] == ("第一回 宴桃园豪杰三结义", "第一回 宴桃园豪杰三结义\n\n\t滚滚长江东逝水")
    with pytest.raises(ValueError):
        split_json_chapters(b'{"a": 1}')


def test_vignette_stub_filter() -> None:
    assert keep_vignette(b"\\documentclass{article}\\includepdf{x.pdf}" + b"x" * 5000) == (False, "stub_includepdf")
    assert keep_vignette(b"\\documentclass{article} short") == (False, "stub_under_4kb")
    assert keep_vignette(b"<<fit>>=\nlm(y ~ x)\n@\n" + b"text " * 1000) == (True, None)
    assert r_description_license(["Package: zoo", "License: GPL-2 | GPL-3"]) == "GPL-2.0-only OR GPL-3.0-only"


def test_stable_sample_is_order_free_and_within_budget() -> None:
    sizes = {f"src/pkg{i % 7}/f{i}.go": 100 + i for i in range(200)}
    a = stable_sample(sizes, 5_000, "golang")
    b = stable_sample(dict(reversed(list(sizes.items()))), 5_000, "golang")
    assert a == b and 4_500 < sum(sizes[p] for p in a) <= 5_000
    assert len({p.split("/")[1] for p in a}) > 3  # spread over the tree, not the first dir
    assert stable_sample(sizes, 5_000, "other salt") != a


def test_select_files_gunzip_marker_and_exclude(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "man1").mkdir(parents=True)
    (root / "man1/ls.1.gz").write_bytes(gzip.compress(".TH LS 1\n.SH 名称\n".encode()))
    (root / "man1/broken.1.gz").write_bytes(b"not gzip")
    (root / "man1/skip.1").write_text(".TH SKIP 1\n")
    pkg = Package(Source("dir", "manpages-zh", "1", root, scheme="debian"), "1", root, None)
    notes = Notes()
    docs = list(select_files(r"^man1/", "roff", exclude=r"skip", gunzip=True, contains=b".TH")(pkg, notes))
    assert [(d.doc_key, d.data) for d in docs] == [("debian:manpages-zh:man1/ls.1.gz", ".TH LS 1\n.SH 名称\n".encode())]
    assert notes.skipped == {"bad_gzip": 1}


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_deb_members_stream_without_unpacking(tmp_path: Path) -> None:
    tree = tmp_path / "build"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text(
        "Package: demo-doc\nVersion: 1:1.0-1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: t\n")
    (tree / "usr/share/doc/demo").mkdir(parents=True)
    (tree / "usr/share/doc/demo/page.html").write_text("<html>hi</html>")
    (tree / "usr/share/doc/demo/alias.html").symlink_to("page.html")
    deb = tmp_path / "demo-doc_1%3a1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(tree), str(deb)],
                   check=True, capture_output=True)
    fetcher = Fetcher(tmp_path / "downloads")
    fetcher.deb_dir.mkdir(parents=True)
    shutil.move(deb, fetcher.deb_dir / deb.name)
    pkg = fetcher.open(Source("debian", "demo-doc"))  # cached: no apt-get call
    assert pkg.version == "1:1.0-1" and len(pkg.sha256 or "") == 64
    got = dict(pkg.members(lambda p: p.endswith(".html")))
    assert got == {"usr/share/doc/demo/page.html": b"<html>hi</html>"}  # symlink alias skipped
    assert pkg.url("usr/x") == "deb://demo-doc/1:1.0-1/usr/x"


def test_fetcher_uses_cache_and_reports_missing_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fetcher = Fetcher(tmp_path)
    cached = fetcher.pypi_dir / "mpmath-1.3.0" / "mpmath-1.3.0-py3-none-any.whl"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"wheel")

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError("must not download")

    monkeypatch.setattr(fetch_mod.subprocess, "run", no_subprocess)
    assert fetcher.pypi("mpmath", "1.3.0") == cached
    monkeypatch.setattr(fetch_mod.shutil, "which", lambda name: None)
    with pytest.raises(Shortfall, match="apt-get not found"):
        fetcher.deb("python3.11-doc")


# ---------------------------------------------------------------- build logic on fake components


def _fake_components(tmp_path: Path, extra: list[Component] | None = None) -> list[Component]:
    tree = tmp_path / "srcdir"
    if not tree.exists():
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg/b.py").write_text("print('b')\n")
        (tree / "pkg/a.py").write_text("print('a')\n")
        (tree / "pkg/latin1.py").write_bytes(b"# caf\xe9\n")  # not UTF-8
    src = Source("dir", "fake-stdlib", "3.11", tree, scheme="stdlib")

    def strings(pkg: Package, notes: Notes) -> list[Doc]:
        return [Doc(pkg.key(f"doc{i}"), "text", pkg.url(f"doc{i}"), f"第{i}回", f"t{i}") for i in (2, 1)]

    def broken(pkg: Package, notes: Notes) -> list[Doc]:
        raise RuntimeError("parser exploded")

    return [
        Component("code_files", "code", "portable", "PSF-2.0", src, select_files(r"\.py$", "code")),
        Component("zh_strings", "zh", "portable", "MIT", src, strings),
        Component("broken", "zh", "portable", "MIT", src, broken),
        Component("missing_dir", "math", "portable", "MIT", Source("dir", "nope", "0", tmp_path / "absent"),
                  select_files(".", "text")),
        Component("deb_only", "web_en", "debian", "MIT", src, strings),
        *(extra or []),
    ]


def test_build_writes_atomically_and_records_shortfalls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_mod, "default_components", lambda: _fake_components(tmp_path))
    seen: dict[str, object] = {}
    real_write = build_mod._write_manifest

    def spy(path: Path, manifest: dict) -> None:
        seen["files"] = sorted(p.name for p in path.parent.iterdir())
        seen["root_exists"] = corpus_root(tmp_path / "cache", ("portable",)).exists()
        real_write(path, manifest)

    monkeypatch.setattr(build_mod, "_write_manifest", spy)
    corpus = build_demo_corpus(cache_dir=tmp_path / "cache", tiers=("portable",))

    assert seen == {"files": ["code.jsonl.gz", "zh.jsonl.gz"], "root_exists": False}  # manifest last
    assert corpus.root == tmp_path / "cache" / "demo_corpus" / f"v{build_mod.BUILDER_VERSION}-portable"
    assert sorted(p.name for p in corpus.root.iterdir()) == ["code.jsonl.gz", MANIFEST, "zh.jsonl.gz"]
    assert not list(corpus.root.parent.glob(".*tmp*"))
    man = json.loads((corpus.root / MANIFEST).read_text())
    assert man == corpus.manifest and man["tiers"] == ["portable"]

    code = list(corpus.iter_domain("code"))
    assert [r["doc_key"] for r in code] == ["stdlib:fake-stdlib:pkg/a.py", "stdlib:fake-stdlib:pkg/b.py",
                                            "stdlib:fake-stdlib:pkg/latin1.py"]
    assert code[0]["raw"] == "print('a')\n" and "raw_b64" not in code[0]
    assert code[2]["raw"] is None and base64.b64decode(code[2]["raw_b64"]) == b"# caf\xe9\n"
    assert set(code[0]) == {"doc_key", "domain", "component", "format", "url", "license", "title", "raw"}
    assert [r["doc_key"][-4:] for r in corpus.iter_domain("zh")] == ["doc1", "doc2"]  # sorted by key

    comps = {c["component"]: c for c in man["components"]}
    assert "deb_only" not in comps  # tier not requested
    assert comps["code_files"]["n_docs"] == 3 and comps["code_files"]["n_invalid_utf8"] == 1
    assert comps["code_files"]["n_bytes"] == len("print('a')\n") * 2
    assert comps["broken"]["status"] == "shortfall" and "parser exploded" in comps["broken"]["reason"]
    assert comps["missing_dir"]["status"] == "shortfall" and "not found" in comps["missing_dir"]["reason"]
    assert man["domains"]["zh"]["n_docs"] == 2 and man["domains"]["zh"]["n_bytes"] == 2 * len("第1回".encode())
    short = {(s["domain"], s["component"]) for s in man["shortfalls"]}
    assert short == {("zh", "broken"), ("math", "missing_dir"), ("math", None), ("web_en", None),
                     ("academic", None)}
    assert corpus.domain_path("math") is None and list(corpus.iter_domain("math")) == []
    assert set(man["domains"]) == set(DOMAINS)
    with pytest.raises(KeyError):
        corpus.domain_path("fineweb")


def test_cached_call_and_deterministic_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(build_mod, "default_components", lambda: _fake_components(tmp_path))
    first = build_demo_corpus(cache_dir=tmp_path / "a", tiers=("debian", "portable"))
    blobs = {p.name: p.read_bytes() for p in first.root.glob("*.jsonl.gz")}
    assert set(blobs) == {"code.jsonl.gz", "zh.jsonl.gz", "web_en.jsonl.gz"}
    assert first.root.name == f"v{build_mod.BUILDER_VERSION}-portable+debian"

    real_write = build_mod._write_components
    monkeypatch.setattr(build_mod, "_write_components", lambda *a: pytest.fail("cached build must not rebuild"))
    with caplog.at_level("INFO", logger="minideepseek.demo_corpus"):
        again = build_demo_corpus(cache_dir=tmp_path / "a", tiers=("portable", "debian"))
    assert "cached" in caplog.text and again.manifest == first.manifest

    monkeypatch.setattr(build_mod, "_write_components", real_write)
    forced = build_demo_corpus(cache_dir=tmp_path / "a", tiers=("portable", "debian"), force=True)
    other = build_demo_corpus(cache_dir=tmp_path / "b", tiers=("portable", "debian"))
    for corpus in (forced, other):
        assert {p.name: p.read_bytes() for p in corpus.root.glob("*.jsonl.gz")} == blobs
    assert gzip.decompress(blobs["zh.jsonl.gz"]).decode().count("\n") == 2
    assert blobs["zh.jsonl.gz"][4:8] == b"\0\0\0\0"  # gzip mtime 0
    with pytest.raises(ValueError):
        build_demo_corpus(cache_dir=tmp_path / "a", tiers=("cloud",))


def test_interrupted_build_leaves_nothing_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(pkg: Package, notes: Notes) -> list[Doc]:
        raise KeyboardInterrupt

    src = Source("dir", "x", "0", tmp_path)
    extra = [Component("killed", "zh", "portable", "MIT", src, interrupt)]
    monkeypatch.setattr(build_mod, "default_components", lambda: _fake_components(tmp_path, extra))
    with pytest.raises(KeyboardInterrupt):
        build_demo_corpus(cache_dir=tmp_path / "cache", tiers=("portable",))
    parent = tmp_path / "cache" / "demo_corpus"
    assert list(parent.iterdir()) == []


def test_cli_prints_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(build_mod, "default_components", lambda: _fake_components(tmp_path))
    assert cli.main(["--cache-dir", str(tmp_path / "c"), "--tiers", "portable", "-q"]) == 0
    out = capsys.readouterr().out
    assert "domain" in out and "zh" in out and "shortfall zh/broken: RuntimeError: parser exploded" in out
    corpus = DemoCorpus.load(corpus_root(tmp_path / "c", ("portable",)))
    assert corpus.manifest["domains"]["code"]["n_docs"] == 3
    assert io.BytesIO(corpus.domain_path("code").read_bytes()).read(2) == b"\x1f\x8b"
