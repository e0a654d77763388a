"""The SIM facts the cost model takes as measured: V1's placement and the copy figures.

Both checks read data committed from real PyPTO 0.2.0 SIM runs (benchmarks/data/), so they run without
the pypto extra; ``benchmarks/bench_sim_scan.py`` and ``scripts/measure_sim_transfers.py`` produce it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from opdesign.costmodel.calibration import load_params
from opdesign.costmodel.stages import v1_on_aic

REPO = Path(__file__).resolve().parents[1]
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
    spec = importlib.util.spec_from_file_location("measure_sim_transfers", REPO / "scripts" / "measure_sim_transfers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transfer_fit_reproduces_the_committed_calibration():
    measured = json.loads((DATA / "sim_transfers.json").read_text(encoding="utf-8"))
    fit = {side: _measure().theil_sen({tuple(p) for p in pts}) for side, pts in measured["points"].items()}
    assert fit == {"load": (1405.4, 95.67), "store": (304.2, 76.06)}
    params = load_params()
    assert (params.load_head_cycles, params.load_bytes_per_cycle) == fit["load"]
    assert (params.store_head_cycles, params.store_bytes_per_cycle) == fit["store"]


def test_theil_sen_ignores_one_stray_point():
    points = {(64, 1406), (8192, 1491), (32768, 1748), (65536, 2090), (131072, 2090)}  # the last: a capped copy
    head, rate = _measure().theil_sen(points)
    assert 1395 <= head <= 1410 and 90 <= rate <= 100
    assert _measure().theil_sen({(64, 10)}) is None
