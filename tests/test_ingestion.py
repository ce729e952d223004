"""Stage 1 ingestion policy on hostile files: every line counted with a fixed reason and its 1-based
line number, file-level problems reported per file, nothing lost, nothing crashes.

Each test builds its own hostile file in ``tmp_path``; expected counts come from an independent
oracle (stdlib decompression of the cut bytes) or from the file's construction."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
import zstandard

import mix_sampler
from minideepseek.config import ConfigError
from minideepseek.sources.config import SourceConfig
from minideepseek.sources.local import LocalSource

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega").split()


def _text(i: int, n: int = 40) -> str:
    rng = random.Random(i)
    return " ".join(rng.choice(WORDS) for _ in range(n)) + f" record {i}."


def _lines(n: int, start: int = 0) -> bytes:
    return b"".join(json.dumps({"id": f"r{i}", "text": _text(i)}).encode() + b"\n" for i in range(start, start + n))


def _src(path: Path, max_chars: int = 2_000_000, **kw) -> LocalSource:
    src = LocalSource(SourceConfig(name="loc", type="local", weight=1.0, path=str(path), **kw), seed=1,
                      max_chars=max_chars)
    src.load()
    return src


def _by_reason(src: LocalSource) -> dict[str, list[int | None]]:
    out: dict[str, list[int | None]] = {}
    for r in src.rejects:
        out.setdefault(r.reason, []).append(r.line)
    return out


def _report(src: LocalSource, name: str) -> dict:
    return next(r.to_dict() for r in src.file_reports if r.file == name)


def _complete_lines(decompressed: bytes) -> tuple[int, int]:
    """(complete lines, bytes of the partial last line) of what an independent decoder recovered."""
    return decompressed.count(b"\n"), len(decompressed) - (decompressed.rfind(b"\n") + 1)


# ---- cut-off compressed streams ---------------------------------------------------------------

@pytest.mark.parametrize("cut_at", [0.31, 0.5, 0.77])
def test_truncated_gzip_keeps_every_complete_record(tmp_path, cut_at):
    data = _lines(3000)
    blob = gzip.compress(data)
    cut = blob[: int(len(blob) * cut_at)]
    (tmp_path / "part.jsonl.gz").write_bytes(cut)
    oracle = zlib.decompressobj(wbits=31).decompress(cut)
    complete, partial = _complete_lines(oracle)
    assert 0 < complete < 3000 and partial > 0
    src = _src(tmp_path / "part.jsonl.gz", id_field="id")
    assert [r.source_id for r in src.load()] == [f"r{i}" for i in range(complete)]
    assert _by_reason(src) == {"truncated_record": [complete + 1]}
    rep = _report(src, "part.jsonl.gz")
    assert rep["status"] == "truncated" and "cut short" in rep["problem"]
    assert rep["lines"] == complete + 1 and rep["records"] == complete and rep["compression"] == "gzip"
    assert src.rejects[0].offset == len(oracle) - partial


def test_truncated_zstd_keeps_every_complete_record(tmp_path):
    data = _lines(12000)  # several 128 KiB zstd blocks, so a cut leaves whole blocks before it
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    blob = b"".join(cobj.compress(data[i:i + 65536]) for i in range(0, len(data), 65536)) + cobj.flush()
    cut = blob[: len(blob) // 2]
    (tmp_path / "part.jsonl.zst").write_bytes(cut)
    oracle = zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    complete, partial = _complete_lines(oracle)
    assert complete > 1000
    src = _src(tmp_path / "part.jsonl.zst", id_field="id")
    assert len(src.load()) == complete
    assert _by_reason(src) == ({"truncated_record": [complete + 1]} if partial else {})
    rep = _report(src, "part.jsonl.zst")
    assert rep["status"] == "truncated" and rep["records"] == complete


def test_complete_gzip_and_misnamed_compression(tmp_path):
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(_lines(5)) + gzip.compress(_lines(3, 5)))  # 2 members
    (tmp_path / "b.jsonl.gz").write_bytes(_lines(4, 8))  # named .gz, really plain
    (tmp_path / "c.jsonl").write_bytes(gzip.compress(_lines(2, 12)))  # gzip without the suffix
    src = _src(tmp_path, id_field="id")
    assert sorted(int(r.source_id[1:]) for r in src.load()) == list(range(14))
    assert not src.rejects
    assert all(r.status == "ok" for r in src.file_reports)
    assert any("content is none" in n for n in _report(src, "b.jsonl.gz")["notes"])


def test_corrupt_gzip_is_a_file_problem_after_the_good_records(tmp_path):
    blob = bytearray(gzip.compress(_lines(200)))
    blob[-6] ^= 0xFF  # the CRC/size trailer: every record decodes, the check fails
    (tmp_path / "x.jsonl.gz").write_bytes(bytes(blob))
    (tmp_path / "y.jsonl").write_bytes(_lines(3, 500))
    src = _src(tmp_path, id_field="id")
    assert len(src.load()) == 203
    assert _report(src, "x.jsonl.gz")["status"] == "corrupt" and _report(src, "y.jsonl")["status"] == "ok"


# ---- encodings, escapes, control characters ---------------------------------------------------

def test_bom_stripped_and_first_record_kept(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + _lines(3))
    src = _src(tmp_path / "bom.jsonl", id_field="id")
    assert [r.source_id for r in sorted(src.load(), key=lambda r: r.line)] == ["r0", "r1", "r2"]
    assert src.load()[0].line in (1, 2, 3) and not src.rejects


def test_utf16_file_is_a_file_level_error(tmp_path):
    (tmp_path / "u16.jsonl").write_bytes(b"\xff\xfe" + _lines(2).decode().encode("utf-16-le"))
    (tmp_path / "ok.jsonl").write_bytes(_lines(2))
    src = _src(tmp_path, id_field="id")
    rep = _report(src, "u16.jsonl")
    assert rep["status"] == "unsupported" and "UTF-16-LE" in rep["problem"] and len(src.load()) == 2


def test_surrogates_rejected_valid_pair_kept(tmp_path):
    lines = [b'{"text": "lone high \\ud800 here and more words"}',
             b'{"text": "reversed \\ude00\\ud83d pair and more words"}',
             b'{"text": "an emoji \\ud83d\\ude00 is a valid pair"}',
             b'{"text": "fine", "url": "https://x.org/\\udfff"}']
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    src = _src(tmp_path / "s.jsonl")
    assert _by_reason(src) == {"lone_surrogate": [1, 2, 4]}
    (kept,) = src.load()
    assert kept.text == "an emoji \U0001F600 is a valid pair" and kept.line == 3
    for r in src.rejects:  # serializable although the record holds a lone surrogate
        json.loads(r.to_json()).get("snippet", "").encode("utf-8")


def test_control_characters_measured_before_cleanup(tmp_path):
    body = _text(1, 200)  # ~1,200 chars
    png = b"\x89PNG\r\n\x1a\n" + random.Random(3).randbytes(3000)
    rows = [
        {"text": body[:500] + "\x00" + body[500:]},                       # 1: one NUL -> reject
        {"text": body.replace(" ", "\x01", 30)},                          # 2: 30 C0 in ~1.2K (> 1%) -> reject
        {"text": body.replace(" ", "\x85", 30)},                          # 3: C1 (> 1%) -> reject
        {"text": png.decode("latin-1")},                                  # 4: binary as Latin-1 -> reject
        {"text": body.replace(" ", "\x0c", 5)},                           # 5: 5 form feeds (< 1%) -> keep
        {"text": "\x1b[1;31m床前明月光\x1b[0m，\x1b[32m疑是地上霜\x1b[0m"},  # 6: ANSI colours -> keep
        {"text": body + "\ttab\r\nCRLF inside"},                          # 7: TAB/CR/LF are text -> keep
    ]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    src = _src(tmp_path / "c.jsonl")
    assert _by_reason(src) == {"binary_control_chars": [1, 2, 3, 4]}
    assert sorted(r.line for r in src.load()) == [5, 6, 7]
    assert "NUL" in src.rejects[0].detail


def test_invalid_utf8_line_rejected_with_its_line(tmp_path):
    (tmp_path / "u.jsonl").write_bytes(_lines(2) + b'{"text": "caf\xe9 latin1 text"}\n' + _lines(1, 2))
    src = _src(tmp_path / "u.jsonl", id_field="id")
    assert _by_reason(src) == {"invalid_utf8": [3]} and len(src.load()) == 3
    assert src.rejects[0].offset == len(_lines(2))


def test_every_shape_of_bad_record_has_its_own_reason(tmp_path):
    bad = [b'[1, 2]', b'"s"', b'null', b'42', b'{"body": "no text key"}', b'{"text": null}', b'{"text": 7}',
           b'{"text": ["a"]}', b'{"text": {"a": 1}}', b'{"text": true}', b'{"text": ""}', b'{"text": "   \\n\\t"}',
           b'{"text": "\\u3000"}', b'{"text": "\\u00a0\\u00a0"}', b'{"text": "\\u2028"}', b'{"text": broken',
           b'', b'   ']
    (tmp_path / "b.jsonl").write_bytes(_lines(1) + b"\n".join(bad) + b"\n" + _lines(1, 1))
    src = _src(tmp_path / "b.jsonl")
    assert _by_reason(src) == {"not_an_object": [2, 3, 4, 5], "missing_text": [6],
                               "non_string_text": [7, 8, 9, 10, 11], "blank_text": [12, 13, 14, 15, 16],
                               "invalid_json": [17]}
    rep = _report(src, "b.jsonl")
    assert rep["lines"] == 20 and rep["records"] == 2 and rep["blank_lines"] == 2
    assert rep["lines"] == rep["records"] + sum(rep["rejects"].values()) + rep["blank_lines"]
    null = next(r for r in src.rejects if r.line == 7)
    assert "null" in null.detail and null.reason != "missing_text"


def test_line_endings_split_on_newline_only(tmp_path):
    rows = [{"text": "para one\u2028still the same record\u2029and this " + _text(1)}, {"text": _text(2)}]
    data = "".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode()
    (tmp_path / "crlf.jsonl").write_bytes(data + b'{"text": "cr inside\\rand at end\\r"}\r\n')
    src = _src(tmp_path / "crlf.jsonl")
    recs = sorted(src.load(), key=lambda r: r.line)
    assert [r.line for r in recs] == [1, 2, 3] and not src.rejects
    assert "\u2028" in recs[0].text and not any(r.text.endswith("\r\n") for r in recs[:2])
    assert recs[1].text == _text(2)


def test_twenty_megabyte_document_rejected_with_bounded_memory(tmp_path):
    big = ("x" * 99 + " ") * 200_000  # 20 MB of text in one record
    with (tmp_path / "big.jsonl").open("w") as fh:
        fh.write(json.dumps({"text": _text(0)}) + "\n")
        fh.write(json.dumps({"text": big}) + "\n")
        fh.write(json.dumps({"text": _text(2)}) + "\n")
    del big
    tracemalloc.start()
    src = _src(tmp_path / "big.jsonl", max_chars=1_000_000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert _by_reason(src) == {"too_long": [2]} and len(src.load()) == 2
    assert peak < 10e6, f"ingestion held {peak / 1e6:.1f} MB for a 20 MB line (limit 7 MiB + one chunk)"


# ---- file-level problems ----------------------------------------------------------------------

def test_empty_and_corrupt_files_reported_others_go_on(tmp_path):
    (tmp_path / "zero.parquet").write_bytes(b"")
    (tmp_path / "junk.parquet").write_bytes(b"this is not parquet at all" * 10)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "zero.arrow").write_bytes(b"")
    table = pa.Table.from_pylist([{"text": _text(i)} for i in range(5)])
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    broken = bytearray((tmp_path / "t.arrow").read_bytes())
    broken[777:841] = b"\xff" * 64
    (tmp_path / "flipped.arrow").write_bytes(bytes(broken))
    pq.write_table(table, tmp_path / "good.parquet")
    src = _src(tmp_path)
    rep = {r.file: r.to_dict() for r in src.file_reports}
    assert rep["zero.parquet"]["problem"] == "not a parquet file (0 bytes)"
    assert rep["junk.parquet"]["status"] == "corrupt" and "not a parquet file" in rep["junk.parquet"]["problem"]
    assert rep["empty.jsonl"]["problem"] == "empty input (no records)"
    assert rep["zero.arrow"]["problem"] == "not an Arrow IPC file (0 bytes)"
    # bytes damaged inside the string buffer: that row alone is rejected, the other four are kept
    assert rep["flipped.arrow"]["rejects"] == {"invalid_utf8": 1} and rep["flipped.arrow"]["records"] == 4
    assert rep["good.parquet"]["records"] == 5 and rep["t.arrow"]["records"] == 5
    assert len(src.load()) >= 10


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_wrong_text_field_is_an_error_for_a_tiny_source(tmp_path, fmt):
    rows = [{"content": _text(i), "repo": "x"} for i in range(3)]
    if fmt == "jsonl":
        (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    with pytest.raises(ConfigError, match=r"'text'.*\['content', 'repo'\]|'text'.*\['repo', 'content'\]"):
        _src(tmp_path)


# ---- the stage: rejects.jsonl, report, manifest, empty sources --------------------------------

def _stage_config(tmp_path: Path, sources: list[dict], **sampler) -> Path:
    cfg = {"run": {"name": "h", "seed": 3, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "rep")},
           "sources": sources, "sampler": {"target_docs": 10_000, "num_proc": 1, **sampler}}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.stage
def test_stage_writes_rejects_with_lines_and_reports_files(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    blob = gzip.compress(_lines(400))
    (d / "cut.jsonl.gz").write_bytes(blob[: len(blob) // 2])
    (d / "mixed.jsonl").write_bytes(_lines(5, 1000) + b'{"text": "\\ud800 lone"}\n[1]\n{"text": null}\n')
    (d / "zero.parquet").write_bytes(b"")
    complete, _ = _complete_lines(zlib.decompressobj(wbits=31).decompress(blob[: len(blob) // 2]))
    cfg = _stage_config(tmp_path, [{"name": "loc", "type": "local", "path": str(d), "weight": 1.0, "id_field": "id"}])
    assert mix_sampler.main(["--config", str(cfg)]) == 0
    out = tmp_path / "data" / "h" / "mixed_raw"
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    got = sorted((r["file"], r["line"], r["reason"]) for r in rejects)
    assert got == sorted([("cut.jsonl.gz", complete + 1, "truncated_record"), ("mixed.jsonl", 6, "lone_surrogate"),
                          ("mixed.jsonl", 7, "not_an_object"), ("mixed.jsonl", 8, "non_string_text")])
    assert all(isinstance(r["offset"], int) for r in rejects)
    mix = json.loads((tmp_path / "rep" / "h" / "source_mix.json").read_text())
    ing = mix["ingestion"]["sources"]["loc"]
    assert ing["records"] == complete + 5 and ing["rejects"] == 4 and ing["file_problems"] == 2
    assert mix["sources"][0]["docs"] == complete + 5
    man = json.loads((out / "manifest.json").read_text())
    problems = {p["file"]: p["status"] for p in man["counters"]["file_problems"]}
    assert problems == {"cut.jsonl.gz": "truncated", "zero.parquet": "empty"}
    md = (tmp_path / "rep" / "h" / "source_mix.md").read_text()
    assert "not a parquet file (0 bytes)" in md and "cut.jsonl.gz" in md


@pytest.mark.stage
def test_stage_refuses_a_source_with_no_documents_unless_skip(tmp_path, capsys):
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    (good / "a.jsonl").write_bytes(_lines(20))
    (bad / "b.jsonl").write_bytes(b'{"text": ""}\n{"text": "  "}\n')
    sources = [{"name": "good", "type": "local", "path": str(good), "weight": 0.5},
               {"name": "bad", "type": "local", "path": str(bad), "weight": 0.5}]
    assert mix_sampler.main(["--config", str(_stage_config(tmp_path, sources))]) == 2
    err = capsys.readouterr().err
    assert "source bad yields no documents" in err and "blank_text=2" in err and "empty_source=skip" in err
    assert not list((tmp_path / "data" / "h").glob("mixed_raw*"))
    cfg = _stage_config(tmp_path, sources, empty_source="skip")
    assert mix_sampler.main(["--config", str(cfg)]) == 0
    mix = json.loads((tmp_path / "rep" / "h" / "source_mix.json").read_text())
    assert mix["ingestion"]["empty_sources"] == ["bad"] and mix["totals"]["docs"] == 20


@pytest.mark.stage
def test_stage_wrong_text_field_small_parquet_exits_with_message(tmp_path, capsys):
    pq.write_table(pa.Table.from_pylist([{"content": _text(i)} for i in range(4)]), tmp_path / "c.parquet")
    cfg = _stage_config(tmp_path, [{"name": "p", "type": "local", "path": str(tmp_path / "c.parquet"), "weight": 1.0}])
    assert mix_sampler.main(["--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "'text'" in err and "content" in err and "Traceback" not in err
