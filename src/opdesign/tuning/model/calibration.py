"""CostParams fitted to PyPTO SIM times: ``constraints/costmodel/calibration.yaml`` (issue 11 item 3).

The file is written by ``scripts/calibrate_costmodel.py`` from a real SIM run and records its
provenance (SPECs, PyPTO release, date). :func:`load_params` gives the calibrated parameters when
the file exists and the raw :class:`CostParams` defaults otherwise (or with ``calibrated=False``:
``opdesign rank --uncalibrated``).
"""

from __future__ import annotations

from functools import cache
from itertools import product
from math import log2
from pathlib import Path

from opdesign.io.paths import data_dir
from opdesign.tuning.model.params import CostParams

CALIBRATION_FILE = ("costmodel", "calibration.yaml")


def calibration_path() -> Path:
    return data_dir("constraints").joinpath(*CALIBRATION_FILE)


@cache
def _calibrated() -> CostParams | None:
    path = calibration_path()
    if not path.is_file():
        return None
    from opdesign.io.yamlload import safe_load

    data = safe_load(path.read_text(encoding="utf-8"))
    return CostParams(**data["params"])


def load_params(calibrated: bool = True) -> CostParams:
    """The calibrated CostParams (when a calibration file is committed), else the defaults."""
    return (_calibrated() if calibrated else None) or CostParams()


#: the grid :func:`fit_params` searches: task overhead per body (cycles, geometric) x dispatch per KV step
#: (cycles: 0, then geometric) x pipeline depth (tasks in flight). ``stream_switch_cycles`` stays: the
#: generated kernel runs one stream, so no SIM time measures it.
OVERHEAD_GRID = (250.0, 500.0, 925.0, 1850.0, 3700.0, 7400.0, 14800.0)
STEP_GRID = (0.0, 92.5, 185.0, 370.0, 740.0, 1480.0)
#: depth 1 is left out: it would run a chain's KV steps one after another with nothing in flight
#: (interval = fill), the opposite of the FAI pipeline; the grid stays around KERNEL_TASK_NUM (3)
DEPTH_GRID = (2, 3, 4)
FITTED = ("task_overhead_cycles", "step_dispatch_cycles", "pipeline_depth")


def row_key(row: dict) -> tuple:
    """What identifies a candidate across rankings made with different parameters."""
    cube = row["cube_tiles"]
    return (row["q_tile"], row["kv_tile"], tuple(row["vec_tile"]), row["unroll_factor"], row["head_group"],
            row["streams"], tuple((s, ax, tuple(cube[s][ax])) for s in sorted(cube) for ax in ("m", "k", "n")))


def _distance(params: CostParams, default: CostParams) -> tuple[float, float, int]:
    """How far a grid point is from the raw parameters (octaves of overhead, step cycles, depth):
    among equally good points the fit keeps the nearest, not the first of the grid."""
    return (abs(log2(params.task_overhead_cycles / default.task_overhead_cycles)),
            abs(params.step_dispatch_cycles - default.step_dispatch_cycles),
            abs(params.pipeline_depth - default.pipeline_depth))


def fit_params(samples: list[tuple[object, object, list[dict]]], rescore, base: CostParams | None = None) -> dict:
    """Grid-fit ``task_overhead_cycles``, ``step_dispatch_cycles`` and ``pipeline_depth`` to SIM times.

    ``samples``: ``(spec, plan, rows)`` per SPEC, ``rows`` the simulated rows (``rank --sim --json``
    rows with ``sim_us``). ``rescore(spec, plan, params) -> {row_key: score_cycles}``. The objective is
    the mean Spearman rho between the re-scored rows and their SIM times over the SPECs (ties: the
    point nearest the default parameters, :func:`_distance`). ``base`` holds the figures that are not
    fitted (default: :class:`CostParams`; the SIM transfer figures when measured). Returns
    ``{"params", "spearman", "default_spearman", "table", "per_spec_default", "per_spec_fit"}`` (the last
    two: rho per SPEC, in ``samples`` order).
    """
    from opdesign.tuning.agreement import spearman

    def rhos_of(params: CostParams) -> list[float]:
        rhos = []
        for spec, plan, rows in samples:
            scores = rescore(spec, plan, params)
            done = [r for r in rows if r.get("sim_us") is not None and row_key(r) in scores]
            rho = spearman([scores[row_key(r)] for r in done], [r["sim_us"] for r in done])
            rhos.append(round(rho, 4) if rho is not None else 0.0)
        return rhos

    def mean_rho(params: CostParams) -> float:
        rhos = rhos_of(params)
        return sum(rhos) / len(rhos) if rhos else 0.0

    default = base or CostParams()
    best_params, best = default, mean_rho(default)
    table = [{**{k: getattr(default, k) for k in FITTED}, "spearman": round(best, 4)}]
    for overhead, step, depth in product(OVERHEAD_GRID, STEP_GRID, DEPTH_GRID):
        update = {"task_overhead_cycles": overhead, "step_dispatch_cycles": step, "pipeline_depth": depth}
        params = default.model_copy(update=update)
        if params == default:
            continue
        rho = mean_rho(params)
        table.append({**update, "spearman": round(rho, 4)})
        if rho > best + 1e-9 or (rho > best - 1e-9 and _distance(params, default) < _distance(best_params, default)):
            best_params, best = params, max(best, rho)
    return {"params": best_params, "spearman": round(best, 4), "default_spearman": table[0]["spearman"],
            "table": table, "per_spec_default": rhos_of(default), "per_spec_fit": rhos_of(best_params)}
