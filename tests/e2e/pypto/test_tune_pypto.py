"""Issue 32 through the real PyPTO SIM on the tiny dense SPEC (marked `pypto`; skips without the extra):
verify names the shape it measured at, a second `rank --sim` is served from the SIM cache, a warm worker gives
the same SIM figure as a fresh process, and a small `opdesign tune` runs end to end."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import REPO, run_cli

MISSING = [m for m in ("pypto", "torch") if importlib.util.find_spec(m) is None]
if MISSING:
    pytest.skip(f"the opdesign[pypto] extra is not installed ({', '.join(MISSING)} missing): "
                "pip install '.[pypto]'", allow_module_level=True)

pytestmark = pytest.mark.pypto

TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPDESIGN_SIM_RUNNER", raising=False)
    return tmp_path / "cache"


def test_two_candidates_are_measured_at_one_named_shape(tmp_path):
    from opdesign.pypto_run.design import verify_dir

    shapes, texts = [], []
    for n in (1, 40):
        out = tmp_path / f"c{n}"
        res = run_cli("new", "--spec", str(TINY), "--out", str(out), "--candidate", str(n), "--within-form")
        assert res.returncode == 0, res.stderr
        report = verify_dir(out, quick=True, verify=False)
        (config,) = report.configs
        assert config.compiled and config.sim_us > 0, report.errors
        shapes.append(config.shape)
        texts.append(run_cli("verify", str(out), "--quick", "--no-verify", timeout=600).stdout)
    assert shapes[0] == shapes[1] and shapes[0]["seq_q"] == 256
    assert all("us at batch 1, num_heads 1, num_kv_heads 1, seq_q 256, seq_kv 256, head_dim 64" in t for t in texts)


def test_a_second_rank_sim_is_served_from_the_cache(cache_dir):
    first = run_cli("rank", "--spec", str(TINY), "--sim", "1", "--json", timeout=900)
    assert first.returncode == 0, first.stderr
    a = json.loads(first.stdout)
    assert a["sim"]["cache"]["misses"] >= 2 and a["sim"]["cache"]["hits"] == 0
    second = run_cli("rank", "--spec", str(TINY), "--sim", "1", "--json", timeout=900)
    b = json.loads(second.stdout)
    assert b["sim"]["cache"]["hits"] == a["sim"]["cache"]["misses"] and b["sim"]["cache"]["misses"] == 0
    assert [r["sim_us"] for r in b["rows"]] == [r["sim_us"] for r in a["rows"]]
    assert "compile + SIM" not in second.stderr and "from the SIM cache" in second.stderr


def test_a_warm_worker_gives_the_fresh_process_figure(cache_dir):
    from opdesign.render.design import render_kernel
    from opdesign.spec import load_spec
    from opdesign.tuning import rank_candidates
    from opdesign.tuning.pool import LocalPool
    from opdesign.tuning.simjob import run_fresh
    from opdesign.workflows.new import plan_from_spec
    from opdesign.workflows.pin import pins_from_row, plan_for_pins

    spec = load_spec(TINY)
    plan = plan_from_spec(spec, TINY)
    rows = rank_candidates(spec, plan, within_form=True).rows
    jobs = [{"kernel_text": render_kernel(plan_for_pins(spec, TINY, plan, pins_from_row(r), validate=False))}
            for r in (rows[0], rows[1])]
    pool = LocalPool(1)
    try:
        warm = pool.map(jobs)  # one worker, two candidates one after the other
    finally:
        pool.close()
    fresh = [run_fresh(j) for j in jobs]
    assert warm[0]["pid"] == warm[1]["pid"] and warm[1]["runs_in_process"] == 2
    assert [w["sim_us"] for w in warm] == [f["sim_us"] for f in fresh] and all(f["sim_us"] for f in fresh)
    assert all(not str(w["output_dir"]).startswith("outside") for w in warm)  # each SIM kept its own folder


def test_a_small_tune_runs_end_to_end(cache_dir, tmp_path):
    out = tmp_path / "tuned"
    res = run_cli("tune", "--spec", str(TINY), "--out", str(out), "--budget", "3", "--batch", "3", "--jobs", "1",
                  "--json", timeout=900)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["sim_runs"] == 3 and report["best"]["sim_us"] > 0 and report["default"]["sim_us"] > 0
    assert "[3/3]" in res.stderr and "ETA" in res.stderr
    assert (out / "dense_tiny_kernel.py").is_file() and (out / "tune" / "report.md").is_file()
