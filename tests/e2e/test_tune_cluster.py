"""`opdesign tune --cluster`: a small tune through a two-worker Dask LocalCluster gives the same best as the local
pool (issue 32 deliver 6). Marked slow (it starts a cluster); the fake SIM runner keeps it cheap and lets it run
beside nothing that simulates. Skips without the opdesign[cluster] extra."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import REPO

if importlib.util.find_spec("distributed") is None:
    pytest.skip("the opdesign[cluster] extra is not installed (distributed missing): pip install '.[cluster]'",
                allow_module_level=True)

pytestmark = pytest.mark.slow

TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"


def test_tune_through_a_local_dask_cluster_gives_the_local_pools_best(monkeypatch, tmp_path):
    from distributed import LocalCluster

    from opdesign.tuning.pool import DaskPool, LocalPool
    from opdesign.tuning.simcache import SimCache
    from opdesign.workflows.tune import Journal, tune

    monkeypatch.setenv("OPDESIGN_SIM_RUNNER", "fake")
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    local = LocalPool(2)
    try:
        here = tune(TINY, budget=8, batch=4, out=tmp_path / "local", pool=local, cache=SimCache(tmp_path / "c1", 0))
    finally:
        local.close()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        pool = DaskPool(cluster.scheduler_address)
        try:
            there = tune(TINY, budget=8, batch=4, out=tmp_path / "dask", pool=pool,
                         cache=SimCache(tmp_path / "c2", 0))
            workers = {r["result"]["pid"] for r in Journal(tmp_path / "dask" / "tune" / "journal.jsonl").read()
                       if r["kind"] == "run"}
        finally:
            pool.close()
    assert there["best"] == here["best"] and there["sim_runs"] == here["sim_runs"] == 8
    assert len(workers) == 2  # both cluster workers simulated
    keys = lambda out: [json.loads(line)["row_key"] for line in (out / "tune" / "journal.jsonl").open()  # noqa: E731
                        if '"kind": "run"' in line]
    # the same rows (the journal lists a batch in completion order, which differs)
    assert sorted(keys(tmp_path / "dask")) == sorted(keys(tmp_path / "local"))
