"""The SIM facts the cost model takes as measured: V1's placement and the copy figures.

Both checks read data committed from real PyPTO 0.2.0 SIM runs (benchmarks/data/), so they run without
the pypto extra; ``benchmarks/bench_sim_scan.py`` and ``scripts/measure_sim_transfers.py`` produce it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from opdesign.tuning.model.calibration import load_params
from opdesign.tuning.model.stages import v1_on_aic

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "benchmarks" / "data"


def _scan_rows() -> list[dict]:
    lines = (DATA / "calib_dense_s512_scan.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("sim_us")]


def test_v1_on_aic_predicts_where_sim_ran_the_softmax():
    rows = _scan_rows()
    pins = [dict(kv.split("=") for kv in r["tiles"].split(",")) for r in rows]
    c = {"vc": np.array([int(p["vec_tile"].split("x")[1]) for p in pins]),
         "n1": np.array([int(p["qk_tile"].split("x")[1]) for p in pins])}
    on_aic = [bool(r["busy"].get("AIC:VECTOR_ALU")) for r in rows]
    assert len(rows) == 43 and 0 < sum(on_aic) < len(rows)  # both placements occur in the data
    assert v1_on_aic(c).tolist() == on_aic


def _measure():
    spec = importlib.util.spec_from_file_location("measure_sim_transfers",
                                                  REPO / "scripts" / "measure_sim_transfers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transfer_fit_reproduces_the_committed_calibration():
    measured = json.loads((DATA / "sim_transfers.json").read_text(encoding="utf-8"))
    fit = {side: _measure().theil_sen({tuple(p) for p in pts}) for side, pts in measured["points"].items()}
    assert fit == {"load": (1405.3, 95.63), "store": (304.1, 76.04)}
    params = load_params()
    assert (params.load_head_cycles, params.load_bytes_per_cycle) == fit["load"]
    assert (params.store_head_cycles, params.store_bytes_per_cycle) == fit["store"]


def test_theil_sen_ignores_one_stray_point():
    points = {(64, 1406), (8192, 1491), (32768, 1748), (65536, 2090), (131072, 2090)}  # the last: a capped copy
    head, rate = _measure().theil_sen(points)
    assert 1395 <= head <= 1410 and 90 <= rate <= 100
    assert _measure().theil_sen({(64, 10)}) is None


def test_pair_merge_rate_is_the_committed_measurement():
    """PAIRMAX / PAIRSUM of two [16, 128] or [16, 256] fp32 tiles: 632-642 and 1264-1284 cycles, 0.311 an element."""
    measured = json.loads((DATA / "sim_transfers.json").read_text(encoding="utf-8"))
    points = [tuple(p) for p in measured["pair_points"]]
    assert sorted({e for e, _ in points}) == [2048, 4096]
    rate = round(float(np.median([c / e for e, c in points])), 4)
    assert rate == measured["params"]["pair_merge_cycles_per_element"] == load_params().pair_merge_cycles_per_element
    assert 0.30 < rate < 0.32


def test_units_split_over_the_profile_cores_sim_has():
    """PyPTO 0.2.0 SIM schedules a2/a3 kernels on 24 AIC (lib/configs/A2A3.ini cube_core_cnt); devices.yaml now
    takes a2/a3's 24 from the same file, so the raw and the calibrated model split over one figure, the plan's."""
    from opdesign.catalog import load_catalog
    from opdesign.skeletons.registry import estimate
    from opdesign.spec import load_spec
    from opdesign.tuning import CostParams, rank_candidates

    spec = load_spec(REPO / "benchmarks" / "specs" / "fidelity_dense_s2048.yaml")  # 2 heads x 32 q blocks of 64
    plan = estimate(spec)
    assert "cube_cores" not in load_params().model_dump()
    assert load_catalog().device(spec.device).aic_cores == load_catalog().sim_platform.aic_cores == 24

    def row(params):
        ranking = rank_candidates(spec, plan, params=params)
        return next(r for r in ranking.rows
                    if (r.q_tile, r.kv_tile, r.qk_tile, r.vec_tile) == (64, 2048, [64, 256], (16, 256)))

    raw, calibrated = row(CostParams()), row(load_params())
    assert (raw.task_count, raw.cores_busy, raw.tasks_per_core) == (64, 24, 3)   # 3, 3, 2 ... on 24
    assert (calibrated.task_count, calibrated.cores_busy, calibrated.tasks_per_core) == (64, 24, 3)
    assert plan.schedule.cores == 24


def test_merges_cost_only_kv_tiles_wider_than_the_vector_tile():
    """V1 = per-tile ops + 2 x row tiles x (cdiv(kv_tile, vec cols) - 1) merges x vr x vc x rate."""
    from opdesign.skeletons.registry import estimate
    from opdesign.spec import load_spec
    from opdesign.tuning import CostParams
    from opdesign.tuning.model.stages import stage_cycles
    from opdesign.tuning.space import context, enumerate_candidates

    spec = load_spec(REPO / "benchmarks" / "specs" / "fidelity_dense_s2048.yaml")
    ctx = context(spec, estimate(spec))
    c = enumerate_candidates(ctx)
    # near-free copies: the vector ops bound V1, so doubling the rate adds exactly the merge cycles
    fast = {"load_head_cycles": 1e-6, "load_bytes_per_cycle": 1e12, "store_head_cycles": 1e-6,
            "store_bytes_per_cycle": 1e12}
    v1 = {r: stage_cycles(ctx, c, CostParams(pair_merge_cycles_per_element=r, **fast))["V1"] for r in (0.25, 0.5)}
    rows = np.where(v1_on_aic(c), c["q"], np.ceil(c["q"] / 2))  # V1 on the AIC runs the whole q tile
    merges = 2 * np.ceil(rows / c["vr"]) * (np.ceil(c["kv"] / c["vc"]) - 1)
    extra = v1[0.5] - v1[0.25]
    assert (c["kv"] > c["vc"]).any() and (c["kv"] == c["vc"]).any()
    assert np.allclose(extra, merges * c["vr"] * c["vc"] * 0.25, atol=1e-3)
    assert (np.abs(extra[c["kv"] == c["vc"]]) < 1e-3).all()
