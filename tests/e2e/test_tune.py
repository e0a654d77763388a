"""`opdesign tune`, the SIM cache and the SIM pools with the fake SIM runner (issue 32 deliver 3-6).

``OPDESIGN_SIM_RUNNER=fake`` runs :func:`opdesign.tuning.simjob.run_fake`: deterministic figures from the
kernel's tiles and text, no PyPTO. Real SIM runs are in test_tune_pypto.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, run_cli

from opdesign.spec import load_spec
from opdesign.tuning import rank_candidates, simjob
from opdesign.tuning.pool import FreshPool, LocalPool
from opdesign.tuning.simcache import SimCache, sim_key
from opdesign.workflows.new import plan_from_spec
from opdesign.workflows.tune import Journal, choose_batch, tune

TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"
SK16 = REPO / "examples" / "specs" / "sk16_backward_lm.yaml"
ENV = {"pypto": "0.2.0", "torch": "2.8.0", "platform": "x86_64/Ascend910B1/abc"}


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("OPDESIGN_SIM_RUNNER", "fake")
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPDESIGN_FAKE_SIM_SECONDS", raising=False)
    return tmp_path


def _kernel(rank: int = 1) -> str:
    from opdesign.render.design import render_kernel
    from opdesign.workflows.pin import pins_from_row, plan_for_pins

    spec = load_spec(TINY)
    plan = plan_from_spec(spec, TINY)
    row = rank_candidates(spec, plan, within_form=True).rows[rank - 1]
    return render_kernel(plan_for_pins(spec, TINY, plan, pins_from_row(row), validate=False))


# --- the SIM cache ---------------------------------------------------------------------------------------

def test_cache_key_names_kernel_shape_quick_versions_and_platform():
    shape = {"batch": 1, "seq_q": 256}
    base = sim_key("k", shape, False, ENV)
    assert base == sim_key("k", dict(reversed(list(shape.items()))), False, ENV)  # key order does not matter
    others = {sim_key("k2", shape, False, ENV), sim_key("k", {**shape, "seq_q": 128}, False, ENV),
              sim_key("k", shape, True, ENV), sim_key("k", shape, False, {**ENV, "pypto": "0.2.1"}),
              sim_key("k", shape, False, {**ENV, "torch": "2.9.0"}),
              sim_key("k", shape, False, {**ENV, "platform": "aarch64/Ascend910B1/abc"})}
    assert base not in others and len(others) == 6


def test_cache_keeps_results_not_failures_and_stays_within_its_limit(tmp_path):
    cache = SimCache(tmp_path / "sim", limit_bytes=10**9)
    cache.put("aa" * 32, {"sim_us": 12.5, "seconds": 3.0})
    cache.put("bb" * 32, {"sim_us": None, "sim_error": "timeout"})
    assert cache.get("aa" * 32)["sim_us"] == 12.5 and cache.get("bb" * 32) is None
    small = SimCache(tmp_path / "sim", limit_bytes=1)  # every entry is over the limit: pruned to nothing
    small.put("cc" * 32, {"sim_us": 1.0})
    assert small.entries() == []


def test_cache_location_follows_opdesign_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("OPDESIGN_SIM_CACHE_MB", "0.5")
    cache = SimCache()
    assert cache.root == tmp_path / "c" / "sim" and cache.limit_bytes == 2**19


def test_a_second_rank_sim_is_served_from_the_cache(tmp_path):
    from opdesign.workflows.sim_rank import sim_rank

    spec = load_spec(TINY)
    plan = plan_from_spec(spec, TINY)
    ranking = rank_candidates(spec, plan)
    calls = []

    def runner(kernel, shape, *, timeout, python):
        calls.append(kernel)
        return {"sim_us": 10.0 + len(calls), "seconds": 1.0, "sim_error": None}

    cache = SimCache(tmp_path / "sim")
    first = sim_rank(spec, TINY, plan, ranking, 2, cache=cache, runner=runner)
    n = len(calls)
    assert n >= 3 and first["sim"]["cache"]["misses"] == n
    second = sim_rank(spec, TINY, plan, ranking, 2, cache=SimCache(tmp_path / "sim"), runner=runner)
    assert len(calls) == n  # nothing simulated again
    assert second["sim"]["cache"]["hits"] == n and second["sim"]["cache"]["misses"] == 0
    assert [r["sim_us"] for r in second["rows"]] == [r["sim_us"] for r in first["rows"]]


# --- pools ------------------------------------------------------------------------------------------------

def test_fake_runner_is_deterministic_and_names_its_shape():
    text = _kernel(1)
    a, b = simjob.run_fake({"kernel_text": text}), simjob.run_fake({"kernel_text": text})
    assert a["sim_us"] == b["sim_us"] > 20 and a["shape"]["seq_q"] == 256
    assert simjob.run_fake({"kernel_text": _kernel(2)})["sim_us"] != a["sim_us"]


def test_a_crashing_candidate_does_not_take_the_pool_down(fake):
    jobs = [{"kernel_text": _kernel(r), "label": str(r)} for r in (1, 2, 3)]
    jobs[1]["fake_crash"] = True
    pool = LocalPool(2)
    try:
        got = pool.map(jobs)
        again = pool.map([jobs[0]])  # the pool still takes work
    finally:
        pool.close()
    assert got[0]["sim_us"] == simjob.run_fake(jobs[0])["sim_us"] and got[2]["sim_us"] is not None
    assert got[1]["sim_us"] is None and "worker died" in got[1]["sim_error"]
    assert again[0]["sim_us"] == got[0]["sim_us"] and pool.restarts >= 1


def test_a_hung_candidate_times_out_and_the_pool_goes_on(fake, monkeypatch):
    monkeypatch.setenv("OPDESIGN_FAKE_SIM_SECONDS", "30")
    pool = LocalPool(1)
    try:
        (hung,) = pool.map([{"kernel_text": _kernel(1), "timeout": 2}])
        monkeypatch.setenv("OPDESIGN_FAKE_SIM_SECONDS", "0")  # new workers read it when they start
        (after,) = pool.map([{"kernel_text": _kernel(1)}])
    finally:
        pool.close()
    assert hung["sim_us"] is None and hung["sim_error"].startswith("timeout") and hung["failure"] == "timeout"
    assert after["sim_us"] == simjob.run_fake({"kernel_text": _kernel(1)})["sim_us"]


def test_workers_are_recycled_after_n_runs(fake):
    jobs = [{"kernel_text": _kernel(1)} for _ in range(4)]
    pool = LocalPool(1, recycle=2)
    try:
        pids = [r["pid"] for r in pool.map(jobs)]
    finally:
        pool.close()
    assert len(set(pids)) == 2, pids  # 2 jobs per worker process


# --- the loop ---------------------------------------------------------------------------------------------

def test_batch_choice_does_not_depend_on_completion_order():
    spec = load_spec(TINY)
    plan = plan_from_spec(spec, TINY)
    rows = [r.model_dump(mode="json") for r in rank_candidates(spec, plan, within_form=True).rows]
    measured = [{**rows[i], "sim_us": s} for i, s in ((0, 30.0), (5, 30.0), (9, 20.0))]
    from opdesign.tuning.model.calibration import row_key

    keys = {json.dumps(row_key(m)) for m in measured}
    a, knob_a = choose_batch(rows, keys, 4, measured)
    b, knob_b = choose_batch(rows, keys, 4, list(reversed(measured)))
    assert [r["rank"] for r in a] == [r["rank"] for r in b] and knob_a == knob_b
    assert len(a) == 4 and not {json.dumps(row_key(r)) for r in a} & keys
    assert a[0]["rank"] == 2  # the best unmeasured row leads


def test_tune_writes_a_design_and_its_reports(fake):
    out = fake / "out"
    report = tune(TINY, budget=6, batch=3, out=out, pool=FreshPool())
    journal = Journal(out / "tune" / "journal.jsonl").read()
    runs = [r for r in journal if r["kind"] == "run"]
    assert report["runs"] == len(runs) == 6 and report["sim_runs"] == 6
    assert len({r["row_key"] for r in runs}) == 6  # no row twice
    best = min(r["result"]["sim_us"] for r in runs)
    assert report["best"]["sim_us"] == best and report["default"]["rank"] == runs[0]["rank"]
    assert report["speedup"] == round(report["default"]["sim_us"] / best, 3)
    assert (out / "dense_tiny_kernel.py").is_file() and (out / "DESIGN.md").is_file()
    md = (out / "tune" / "report.md").read_text()
    assert "## Round 1" in md and "(the default plan)" in md and "task_overhead_cycles" in md
    assert json.loads((out / "tune" / "report.json").read_text())["best"]["sim_us"] == best
    assert report["refit"]["note"].startswith("the refit moves task_overhead_cycles")
    import importlib.util

    assert (out / "tune" / "convergence.png").is_file() == (importlib.util.find_spec("matplotlib") is not None)


def test_a_second_tune_is_served_from_the_sim_cache(fake):
    tune(TINY, budget=4, batch=4, out=fake / "a", pool=FreshPool())
    again = tune(TINY, budget=4, batch=4, out=fake / "b", pool=FreshPool())
    assert again["sim_runs"] == 0 and again["cache_runs"] == 4


def _tune_proc(out, budget, *extra, env=None):
    return subprocess.Popen([sys.executable, "-m", "opdesign", "tune", "--spec", str(TINY), "--out", str(out),
                             "--budget", str(budget), "--batch", "2", "--jobs", "1", *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _runs(out):
    return [r for r in Journal(out / "tune" / "journal.jsonl").read() if r["kind"] == "run"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "ctrl-c"])
def test_a_killed_tune_resumes_without_simulating_a_row_again(fake, sig):
    out = fake / "out"
    env = dict(os.environ, OPDESIGN_FAKE_SIM_SECONDS="0.7", OPDESIGN_SIM_CACHE_MB="0")  # no cache: the journal alone
    proc = _tune_proc(out, 8, env=env)
    deadline = time.time() + 60
    while time.time() < deadline and len(_runs(out)) < 3:
        time.sleep(0.1)
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)  # the tune and its pool workers (its own session)
    else:
        os.kill(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=60)
    if sig == signal.SIGINT:
        assert code == 130
        os.killpg(proc.pid, signal.SIGKILL) if _alive_group(proc.pid) else None
    before = _runs(out)
    assert 3 <= len(before) < 8
    proc2 = _tune_proc(out, 8, "--resume", env=dict(env, OPDESIGN_FAKE_SIM_SECONDS="0"))
    _, err = proc2.communicate(timeout=120)
    assert proc2.returncode == 0, err
    after = _runs(out)
    assert after[:len(before)] == before
    simulated_again = {r["kernel_sha256"] for r in after[len(before):]} & {r["kernel_sha256"] for r in before}
    assert simulated_again == set() and len({r["row_key"] for r in after}) == len(after)
    assert f"resume: {len(before)} SIM runs in the journal are not run again" in err
    whole = tune(TINY, budget=8, batch=2, out=fake / "whole", pool=FreshPool(), cache=SimCache(fake / "nocache", 0))
    assert [r["row_key"] for r in after] == [r["row_key"] for r in _runs(fake / "whole")]  # as if never killed
    assert whole["best"]["sim_us"] == min(r["result"]["sim_us"] for r in after)


def _alive_group(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_resume_refuses_a_journal_of_another_spec(fake):
    spec = fake / "tiny.yaml"
    spec.write_text(TINY.read_text())
    out = fake / "out"
    tune(spec, budget=2, batch=2, out=out, pool=FreshPool())
    spec.write_text(TINY.read_text() + "# changed\n")
    res = run_cli("tune", "--spec", str(spec), "--out", str(out), "--resume", "--jobs", "1")
    assert res.returncode == 2 and "the SPEC changed since the journal's run" in res.stderr
    res = run_cli("tune", "--spec", str(spec), "--out", str(out), "--jobs", "1")
    assert res.returncode == 2 and "give --resume" in res.stderr


def test_a_spec_whose_skeleton_is_not_ranked_exits_2():
    res = run_cli("tune", "--spec", str(SK16), "--dry-run")
    assert res.returncode == 2 and "SK-16, which is not ranked" in res.stderr


def test_dry_run_prints_the_plan_and_an_estimate():
    res = run_cli("tune", "--spec", str(TINY), "--dry-run", "--budget", "6", "--json")
    plan = json.loads(res.stdout)
    assert res.returncode == 0 and plan["config"] == "perf_tiny" and plan["budget"] == 6
    assert plan["tile_pairs_default"] == 4 and plan["estimate_seconds"] == round(4 * 10 / 48, 1) * 6
    res = run_cli("tune", "--spec", str(TINY), "--dry-run", "--config", "nope")
    assert res.returncode == 2 and "--config: 'nope'" in res.stderr
