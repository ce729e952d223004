"""--executor ray gives the same artifacts as the local run: stages 1-4 on a small real subset of the
demo corpus, once with local processes and once on a local Ray instance (2 CPUs, started and stopped
here); every non-volatile output file of every stage must be byte-identical. Plus the four-phase
MinHash engine against the local one on planted near-duplicates, with several signature blocks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import cross_source_dedup
import mix_sampler
import pack_shuffle
import train_tokenizer
from minideepseek.crossdedup import ray_near
from minideepseek.crossdedup.config import DedupConfig
from minideepseek.crossdedup.docs import Texts
from minideepseek.crossdedup.near import NearDedup
from minideepseek.crossdedup.resume import Memo
from minideepseek.executor import ExecutorSpec, RayExecutor, ray_init, ray_shutdown
from minideepseek.packing import partition
from minideepseek.units import Units
from tests.chain import build_chain
from tests.test_pipeline_e2e import _data_files

ray = pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[1]
STAGES = (mix_sampler, cross_source_dedup, train_tokenizer, pack_shuffle)


@pytest.fixture(scope="module")
def ray_instance():
    ray_init(num_cpus=2)  # as RayExecutor starts a local instance: loopback only, no dashboard, token auth
    yield
    ray_shutdown()


def _gcs_call(gcs: str, env: dict[str, str]) -> str:
    """A GCS request from another process (another local user's view) with the given auth settings."""
    code = ("import ray._raylet as r\n"
            f"try:\n    c = r.GcsClient(address={gcs!r})\n"
            "    c.internal_kv_get(b'k', b'ns', timeout=20)\n    print('SERVED')\n"
            "except Exception as e:\n    print('REFUSED', type(e).__name__)\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    r = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]


@pytest.mark.slow
def test_local_instance_needs_its_token_and_keeps_a_private_temp_dir(ray_instance):
    """Loopback keeps other machines out; the token keeps other local users out (before it, anyone on
    the box could submit tasks to a run's Ray). Ray's temp tree sits inside a 0700 directory."""
    from minideepseek import executor

    priv = executor._PRIVATE
    assert priv is not None and priv.dir.stat().st_mode & 0o777 == 0o700
    assert priv.token_path.stat().st_mode & 0o777 == 0o600
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    assert priv.dir in session.parents
    assert ray.get(ray.remote(lambda x: x + 1).remote(1)) == 2  # the run's own tasks are authenticated
    gcs = ray.get_runtime_context().gcs_address
    assert _gcs_call(gcs, {}) == "REFUSED AuthenticationError"
    assert _gcs_call(gcs, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}) == "REFUSED AuthenticationError"
    assert _gcs_call(gcs, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(priv.token_path)}) == "SERVED"


@pytest.mark.slow
def test_local_instance_listens_on_loopback_only(ray_instance):
    import psutil

    assert ray.util.get_node_ip_address() == "127.0.0.1"
    procs = psutil.Process().children(recursive=True)  # gcs_server, raylet, workers, ...
    listening = [(p.name(), c.laddr.ip, c.laddr.port) for p in procs
                 for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening, "the local Ray instance listens on no port? (the check would prove nothing)"
    exposed = [x for x in listening if x[1] not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")]
    assert not exposed, f"listening beyond loopback: {exposed}"


def _demo_subset(tmp: Path, name: str) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    cfg["run"].update({"name": "sub", "data_dir": str(tmp / name / "data"), "reports_dir": str(tmp / name / "reports")})
    cfg["sampler"]["target_tokens"] = 200_000
    cfg["tokenizer"]["vocab_size"] = 4_000
    cfg["dedup"]["scurve_docs"] = 20
    cfg["pack"].update({"seq_len": 256, "max_shard_bytes": 64 << 10, "batch_docs": 16})
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return p


@pytest.mark.slow
def test_ray_run_equals_local_run(tmp_path, ray_instance, monkeypatch):
    monkeypatch.setattr(partition, "PARTITION_DOCS", 40)  # several stage-4 partitions (set on the driver)
    local, remote = _demo_subset(tmp_path, "local"), _demo_subset(tmp_path, "ray")
    for stage in STAGES:
        assert stage.main(["--config", str(local)]) == 0
    for stage in STAGES:
        assert stage.main(["--config", str(remote), "--executor", "ray"]) == 0
    a, b = _data_files(tmp_path / "local" / "data" / "sub"), _data_files(tmp_path / "ray" / "data" / "sub")
    assert {k.split("/")[0] for k in a} == {"mixed_raw", "mixed_dedup", "tokenizer", "packed"}
    assert len([k for k in a if k.startswith("packed/data-")]) >= 2  # several packed shards
    assert a == b, "the Ray run must write byte-identical artifacts"
    rep = json.loads((tmp_path / "ray" / "data" / "sub" / "mixed_dedup" / "dedup_report.json").read_text())
    assert rep["near"]["ray"]["signature_tasks"] >= 1  # the stage really ran the Ray engine
    assert not list((tmp_path / "ray" / "data" / "sub").glob("mixed_dedup/.near-work"))
    # pack.by_source: per-source partition tasks on Ray write the same blocks as the local packer
    by_src = ["--set", "pack.by_source=true"]
    assert pack_shuffle.main(["--config", str(local), *by_src]) == 0
    assert pack_shuffle.main(["--config", str(remote), "--executor", "ray", *by_src]) == 0
    a, b = _data_files(tmp_path / "local" / "data" / "sub"), _data_files(tmp_path / "ray" / "data" / "sub")
    assert {k: v for k, v in a.items() if k.startswith("packed/")} == {k: v for k, v in b.items() if k.startswith("packed/")}


def test_four_phase_engine_matches_local(tmp_path, ray_instance, monkeypatch):
    """Several signature blocks and verification chunks (tiny block sizes), exact verification."""
    root = build_chain(tmp_path)
    src = root / "data" / "t" / "mixed_raw"

    cfg = DedupConfig(threshold=0.5, num_proc=1, scurve_docs=10)
    todo = list(range(80))
    local = NearDedup(cfg, None)
    local.signatures(Texts(src), todo)
    lc, li = local.clusters()
    monkeypatch.setattr(ray_near, "BLOCK_DOCS", 7)
    monkeypatch.setattr(ray_near, "VERIFY_PAIRS", 3)
    rn = ray_near.RayNearDedup(cfg, RayExecutor(ExecutorSpec("ray")), tmp_path / "work")
    rn.signatures(Texts(src), todo)
    rc, ri = rn.clusters()
    assert rn.stats["signature_tasks"] == 12 and len(rn.stats["bytes_shuffled_per_band"]) == rn.b
    assert np.array_equal(rn.sigs[0:80], local.sigs)
    assert rc == lc and ri["verified_edges"] == li["verified_edges"] and len(lc) >= 1
    assert rn.pair_jaccard(lc[0][0], lc[0][1]) == local.pair_jaccard(lc[0][0], lc[0][1])
    some = [(int(a), int(b)) for a, b, _, _ in li["verified_edges"][:5]] + [(0, 1), (2, 79)]
    assert local.pair_jaccards(some, chunk=3) == [local.pair_jaccard(a, b) for a, b in some]
    assert rn.prefiltered == local.prefiltered and ri["rejected_by_estimate"] == li["rejected_by_estimate"]
    # the keep policy and the residual check see the same edges and signatures: same answers
    from minideepseek.crossdedup.keep import greedy_keep

    edges = [(a, b, j) for a, b, j, _ in li["verified_edges"]]
    removed = greedy_keep(edges, {d: d for e in edges for d in e[:2]})
    kept = set(todo) - set(removed)
    assert rn.residual(kept, edges, 3) == local.residual(kept, edges, 3)
    rn.close()
    assert not (tmp_path / "work").exists()

    # resume inside stage 2 (crossdedup/resume.py): the driver records a unit as each task completes; an
    # engine interrupted after 5 units leaves its block files and records, and a new engine over the same
    # temp dir computes only the other units, with the same result
    class Stop(Exception):
        pass

    class Interrupted(Memo):
        def save(self, name, result, state=None):
            if self.computed == 5:
                raise Stop
            return super().save(name, result, state)

    art = tmp_path / "art.tmp-1"
    r1 = ray_near.RayNearDedup(cfg, RayExecutor(ExecutorSpec("ray")), art / ".near-work",
                               Interrupted(Units(art, "cross_source_dedup", "k")))
    with pytest.raises(Stop):
        r1.signatures(Texts(src), todo)
    memo = Memo(Units(art, "cross_source_dedup", "k"))
    r2 = ray_near.RayNearDedup(cfg, RayExecutor(ExecutorSpec("ray")), art / ".near-work", memo)
    r2.signatures(Texts(src), todo)
    rc2, ri2 = r2.clusters()
    assert rc2 == lc and ri2["verified_edges"] == li["verified_edges"]
    assert np.array_equal(r2.sigs[0:80], local.sigs)
    assert len(memo.units.reused) == 5 and memo.computed == rn.memo.computed - 5

def test_stage1_interrupted_on_ray_resumes_to_the_local_artifact(tmp_path, ray_instance, monkeypatch):
    """Issue 33 on Ray: stage 1's units (fetched batches) are recorded by the driver, so a run interrupted on
    Ray resumes (on Ray) to the artifact of an uninterrupted local run (the kill tests: test_mix_sampler_resume)."""
    from minideepseek.stage import read_manifest
    from minideepseek.units import Units
    from tests.test_mix_sampler_resume import _cfg

    cfg = _cfg(tmp_path)
    art = tmp_path / "data" / "t" / "mixed_raw"
    args = ["--config", str(cfg), "--set", "sampler.batch_size=64"]  # fewer Ray tasks
    assert mix_sampler.main(args) == 0
    ref = read_manifest(art)
    art.rename(art.with_name("reference"))
    finish = Units.finish

    def interrupted(self: Units, name: str, state: dict | None = None) -> None:
        finish(self, name, state)
        if self._finished == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(Units, "finish", interrupted)
    assert mix_sampler.main([*args, "--executor", "ray"]) == 130
    monkeypatch.setattr(Units, "finish", finish)
    assert mix_sampler.main([*args, "--executor", "ray"]) == 0
    man = read_manifest(art)
    assert man["resumed"]["units_reused"] == 3 and man["fingerprint"] == ref["fingerprint"]
