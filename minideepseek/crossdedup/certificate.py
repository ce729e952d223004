"""The recall certificate (``canaries.enabled``): every dedup and decontamination step of stage 2 measured
on the run the user made, with seeded canaries derived from the run's own documents (:mod:`.canaries`).

A canary is never written anywhere. After the stage's own pass, each one is put through the decision of
the step it is made for, against that step's index as the run built it, without being added to it, so
no real document's fate can change (``mixed_dedup`` is byte-identical with and without canaries):

- ``exact``: its normalized-text hash against the hashes of the documents exact dedup grouped;
- ``url``: its normalized URL against the URL of the document it re-spells;
- ``near``: its MinHash signature (the run's permutations) -> the run's band keys (same bands x rows, a
  bucket over ``DEFAULT_MAX_CLIQUE`` pairs with its first member only, as the stage does) -> the signature
  prefilter -> exact Jaccard on the stage's shingles; caught when a candidate verifies >= threshold;
- ``paragraphs``: its planted paragraph against the run's Bloom filter (or hash set), read only;
- ``decontamination``: the run's benchmark n-gram index scans it; caught when it names the planted item;
- ``lines`` and ``substrings`` keep no index after the stage (per-bucket counts, a suffix array): their
  decision is replayed with the run's parameters (bucket count, max_repeats, seed; min_tokens,
  cross_doc_only, engine) on the canaries and their origin document alone.

Controls are canaries a step must leave alone: near variants below the threshold, a line in exactly
max_repeats documents of a bucket, a span of min_tokens - 10 tokens. Recall per step comes with a 95%
Wilson interval; a step fails below its floor or with more false removals than allowed.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ConfigError
from ..dedup import band_keys, estimated_jaccard, exact_jaccard, s_curve
from ..dedup.lsh import DEFAULT_MAX_CLIQUE
from ..fsio import write_json_atomic, write_text_atomic
from ..records import text_hash
from ..rng import rng_for
from ..tickets import Matcher, Selector
from .canaries import (
    PERTURBATIONS,
    Canary,
    insert_at_line,
    line_variant,
    near_variant,
    perturb_item,
    url_variants,
    ws_case_variant,
)
from .decontam import iter_items, words
from .docs import Docs, Texts
from .granular_config import step_sources
from .lines import LineCounter, bucket_of, counts, normalize_line
from .spans import normalize_paragraph
from .substrings import _TOKEN as SUB_TOKEN
from .substrings import find_repeats
from .urls import normalize_url

log = logging.getLogger(__name__)

STEPS = ("url", "exact", "near", "lines", "paragraphs", "substrings", "decontamination", "withdrawal")
FILES = ("certificate.json", "certificate.md")
VERIFY_TOP = 8  # near: candidates verified per canary, best signature estimate first
# origins drawn per canary wanted: a drawn document may not fit (the demo's Chinese fortunes have no line
# of 20 characters, many pages no paragraph of 40); the first ones that fit are used
SPARE = 4
# A test seam: when a list, every canary's (id, step, text) is appended to it, so a test can search the
# run's artifacts for the canaries (tests/test_certificate.py); the stage itself keeps no canary text.
KEEP_TEXTS: list[tuple[str, str, str]] | None = None


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion k/n (sound at k = n, unlike the normal one)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # at k = 0 (k = n) the bound is exactly 0 (1); floating point would give 1e-17 (0.9999999999999999)
    return (0.0 if k == 0 else float(mid - half)), (1.0 if k == n else float(mid + half))


class Certifier:
    """Canaries from the stage's table ``d`` and texts ``raw`` (mixed_raw: the documents as sampled); the
    steps after the cleaning are probed on the cleaned texts, handed to :meth:`cleaned` and :meth:`contamination`."""

    def __init__(self, cfg: Any, d: Docs, raw: Texts, recipe: dict[str, str]) -> None:
        self.cfg, self.cc, self.dc = cfg, cfg.canaries, cfg.dedup
        self.recipe = recipe  # source -> domain (the steps' source selection)
        self.d, self.raw = d, raw
        self.canaries: list[Canary] = []
        self.ran: dict[str, str] = {}  # step -> "" when probed, else why not
        self.detail: dict[str, Any] = {}
        self._n: Counter = Counter()  # canaries per step (their ids)
        self.wall = 0.0

    def _rng(self, *keys: str | int) -> np.random.Generator:
        return rng_for(self.cfg.run.seed, "canaries", self.cc.seed, *keys)

    def _pick(self, pool: list[int], k: int, key: str) -> list[int]:
        if not pool or k <= 0:
            return []
        return sorted(self._rng("pick", key).choice(pool, size=min(k, len(pool)), replace=False).tolist())

    def _add(self, step: str, kind: str, origin: str, expect: bool, caught: bool, jaccard: float | None = None,
             text: str = "") -> None:
        n = self._n[step]
        self._n[step] += 1
        self.canaries.append(Canary(f"canary/{step}/{n}", step, kind, origin, expect,
                                    None if jaccard is None else round(jaccard, 4), bool(caught)))
        if KEEP_TEXTS is not None and text:
            KEEP_TEXTS.append((self.canaries[-1].id, step, text))

    # ---- after near dedup: exact, url, near (whole documents, on the texts as sampled)
    def documents(self, nd: Any) -> None:
        t0 = time.perf_counter()
        d = self.d
        before_exact = [i for i in range(d.n) if not d.copies[i] and d.removed.get(i, {}).get("reason") != "url"]
        sized = [i for i in before_exact if 200 <= d.n_chars[i] <= 30_000]
        if self.dc.exact:
            self.ran["exact"] = ""
            groups = {d.hashes[i] for i in before_exact}  # exact dedup groups these documents by hash
            for i in self._pick(sized, self.cc.exact_docs, "exact"):
                text = self.raw[i]
                for kind, var in (("copy", text), ("ws_case", ws_case_variant(text, self._rng("exact", i)))):
                    self._add("exact", kind, d.ids[i], True, text_hash(var) in groups, text=var)
        else:
            self.ran["exact"] = "dedup.exact is off"
        self._urls(d)
        self._near(d, nd, sized)
        self._withdrawal(d, sized)
        self.wall += time.perf_counter() - t0

    def _withdrawal(self, d: Docs, sized: list[int]) -> None:
        """Withdrawal probes: would a deletion request find this document? The resolver's own matcher
        (withdraw.py resolves tickets with it on mixed_raw) given the document's id, its hash recomputed
        from its text, its URL, and a 60-character fragment of it re-cased and re-spaced."""
        self.ran["withdrawal"] = ""
        for i in self._pick(sized, self.cc.withdrawal_docs, "withdrawal"):
            # what the matcher reads of a row; the hash is mixed_raw's (the cleaning has not replaced it yet)
            row = {"id": d.ids[i], "source": d.srcs[i], "hash": d.hashes[i], "url": d.urls[i], "text": self.raw[i]}
            rng = self._rng("withdrawal", i)
            text = row["text"]
            a = int(rng.integers(0, max(1, len(text) - 60)))
            probes = [("id", row["id"]), ("hash", text_hash(text)), ("text", ws_case_variant(text[a:a + 60], rng))]
            if row.get("url"):
                probes.append(("url", row["url"]))
            for kind, value in probes:
                try:
                    m = Matcher([("canary", [Selector(kind, value)], [])])
                except ConfigError:  # a fragment too short after normalization: not a request one could make
                    continue
                self._add("withdrawal", kind, row["id"], True, m.match(row) is not None)

    def _urls(self, d: Docs) -> None:
        uc = self.dc.urls
        if not uc.enabled:
            self.ran["url"] = "dedup.urls is off"
            return
        self.ran["url"] = ""
        ok = step_sources(uc, self.recipe)
        urls = d.urls
        pool = [i for i in range(d.n) if not d.copies[i] and d.srcs[i] in ok and (urls[i] or "").startswith("http")]
        for i in self._pick(pool, self.cc.url_docs, "url"):
            own = normalize_url(urls[i], uc.drop_fragment, uc.origin_rules)
            for kind, var in url_variants(urls[i]):
                self._add("url", kind, d.ids[i], True, normalize_url(var, uc.drop_fragment, uc.origin_rules) == own)

    def _near(self, d: Docs, nd: Any, sized: list[int]) -> None:
        if nd is None:
            self.ran["near"] = "dedup.near is off"
            return
        if getattr(nd, "sigs", None) is None:
            self.ran["near"] = "the Ray engine keeps no signature matrix in the driver: not probed"
            return
        self.ran["near"] = ""
        dc, t = self.dc, self.dc.threshold
        entered = set(np.asarray(nd.doc_index).tolist())
        pool = [i for i in sized if i in entered and i not in d.removed]
        origins, texts, targets = [], [], []
        for i in self._pick(pool, self.cc.near_docs, "near"):
            text = self.raw[i]
            for off in self.cc.near_bins:
                target = min(0.995, max(0.05, t + off))
                var, j = near_variant(text, target, nd.shingles_of_text, self._rng("near", i, off))
                if j < 1.0:
                    origins.append(i)
                    texts.append((var, j))
                    targets.append(target)
        if not texts:
            return
        keys = _all_band_keys(nd.sigs, nd.b, nd.r)
        order = [np.argsort(keys[:, k], kind="stable") for k in range(nd.b)]
        sorted_keys = [keys[o, k] for k, o in enumerate(order)]
        sigs = nd.sig_of_texts([v for v, _ in texts])
        qkeys = band_keys(sigs, nd.b, nd.r)
        expected = []
        for q, ((var, j), i) in enumerate(zip(texts, origins)):
            cands: set[int] = set()
            for k in range(nd.b):
                sk = sorted_keys[k]
                lo, hi = np.searchsorted(sk, qkeys[q, k], "left"), np.searchsorted(sk, qkeys[q, k], "right")
                rows = order[k][lo:hi]
                # the stage turns a bucket of more than DEFAULT_MAX_CLIQUE documents into a star around its
                # first member: the canary would be paired with that one only
                cands.update(rows.tolist() if hi - lo + 1 <= DEFAULT_MAX_CLIQUE else [int(rows.min())])
            caught = False
            if cands:
                rows = np.array(sorted(cands), dtype=np.int64)
                est = np.asarray(estimated_jaccard(np.repeat(sigs[q:q + 1], len(rows), 0), nd.sigs[rows])).reshape(-1)
                live = [(e, r) for e, r in zip(est.tolist(), rows.tolist()) if e >= t - dc.prefilter_margin]
                mine = nd.shingles_of_text(var) if dc.verify == "exact" else None
                for e, r in sorted(live, reverse=True)[:VERIFY_TOP]:
                    other = None if mine is None else nd.shingles_of_text(nd.text_of(int(nd.doc_index[r])))
                    jj = e if mine is None else float(exact_jaccard(mine, other))
                    if jj >= t:
                        caught = True
                        break
            self._add("near", f"J~{targets[q]:.3f}", d.ids[i], j >= t, caught, j, text=var)
            if j >= t:
                expected.append(float(s_curve(j, nd.b, nd.r)))
        # what the banding promises for these canaries (each verified exactly): the S-curve at their J
        self.detail["near"] = {"bands": nd.b, "rows": nd.r, "threshold": t,
                               "expected_recall_by_s_curve": round(float(np.mean(expected)), 4) if expected else None}

    # ---- after lines/paragraphs/substrings: on the cleaned survivors
    def cleaned(self, gran: Any, texts: Texts) -> None:
        """``texts``: as the steps left them."""
        t0 = time.perf_counter()
        live = self.d.live()
        dc = self.dc
        if dc.paragraphs.enabled and getattr(gran, "para", None) is not None:
            self._paragraphs(gran, texts, live)
        else:
            self.ran["paragraphs"] = "dedup.paragraphs is off or selects no source"
        if dc.lines.enabled and getattr(gran, "line_buckets", 0):
            self._lines(gran, texts, live)
        else:
            self.ran["lines"] = "dedup.lines is off or selects no source"
        if dc.substrings.enabled and step_sources(dc.substrings, self.recipe):
            self._substrings(gran, texts, live)
        else:
            self.ran["substrings"] = "dedup.substrings is off or selects no source"
        self.wall += time.perf_counter() - t0

    def _step_pool(self, step: str, step_cfg: Any, gran: Any, live: list[int]) -> list[int]:
        """The step runs: the surviving documents of the sources it selects (its canaries' origins)."""
        self.ran[step] = ""
        ok = step_sources(step_cfg, self.recipe)
        return [i for i in live if self.d.srcs[i] in ok]

    def _paragraphs(self, gran: Any, texts: Texts, live: list[int]) -> None:
        pc = self.dc.paragraphs
        pool = self._step_pool("paragraphs", pc, gran, live)
        done = 0
        for i in self._pick(pool, SPARE * self.cc.paragraph_docs, "paragraphs"):
            paras = [p for p in texts[i].split("\n") if len(normalize_paragraph(p)) >= pc.min_chars]
            if done == self.cc.paragraph_docs:
                break
            if not paras:
                continue
            done += 1
            rng = self._rng("paragraphs", i)
            # re-cased and re-spaced on one line (a paragraph is a line): the step's normalization folds both
            var = ws_case_variant(paras[int(rng.integers(len(paras)))], rng, newlines=False)
            self._add("paragraphs", "repeated_paragraph", self.d.ids[i], True, gran.para.was_seen(normalize_paragraph(var)),
                      text=var)

    def _lines(self, gran: Any, texts: Texts, live: list[int]) -> None:
        lc = self.dc.lines
        pool = self._step_pool("lines", lc, gran, live)
        k = lc.max_repeats
        s = 0  # sets planted
        for i in self._pick(pool, SPARE * self.cc.line_sets, "lines"):
            if s == self.cc.line_sets:
                break
            rng = self._rng("lines", i)
            norms = [(ln, normalize_line(ln)) for ln in texts[i].split("\n")]
            cands = [ln for ln, n in norms if len(n) >= max(20, lc.min_line_chars)
                     and counts(n, lc.min_line_chars, lc.code_aware)]
            if not cands:
                continue
            s += 1
            line = cands[int(rng.integers(len(cands)))]
            hosts = [h for h in self._pick(pool, 2 * k + 1, f"lines-hosts-{s}") if h != i]
            for role, m in (("boilerplate", k + 1), ("control", k)):  # over max_repeats, and at it
                counter = LineCounter(1, lc.bucket_docs, k, lc.min_line_chars, self.cfg.run.seed, lc.code_aware)
                counter.n_buckets = gran.line_buckets  # the run's bucketing
                docs = []
                for h in (hosts * (m // max(1, len(hosts)) + 1))[:m]:
                    cid = _in_bucket(f"canary/lines/{s}/{role}/{len(docs)}", self.cfg.run.seed, counter.n_buckets, s)
                    docs.append((cid, insert_at_line(texts[h], line_variant(line, rng), rng)[0]))
                for cid, text in docs:
                    counter.add(cid, text)
                counter.finish()
                want = normalize_line(line)
                for cid, text in docs:
                    self._add("lines", role, self.d.ids[i], role == "boilerplate", want in counter.strip(cid, text)[1],
                              text=text)

    def _substrings(self, gran: Any, texts: Texts, live: list[int]) -> None:
        sc = self.dc.substrings
        pool = self._step_pool("substrings", sc, gran, live)
        need = sc.min_tokens + 40
        picked = self._pick(pool, 2 * SPARE * self.cc.substring_docs, "substrings")
        done = 0
        for x, y in zip(picked[0::2], picked[1::2]):
            if done == self.cc.substring_docs:
                break
            text = texts[x]
            toks = [m.span() for m in SUB_TOKEN.finditer(text)]
            if len(toks) < need:
                continue
            done += 1
            rng = self._rng("substrings", x)
            for role, n in (("quoted_span", sc.min_tokens + 10), ("control", max(1, sc.min_tokens - 10))):
                a = int(rng.integers(0, len(toks) - n))
                span = text[toks[a][0]:toks[a + n - 1][1]]
                canary, pos = insert_at_line(texts[y], span, rng)
                res = find_repeats([(0, text), (1, canary)], sc.min_tokens, sc.engine, sc.max_tokens, 0,
                                   [self.d.ids[x], "canary"], sc.cross_doc_only)
                cut = sum(max(0, min(b, pos + len(span)) - max(a_, pos)) for a_, b in res.cut.get(1, []))
                self._add("substrings", role, self.d.ids[x], role == "quoted_span", cut >= len(span) // 2, text=canary)

    # ---- after decontamination
    def contamination(self, index: Any, texts: Texts) -> None:
        """Benchmark items planted in surviving documents of ``texts`` (the cleaned ones): the run's index finds them?"""
        if index is None:
            self.ran["decontamination"] = "decontam.enabled is off"
            return
        t0 = time.perf_counter()
        self.ran["decontamination"] = ""
        live = [i for i in self.d.live() if 200 <= self.d.n_chars0[i] <= 30_000]  # sizes as sampled
        hosts = [h for h in self._pick(live, 4 * self.cc.benchmark_items, "decontam-hosts")
                 if not index.scan("host", "", texts[h])]  # a host must not hit anything of its own
        if not hosts:
            self.wall += time.perf_counter() - t0
            return
        for spec in self.cfg.decontam.benchmarks:
            items = [(iid, text) for iid, text in iter_items(spec) if len(words(text)) >= 60]
            chosen = self._pick(list(range(len(items))), self.cc.benchmark_items, f"decontam-{spec.name}")
            for q, it in enumerate(chosen):
                iid, text = items[it]
                for kind in PERTURBATIONS:
                    rng = self._rng("decontam", spec.name, iid, kind)
                    h = hosts[(q + PERTURBATIONS.index(kind)) % len(hosts)]
                    canary = insert_at_line(texts[h], perturb_item(text, kind, rng), rng)[0]
                    hit = any(x.benchmark == spec.name and x.item_id == iid for x in index.scan("canary", "", canary))
                    self._add("decontamination", kind, f"{spec.name}:{iid}", True, hit, text=canary)
        self.wall += time.perf_counter() - t0

    # ---- the certificate
    def finish(self, tmp: Path) -> dict[str, Any]:
        cert = certificate(self.canaries, self.ran, self.cc, self.detail, self.wall)
        write_json_atomic(tmp / "certificate.json", cert)
        write_text_atomic(tmp / "certificate.md", certificate_markdown(cert))
        log.info("canary certificate: %s", cert["line"])
        return {k: cert[k] for k in ("passed", "line", "failed")}


def _in_bucket(base: str, seed: int, n_buckets: int, want: int) -> str:
    """``base`` with the first suffix that lands in bucket ``want % n_buckets`` (seeded bucketing)."""
    for m in range(100 * n_buckets + 100):
        cid = f"{base}.{m}"
        if bucket_of(cid, seed, n_buckets) == want % n_buckets:
            return cid
    return base


def _all_band_keys(sigs: Any, b: int, r: int, block: int = 1 << 16) -> np.ndarray:
    """Band keys of every signature: an in-memory matrix (the local engine) or the Ray engine's block files
    (``ray_near.BlockedSigs``), read a block of rows at a time so the driver never holds them all."""
    if isinstance(sigs, np.ndarray):
        return band_keys(sigs, b, r)
    n = len(sigs)
    parts = [band_keys(sigs.take(np.arange(s0, min(s0 + block, n))), b, r) for s0 in range(0, n, block)]
    return np.concatenate(parts) if parts else np.empty((0, b), dtype=np.uint64)


def _floor(step: str, cc: Any) -> float:
    return {"near": cc.min_near_recall, "decontamination": cc.min_decontam_recall}.get(step, cc.min_recall)


def certificate(canaries: list[Canary], ran: dict[str, str], cc: Any, detail: dict[str, Any], wall: float) -> dict[str, Any]:
    """Per step: planted, caught, recall with its 95% Wilson interval, false removals of the controls, verdict."""
    steps: dict[str, Any] = {}
    failed = []
    for step in STEPS:
        mine = [c for c in canaries if c.step == step]
        why = ran.get(step, "not reached")
        should = [c for c in mine if c.expect]
        caught = sum(1 for c in should if c.caught)
        controls = [c for c in mine if not c.expect]
        false = sum(1 for c in controls if c.caught)
        lo, hi = wilson(caught, len(should))
        floor = _floor(step, cc)
        recall = caught / len(should) if should else None
        if why:
            verdict = "NOT RUN"
        elif not should:
            verdict = "NO CANARIES"
        else:
            verdict = "PASS" if recall >= floor and false <= cc.max_false_removals else "FAIL"
        by_kind = {}
        for kind in sorted({c.kind for c in mine}):
            ks = [c for c in mine if c.kind == kind]
            by_kind[kind] = {"planted": len(ks), "caught": sum(1 for c in ks if c.caught), "control": not ks[0].expect}
        steps[step] = {"verdict": verdict, "why_not_run": why or None, "planted": len(mine), "should_catch": len(should),
                       "caught": caught, "recall": None if recall is None else round(recall, 4),
                       "ci95": [round(lo, 4), round(hi, 4)] if should else None, "floor": floor,
                       "controls": len(controls), "false_removals": false, "by_kind": by_kind,
                       "missed": [c.row() for c in should if not c.caught][:10],
                       "falsely_removed": [c.row() for c in controls if c.caught][:10], **(detail.get(step) or {})}
        if verdict == "FAIL":
            failed.append(f"{step} recall {recall:.2f} ({caught}/{len(should)}) vs floor {floor}"
                          + (f", {false} false removal(s)" if false else ""))
    passed = not failed
    ok = [f"{s} {v['caught']}/{v['should_catch']}" for s, v in steps.items() if v["verdict"] == "PASS"]
    line = "PASS: " + ", ".join(ok) if passed else "FAIL: " + "; ".join(failed)
    return {"passed": passed, "line": line, "failed": failed, "seed": cc.seed, "canaries": len(canaries),
            "wall_s": round(wall, 3), "steps": steps,
            "near_bins": [c.row() for c in canaries if c.step == "near"],
            "counts": dict(Counter(c.step for c in canaries))}


def certificate_markdown(cert: dict[str, Any]) -> str:
    lines = ["# Recall certificate (seeded canaries)", "",
             f"**{'PASS' if cert['passed'] else 'FAIL'}** — {cert['canaries']:,} canaries derived from this run's documents "
             f"and benchmarks, probed against each step's index and never written (canaries.seed {cert['seed']}; "
             f"{cert['wall_s']} s).", "",
             "| step | verdict | planted | must catch | caught | recall | 95% CI (Wilson) | floor | controls "
             "| false removals |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for step, s in cert["steps"].items():
        ci = f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s["ci95"] else "—"
        rec = "—" if s["recall"] is None else f"{s['recall']:.3f}"
        verdict = s["verdict"] + (f" ({s['why_not_run']})" if s["why_not_run"] else "")
        lines.append(f"| {step} | {verdict} | {s['planted']} | {s['should_catch']} | {s['caught']} | {rec} | {ci} | "
                     f"{s['floor']} | {s['controls']} | {s['false_removals']} |")
    near = cert["steps"]["near"]
    if near["planted"]:
        lines += ["", f"Near duplicates (bands x rows {near.get('bands')} x {near.get('rows')}, threshold "
                      f"{near.get('threshold')}; the S-curve expects recall {near.get('expected_recall_by_s_curve')} "
                      f"on the canaries at or above it), by exact Jaccard:", "",
                  "| exact Jaccard | planted | removed | must be |", "|---|---:|---:|---|"]
        edges = sorted({round(x, 2) for x in np.arange(0.0, 1.0001, 0.05)})
        rows = cert["near_bins"]
        for a, b in zip(edges, edges[1:]):
            got = [r for r in rows if a <= r["jaccard"] < b or (b == 1.0 and r["jaccard"] == 1.0)]
            if got:
                must = {r["expect"] for r in got}
                lines.append(f"| [{a:.2f}, {b:.2f}) | {len(got)} | {sum(1 for r in got if r['caught'])} | "
                             f"{'mixed (threshold inside)' if len(must) > 1 else 'removed' if True in must else 'kept'} |")
    for step in ("decontamination", "url", "exact", "lines", "substrings", "withdrawal"):
        s = cert["steps"][step]
        if s["by_kind"]:
            kinds = (f"{k} {v['caught']}/{v['planted']}" + (" (control)" if v["control"] else "")
                     for k, v in s["by_kind"].items())
            lines += ["", f"{step} by kind: " + ", ".join(kinds)]
    for step, s in cert["steps"].items():
        for c in s["missed"][:3]:
            j = f", J={c['jaccard']}" if "jaccard" in c else ""
            lines.append(f"- missed ({step}): {c['kind']} from `{c['origin']}`{j}")
    return "\n".join(lines) + "\n"
