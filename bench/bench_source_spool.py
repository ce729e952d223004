"""A demo source's records held in memory (before issue 20) vs spooled to disk (now): memory kept after
loading, and the time of load + one epoch in permuted order, as a ratio measured in this one process.

    nice -n 10 .venv/bin/python bench/bench_source_spool.py --domains web_en,math

For each domain: the in-memory path (every record a RawDoc in a list, yielded by index in the seeded
permutation: what ``DemoSource`` did) and the spooled path (``DemoSource.iter_raw`` now), checked to
yield equal records in the same order. Memory: tracemalloc's *current* traced bytes once the records are
loaded (what stays for the whole stage), in a pass of its own; time: a pass without tracemalloc, the
two paths alternated ``--repeat`` times, best of each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minideepseek.records import RawDoc  # noqa: E402
from minideepseek.rng import permuted  # noqa: E402
from minideepseek.runconfig import RunConfig  # noqa: E402
from minideepseek.sources.config import SourceConfig  # noqa: E402
from minideepseek.sources.demo import DemoSource  # noqa: E402


def _source(domain: str, spool_dir: Path) -> DemoSource:
    cfg = SourceConfig(name=f"b_{domain}", type="demo", weight=1.0, domain=domain)
    src = DemoSource(cfg, 1234, RunConfig(name="bench").cache_path, ("portable", "debian"))
    src.spool_dir = spool_dir
    return src


def _held(src: DemoSource) -> list[RawDoc]:
    return [src._to_raw(r) for r in src.corpus.iter_domain(src.cfg.domain)]  # noqa: SLF001 - the old path


def _epoch_held(src: DemoSource, recs: list[RawDoc]) -> int:
    n = 0
    for i in permuted(len(recs), src.seed, src.name, 1):
        n += len(recs[i].text or "")
    return n


def _epoch_spooled(src: DemoSource) -> int:
    return sum(len(r.text or "") for r in src.iter_raw(1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domains", default="web_en,math")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-spool-") as tmp:
        for domain in args.domains.split(","):
            src = _source(domain, Path(tmp))
            recs = _held(src)
            assert list(src.iter_raw(1)) == [recs[i] for i in permuted(len(recs), src.seed, src.name, 1)]
            nbytes = src._load().nbytes  # noqa: SLF001
            src.close()
            del recs
            # memory kept once loaded
            tracemalloc.start()
            recs = _held(src)
            held_mb = tracemalloc.get_traced_memory()[0] / 1e6
            del recs
            tracemalloc.stop()
            tracemalloc.start()
            src._load()  # noqa: SLF001
            spool_mb = tracemalloc.get_traced_memory()[0] / 1e6
            tracemalloc.stop()
            src.close()
            # time: load + one permuted epoch
            t_held, t_spool = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                recs = _held(src)
                _epoch_held(src, recs)
                t_held.append(time.perf_counter() - t0)
                del recs
                t0 = time.perf_counter()
                _epoch_spooled(src)
                t_spool.append(time.perf_counter() - t0)
                src.close()
            print(f"{domain}: {len(src.corpus.manifest['domains'][domain]['components'])} components; "
                  f"spool {nbytes / 1e6:.1f} MB on disk; memory kept after loading: held {held_mb:.1f} MB, "
                  f"spooled {spool_mb:.2f} MB; load + one epoch: held {min(t_held):.2f} s, spooled "
                  f"{min(t_spool):.2f} s (x{min(t_spool) / min(t_held):.2f})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
