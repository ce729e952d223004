"""Stage 2's finer granularities: URL/origin, boilerplate lines, paragraphs, exact substrings (suffix
array), and near dedup against an earlier run's index -- unit checks and one planted end-to-end run."""

import json
import random
import sysconfig
import textwrap
from pathlib import Path

import datasets
import numpy as np
import pytest
import yaml
from realtext import stdlib_docstrings

import cross_source_dedup
import mix_sampler
from minideepseek.crossdedup.granular_config import UrlDedupConfig
from minideepseek.crossdedup.lines import LineCounter
from minideepseek.crossdedup.spans import BloomFilter, ParagraphDedup
from minideepseek.crossdedup.substrings import _TOKEN, cut_text, find_repeats, have_pydivsufsort
from minideepseek.crossdedup.urls import normalize_url, url_duplicates

STDLIB = Path(sysconfig.get_paths()["stdlib"])


# ---- URL / origin
def test_url_normalization_and_origin_rule():
    cfg = UrlDedupConfig()
    rules = cfg.origin_rules
    assert normalize_url("HTTPS://www.Example.com:443/a/index.html?utm_source=x&b=2&a=1") == "https://example.com/a?a=1&b=2"
    assert normalize_url("https://example.com/a/") == normalize_url("https://example.com/a")
    # http and https name one page (same_scheme, default on); each scheme's default port is dropped first
    assert normalize_url("http://Example.com:80/a") == normalize_url("https://example.com:443/a") == "https://example.com/a"
    assert normalize_url("http://example.com/a", same_scheme=False) == "http://example.com/a"
    assert normalize_url("http://example.com:443/a") == "https://example.com:443/a"  # :443 is not http's default
    # the fragment names a record inside a file: kept unless asked
    assert normalize_url("deb://f/chinese#5") != normalize_url("deb://f/chinese#6")
    assert normalize_url("deb://f/chinese#5", drop_fragment=True) == normalize_url("deb://f/chinese#6", drop_fragment=True)
    assert (normalize_url("https://docs.python.org/3.11/_sources/library/sched.rst.txt", rules=rules)
            == normalize_url("https://docs.python.org/3.11/library/sched.html", rules=rules))
    urls = ["https://a.org/x", "http://b.org/y", "https://www.a.org/x/?utm_medium=m", "", "", "https://a.org/x#frag"]
    removed, _ = url_duplicates(urls, [True] * 6, lambda i: -len(urls[i]), cfg)
    assert removed == {0: 2}  # the longest URL string wins here by the key; blank URLs never match


# ---- lines
def test_boilerplate_lines_removed_and_buckets_protect_common_lines():
    rng = random.Random(0)
    def word() -> str:
        return "".join(rng.choice("abcdefghij") for _ in range(12))

    docs = {f"d{i}": "\n".join(f"unique line {word()} {word()}" for _ in range(5)) for i in range(1000)}
    for i in range(0, 1000, 100):  # "Thank you." in 10 of 1,000 documents: ~1 per 100-doc bucket
        docs[f"d{i}"] += "\nThank you."
    for i in range(300):  # a navigation line (its year varies) in 30% of the documents
        docs[f"d{i}"] += f"\nSkip to main content | Home | About {2000 + i % 25}"
    one = LineCounter(1000, 1000, 6, 1, seed=1)
    many = LineCounter(1000, 100, 6, 1, seed=1)
    for c in (one, many):
        for d, t in docs.items():
            c.add(d, t)
        c.finish()
    new, gone = one.strip("d0", docs["d0"])
    assert gone == ["thank you.", "skip to main content | home | about 0000"] and "Thank you." not in new
    assert new == docs["d0"].split("\nThank you.")[0]  # the unique lines all stay
    # in 100-document buckets, 10 scattered "Thank you." lines stay under k = 6 per bucket
    assert all("thank you." not in many.strip(d, t)[1] for d, t in docs.items())
    assert many.n_buckets == 10
    # lines with different digits are one boilerplate line (digits normalize to 0); unique lines stay
    assert sum(1 for d in docs if "skip to main content | home | about 0000" in many.strip(d, docs[d])[1]) == 300


# ---- paragraphs
def test_repeated_paragraph_removed_after_first_occurrence():
    para = "The DOM is extremely useful for random-access applications in many settings."
    texts = [f"Intro one.\n{para}\nEnd one.", f"Intro two.\n{para}\nEnd two.", "Short\nShort\nSomething else entirely here."]
    for exact in (False, True):
        pd = ParagraphDedup(20, 40, 1e-9, exact)
        out = [pd.strip(t) for t in texts]
        assert out[0] == (texts[0], [])
        assert out[1] == ("Intro two.\nEnd two.", [para])
        assert out[2] == (texts[2], [])  # short paragraphs are never removed


def test_bloom_filter_false_positive_rate_is_near_the_target():
    bf = BloomFilter(20_000, 1e-3)
    rng = random.Random(0)
    xs = [rng.getrandbits(128) for _ in range(20_000)]  # 128-bit, like the xxh3_128 paragraph hashes
    assert bf.check_and_add(xs).mean() < 1e-3  # while filling, the rate only grows to the target
    assert bf.check_and_add(xs[:100]).all()  # everything added is found
    fp = float(np.mean([bool(bf.check_and_add([rng.getrandbits(128)])[0]) for _ in range(5000)]))
    assert fp < 3e-3, fp
    assert abs(bf.expected_fp_rate(20_000) - 1e-3) < 3e-4


# ---- substrings
def _code_files(k: int) -> list[str]:
    files = sorted(p for p in STDLIB.glob("*.py") if 3000 < p.stat().st_size < 20000)[:k]
    return [p.read_text(encoding="utf-8", errors="replace")[:2500] for p in files]


def _quote(files: list[str], docs: list[str]) -> str:
    """A 60-token span of a docstring that is not in any of the files already."""
    have = " ".join(" ".join(_TOKEN.findall(f)) for f in files)
    for d in docs:
        q = " ".join(_TOKEN.findall(d)[:60])
        if len(q.split(" ")) == 60 and q[:80] not in have:
            return q
    raise AssertionError("no docstring to quote")


def _brute_force_cut(docs: list[str], L: int) -> list[set[int]]:
    """Token positions covered by a later occurrence of an L-token window (the definition, by dict)."""
    toks = [[m.group() for m in _TOKEN.finditer(t)] for t in docs]
    seen: set[tuple[str, ...]] = set()
    out = []
    for ts in toks:
        cov: set[int] = set()
        for p in range(len(ts) - L + 1):
            w = tuple(ts[p:p + L])
            if w in seen:
                cov.update(range(p, p + L))
            seen.add(w)
        out.append(cov)
    return out


def test_quoted_span_removed_from_later_file_only():
    files = _code_files(8)
    quote = _quote(files, [d for _, d in stdlib_docstrings(50, 400, 1200)])
    files[2] = files[2] + '\n"""' + quote + '"""\n'
    files[6] = files[6][:800] + '\n    """' + quote + '"""\n' + files[6][800:]
    res = find_repeats(list(enumerate(files)), 50, engine="numpy")
    new = {i: cut_text(files[i], iv) for i, iv in res.cut.items()}
    assert quote in new.get(2, files[2]) and quote not in new[6]
    assert 6 in res.cut and res.tokens_removed >= 60
    # exactly the brute-force definition: a window seen before is covered
    cov = _brute_force_cut(files, 50)
    assert res.tokens_removed == sum(len(c) for c in cov)


def test_short_repeat_is_kept_and_engines_agree():
    rng = random.Random(3)
    words = [f"w{k}" for k in range(30)]
    docs = [" ".join(rng.choice(words) for _ in range(300)) for _ in range(20)]
    span = " ".join(rng.choice(words) for _ in range(55))
    docs[4] += " " + span
    docs[15] = span + " " + docs[15]
    docs[9] += " " + " ".join(span.split()[:40])  # 40 tokens: below min_tokens, never removed alone
    res = find_repeats(list(enumerate(docs)), 50, engine="numpy")
    cov = _brute_force_cut(docs, 50)
    assert res.tokens_removed == sum(len(c) for c in cov) and 15 in res.cut and 4 not in res.cut and 9 not in res.cut
    if have_pydivsufsort():
        ref = find_repeats(list(enumerate(docs)), 50, engine="pydivsufsort")
        assert ref.cut == res.cut and ref.tokens_removed == res.tokens_removed
    # cross_doc_only: a repeat inside one document stays, a repeat of another document's span goes
    docs[7] += " " + docs[7][:400] + " " + span
    both = find_repeats(list(enumerate(docs)), 50, engine="numpy")
    cross = find_repeats(list(enumerate(docs)), 50, engine="numpy", cross_doc_only=True)
    assert 7 in both.cut and 7 in cross.cut and 15 in cross.cut
    assert sum(b - a for a, b in cross.cut[7]) < sum(b - a for a, b in both.cut[7])
    assert docs[7][:400] in cut_text(docs[7], cross.cut[7])[400:]  # its own repeated block is kept
    # max_tokens bounds memory by chunks of whole documents: a repeat across two chunks is not seen (documented)
    small = find_repeats(list(enumerate(docs)), 50, engine="numpy", max_tokens=2000)
    assert small.chunks > 1 and 15 not in small.cut and 4 not in small.cut


@pytest.mark.parametrize("engine", ["numpy", "pydivsufsort"])
def test_substring_chunks_as_pool_tasks_find_what_one_process_finds(tmp_path, engine):
    """The pool's path (token counts, the chunk plan, one task per chunk, merged in order) gives
    find_repeats's result: same cuts, counters and examples, with texts read back from the stage's input
    rows and from the text store, over several chunks, each chunk with its own token ids."""
    if engine == "pydivsufsort" and not have_pydivsufsort():
        pytest.skip("pydivsufsort is not installed")
    from minideepseek.arrow_io import DatasetWriter
    from minideepseek.crossdedup.docs import Texts
    from minideepseek.crossdedup.substrings import (
        ChunkTask,
        SubstringResult,
        TextRefs,
        chunk_repeats,
        count_tokens,
        merge,
        plan_chunks,
    )
    from minideepseek.crossdedup.textstore import TextStore
    from minideepseek.records import DOC_FEATURES, text_hash

    rng = random.Random(11)
    words = [f"w{k}" for k in range(40)]
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(80, 400))) for _ in range(90)]
    for k in range(89):  # a 60-token block shared by neighbours (mostly in one chunk), some also a chunk apart
        block = " ".join(rng.choice(words) for _ in range(60))
        docs[k] += " " + block
        docs[k + 1] = block + " . " + docs[k + 1]
        if k % 5 == 0:
            docs[(k + 30) % 90] += " " + block
    ids = [f"s/{i:04d}" for i in range(len(docs))]
    rows = [{"id": ids[i], "source": "s", "text": t, "url": "", "license": "", "lang": "en", "lang_score": 1.0,
             "n_chars": len(t), "n_tokens": 1, "hash": text_hash(t), "quality_signals": "{}", "stage": "mix_sampler",
             "audit_trace": []} for i, t in enumerate(docs)]
    w = DatasetWriter(tmp_path / "raw", DOC_FEATURES)
    w.write_rows(rows)
    w.close()
    raw = Texts(tmp_path / "raw")
    store = TextStore(tmp_path / "work")
    current = list(docs)
    for i in range(0, 90, 3):  # every third document was rewritten by an earlier step
        current[i] = docs[i].replace(" w3 ", " w3 w3 ")
        store[i] = current[i]
    order = [i for i in range(90) if i % 7]  # the step's documents, in run order
    max_tokens = 5000
    ref = find_repeats([(i, current[i]) for i in order], 50, engine, max_tokens, 1, ids, True)

    def refs(part: list[int]) -> TextRefs:
        return TextRefs(tuple(part), tuple(store.ref(i) if i in store else (-1, 0) for i in part), raw.shards,
                        str(store.path))

    counts = [n for s0 in range(0, len(order), 16) for n in count_tokens(refs(order[s0:s0 + 16]))]
    assert counts == [len(_TOKEN.findall(current[i])) for i in order]
    plan = plan_chunks(counts, max_tokens)
    got = SubstringResult(engine=engine)
    for a, b in plan:
        merge(got, chunk_repeats(ChunkTask(refs(order[a:b]), 50, engine, 1, tuple(ids[i] for i in order[a:b]), True)), 1)
    # more spans than examples kept: the merge stops where find_repeats stops
    assert ref.chunks == len(plan) >= 5 and ref.spans > 25 and len(ref.examples) == 20
    assert (got.cut, got.tokens_in, got.tokens_removed, got.spans, got.chunks, got.examples) == \
        (ref.cut, ref.tokens_in, ref.tokens_removed, ref.spans, ref.chunks, ref.examples)
    store.close()


def test_pydivsufsort_engine_matches_brute_force():
    pytest.importorskip("pydivsufsort")
    files = _code_files(12)
    files[9] = files[9] + "\n" + files[1][200:900]
    res = find_repeats(list(enumerate(files)), 50, engine="pydivsufsort")
    assert res.tokens_removed == sum(len(c) for c in _brute_force_cut(files, 50)) and 9 in res.cut


# ---- end to end: every step planted in one run, then a second run against the first one's index
# a long navigation block on one line: stripped by the line step, and long enough that a short page with it
# and the same page without it are below the near-dup threshold (they become identical only after cleaning)
NAV = ("Skip to main content | Home | Docs | About | Downloads | Community | Success Stories | News | Events | "
       "Search this site | Report a documentation bug | Translations | Older releases | Copyright notice")
PARA = "This paragraph is repeated verbatim in three different pages of the planted corpus, on purpose."


@pytest.fixture()
def planted(tmp_path):
    docs = [d for _, d in stdlib_docstrings(140, 400, 2500, unique=True)]
    web = []
    for i, t in enumerate(docs[:60]):
        body = t if i % 2 else NAV + "\n" + t  # the navigation line in 30 documents
        if i in (5, 17, 33):
            body += "\n" + PARA
        web.append({"id": f"w{i}", "text": body, "url": f"https://docs.example.org/page{i}.html"})
    # the same page fetched twice (www., a tracking parameter, a trailing slash)
    web.append({"id": "w-dup-url", "text": docs[100], "url": "https://www.docs.example.org/page7.html/?utm_source=feed"})
    # the same page over http (another text: the URL step alone decides)
    web.append({"id": "w-http", "text": docs[136], "url": "http://docs.example.org/page9.html"})
    # one short page with and without the navigation block: identical once the line step strips it. Its
    # lines are under paragraphs.min_chars, so the paragraph step (which would empty the later copy) skips them
    short = "\n".join(textwrap.wrap(" ".join(docs[135].split()[:45]), 35))
    web.append({"id": "w-twin-nav", "text": NAV + "\n" + short, "url": "https://docs.example.org/twin-a.html"})
    web.append({"id": "w-twin", "text": short, "url": "https://docs.example.org/twin-b.html"})
    files = _code_files(20)
    quote = _quote(files, docs[100:])
    files[3] += '\n"""' + quote + '"""\n'
    files[11] = files[11][:500] + '\n"""' + quote + '"""\n' + files[11][500:]
    code = [{"id": f"c{i}", "text": t, "url": f"https://example.org/src/f{i}.py"} for i, t in enumerate(files)]
    for name, rows in (("web", web), ("code", code)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def config(run: str, extra: dict) -> Path:
        cfg = {
            "run": {"name": run, "seed": 3, "data_dir": str(tmp_path / "data"), "reports_dir": str(tmp_path / "reports")},
            "sources": [
                {"name": "web", "type": "local", "path": str(tmp_path / "web.jsonl"), "id_field": "id", "weight": 0.7},
                {"name": "code", "type": "local", "path": str(tmp_path / "code.jsonl"), "id_field": "id", "weight": 0.3,
                 "lang": "code"},
            ],
            "sampler": {"target_docs": len(web) + len(code), "num_proc": 1, "shortfall": "renormalize"},
            "dedup": {"num_proc": 1, "scurve_docs": 20, **extra},
            "decontam": {"enabled": False},
        }
        p = tmp_path / f"{run}.yaml"
        p.write_text(yaml.safe_dump(cfg))
        return p

    return tmp_path, config, docs, quote


def _removed(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (out / "removed.jsonl").read_text().splitlines())}


@pytest.mark.slow
def test_planted_cases_end_to_end_and_against_earlier_index(planted):
    tmp, config, docs, quote = planted
    cfg1 = config("r1", {})
    assert mix_sampler.main(["--config", str(cfg1)]) == 0
    assert cross_source_dedup.main(["--config", str(cfg1)]) == 0
    out = tmp / "data" / "r1" / "mixed_dedup"
    rep = json.loads((tmp / "reports" / "r1" / "dedup_report.json").read_text())["granular"]
    removed = _removed(out)
    # 1. the duplicate URLs (www/tracking/slash, and http vs https): one of each pair is removed
    assert rep["url"]["removed"] == 2 and [r["reason"] for r in removed.values()].count("url") == 2
    assert len({"web/w9", "web/w-http"} & set(removed)) == 1 and len({"web/w7", "web/w-dup-url"} & set(removed)) == 1
    # 1b. the short page with and without the navigation block: not near duplicates (J < threshold), but
    # identical after the line step; the exact pass after cleaning keeps one (the stage's keep order on the
    # cleaned texts: equal lengths, so the smaller id)
    twins = {k: v for k, v in removed.items() if v["reason"] == "exact_after_cleaning"}
    assert list(twins) == ["web/w-twin-nav"] and twins["web/w-twin-nav"]["kept"] == "web/w-twin"
    row = next(r for r in rep["funnel"] if r["step"] == "exact_after_cleaning" and r["source"] == "all")
    assert row["docs_in"] - row["docs_out"] == 1  # counted in the funnel as its own step
    # 2. the navigation line is gone from every kept web document, and tops the report
    kept_texts = [r["text"] for r in datasets.load_from_disk(str(out))]
    assert not any(NAV in t for t in kept_texts)
    top = {x["line"]: x["removed_from_docs"] for x in rep["lines"]["top_lines"]}
    assert top[NAV.lower()[:160]] >= 25
    # 3. the repeated paragraph survives exactly once
    assert sum(t.count(PARA) for t in kept_texts) == 1
    assert rep["paragraphs"]["per_source"]["web"]["paragraphs_removed"] >= 2
    # 4. the 60-token quote survives in exactly one code file
    assert sum(quote in t for t in kept_texts) == 1
    sub = rep["substrings"]
    assert sub["sources"] == ["code"] and sub["spans_removed"] >= 1 and sub["tokens_removed"] >= 60
    # 6. the funnel: every step's all-sources row, documents never increase
    allrows = [r for r in rep["funnel"] if r["source"] == "all"]
    assert [r["step"] for r in allrows] == rep["order"]
    assert all(r["docs_out"] <= r["docs_in"] and r["chars_out"] <= r["chars_in"] for r in allrows)
    assert allrows[-1]["docs_out"] == len(kept_texts)
    assert (out / "dedup_index" / "index.json").is_file()
    # determinism: same config + seed -> the same artifact
    from minideepseek.artifact import read_manifest
    first = read_manifest(out)["fingerprint"]
    assert cross_source_dedup.main(["--config", str(cfg1), "--force"]) == 0
    assert read_manifest(out)["fingerprint"] == first

    # 5. a second snapshot: a near-duplicate (3% of words edited) of a kept run-1 page, and new pages
    rng = random.Random(1)
    kept_web = [r for r in datasets.load_from_disk(str(out)) if r["source"] == "web" and len(r["text"]) > 800]
    target = kept_web[0]
    words = target["text"].split(" ")
    for k in rng.sample(range(len(words)), max(1, len(words) // 33)):
        words[k] += "q"
    new = [{"id": "n-near", "text": " ".join(words), "url": "https://mirror.example.net/copy.html"}]
    new += [{"id": f"n{i}", "text": t, "url": f"https://new.example.org/{i}"} for i, t in enumerate(docs[110:130])]
    (tmp / "web.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))
    (tmp / "code.jsonl").write_text("".join(json.dumps(r) + "\n" for r in
                                            [{"id": "c-new", "text": _code_files(25)[-1], "url": "u"}]))
    cfg2 = config("r2", {"against": [str(tmp / "data" / "r1")]})
    y = yaml.safe_load(cfg2.read_text())
    y["sampler"]["target_docs"] = len(new) + 1
    cfg2.write_text(yaml.safe_dump(y))
    assert mix_sampler.main(["--config", str(cfg2)]) == 0
    assert cross_source_dedup.main(["--config", str(cfg2)]) == 0
    rep2 = json.loads((tmp / "reports" / "r2" / "dedup_report.json").read_text())
    ag = rep2["granular"]["against"]
    rem2 = _removed(tmp / "data" / "r2" / "mixed_dedup")
    against = {k: v for k, v in rem2.items() if v["reason"] == "against"}
    assert ag["removed"] == len(against) == 1 and ag["near_matches"] == 1
    (rid, rec), = against.items()
    assert rec["kept"] == target["id"] and rec["jaccard"] >= 0.8 and rep2["removed"]["against"] == 1
    # a mismatched MinHash setting is refused with the fix named
    assert cross_source_dedup.main(["--config", str(cfg2), "--force", "--set", "dedup.num_perm=64"]) == 2


@pytest.mark.slow
def test_index_signs_the_texts_that_entered_near_dedup_whichever_steps_ran(planted):
    """The saved index signs a kept document's mixed_raw text (what a later run's near step compares), with
    near dedup on (the near matrix) or off (signed at the end, after the line step stripped the navigation
    block): a document's index row does not depend on the steps that ran."""
    from minideepseek.crossdedup.config import DedupConfig
    from minideepseek.dedup import signatures_for_texts

    tmp, config, _, _ = planted
    rows: dict[str, dict[str, np.ndarray]] = {}
    for run, near in (("on", True), ("off", False)):
        cfg = config(run, {"near": near})
        assert mix_sampler.main(["--config", str(cfg)]) == 0
        assert cross_source_dedup.main(["--config", str(cfg)]) == 0
        idx = tmp / "data" / run / "mixed_dedup" / "dedup_index"
        ids = (idx / "ids.txt").read_text().splitlines()
        rows[run] = dict(zip(ids, np.load(idx / "signatures.npy"), strict=True))
    raw = {r["id"]: r["text"] for r in datasets.load_from_disk(str(tmp / "data" / "off" / "mixed_raw"))}
    cleaned = {r["id"]: r["text"] for r in datasets.load_from_disk(str(tmp / "data" / "off" / "mixed_dedup"))}
    stripped = sorted(i for i in rows["off"] if NAV in raw[i] and cleaned[i] != raw[i])
    assert len(stripped) >= 10  # the case at stake: the line step changed these texts before the index was signed
    dc = DedupConfig()
    want = signatures_for_texts([raw[i] for i in stripped], dc.shingle, dc.ngram, dc.num_perm, dc.seed, dc.base_hash)
    assert np.array_equal(np.stack([rows["off"][i] for i in stripped]), want)
    both = sorted(set(rows["on"]) & set(rows["off"]))
    assert both and all(np.array_equal(rows["on"][i], rows["off"][i]) for i in both)


SUB_CHUNK_TOKENS = 6_000  # the planted code (~11.5K tokens) in two substring chunks (the quote's copies then apart)


@pytest.mark.slow
def test_line_and_paragraph_steps_in_a_pool_give_the_same_artifact(planted, monkeypatch):
    """Large inputs run the line/paragraph steps' per-document work in worker processes (results in row
    order, the Bloom filter and counters in the stage's process) and the substring step's chunks as tasks
    (after a pass that counts tokens: the chunks are find_repeats's): the same artifact and the same report
    as in one process. The substring step's chunks are small here, so there are several (the cuts of
    chunk tasks against find_repeats: test_substring_chunks_as_pool_tasks_find_what_one_process_finds)."""
    from minideepseek.artifact import read_manifest
    from minideepseek.crossdedup import granular

    tmp, config, _, _ = planted
    cfg = config("pool", {"substrings": {"max_tokens": SUB_CHUNK_TOKENS}})
    assert mix_sampler.main(["--config", str(cfg)]) == 0
    assert cross_source_dedup.main(["--config", str(cfg)]) == 0
    out = tmp / "data" / "pool" / "mixed_dedup"

    def state() -> tuple:
        rep = json.loads((tmp / "reports" / "pool" / "dedup_report.json").read_text())["granular"]
        files = {f.name: f.read_bytes() for f in sorted(out.iterdir())  # the data, not the timed reports
                 if f.is_file() and f.name not in ("manifest.json", "dedup_report.json", "dedup_report.md")}
        volatile = ("perf", "near_step_peak_rss_mb")  # measurements of this run, not its content
        return read_manifest(out)["fingerprint"], files, {k: v for k, v in rep.items() if k not in volatile}, rep["perf"]

    fp, files, rep, perf = state()
    assert "this process" in perf["lines"]["note"] and rep["lines"]["per_source"] and rep["paragraphs"]["per_source"]
    assert rep["substrings"]["chunks"] >= 2 and rep["substrings"]["tokens_in"] > SUB_CHUNK_TOKENS  # spans: next test
    monkeypatch.setattr(granular, "POOL_MIN_CHARS", 0)
    assert cross_source_dedup.main(["--config", str(cfg), "--force", "--set", "dedup.num_proc=2"]) == 0
    fp2, files2, rep2, perf2 = state()
    assert "2 worker processes" in perf2["lines"]["note"] and "2 worker processes" in perf2["substrings"]["note"]
    assert perf["substrings"]["note"] == "in this process"
    assert (fp2, rep2) == (fp, rep) and files2 == files


def test_index_round_trip_and_withdrawal_filter(tmp_path):
    from minideepseek.crossdedup.config import DedupConfig
    from minideepseek.crossdedup.index import PriorIndex, filter_index, index_params, save_index
    from minideepseek.crossdedup.near import banding
    from minideepseek.dedup import signatures_for_texts

    dc = DedupConfig()
    b, r = banding(dc)
    texts = [d for _, d in stdlib_docstrings(3, 400, 2000, unique=True)]
    sigs = signatures_for_texts(texts, dc.shingle, dc.ngram, dc.num_perm, dc.seed, dc.base_hash)
    params = index_params(dc, b, r)
    save_index(tmp_path / "a" / "dedup_index", ["x", "y", "z"], ["hx", "hy", "hz"], sigs, params)
    assert filter_index(tmp_path / "a" / "dedup_index", tmp_path / "b" / "dedup_index", {"y"}) == 1
    idx = PriorIndex(str(tmp_path / "b"), params)
    assert idx.ids == ["x", "z"] and set(idx.hashes) == {"hx", "hz"} and idx.ds is None
    assert (idx.sigs == sigs[[0, 2]]).all()
    pairs = idx.candidates(np.asarray(idx.keys))  # every indexed document is its own candidate
    assert {(int(q), int(k)) for q, k in pairs} >= {(0, 0), (1, 1)}
    from minideepseek.config import ConfigError
    with pytest.raises(ConfigError, match="num_perm"):
        PriorIndex(str(tmp_path / "b"), {**params, "num_perm": 64})
