"""CostParams fitted to PyPTO SIM times: ``constraints/costmodel/calibration.yaml`` (issue 11 item 3).

The file is written by ``scripts/calibrate_costmodel.py`` from a real SIM run and records its
provenance (SPECs, PyPTO release, date). :func:`load_params` gives the calibrated parameters when
the file exists and the raw :class:`CostParams` defaults otherwise (or with ``calibrated=False``:
``opdesign rank --uncalibrated``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from opdesign.costmodel.stages import CostParams
from opdesign.paths import data_dir

CALIBRATION_FILE = ("costmodel", "calibration.yaml")


def calibration_path() -> Path:
    return data_dir("constraints").joinpath(*CALIBRATION_FILE)


@cache
def _calibrated() -> CostParams | None:
    path = calibration_path()
    if not path.is_file():
        return None
    from opdesign.yamlload import safe_load

    data = safe_load(path.read_text(encoding="utf-8"))
    return CostParams(**data["params"])


def load_params(calibrated: bool = True) -> CostParams:
    """The calibrated CostParams (when a calibration file is committed), else the defaults."""
    return (_calibrated() if calibrated else None) or CostParams()


#: the grid :func:`fit_params` searches: task overhead (cycles, geometric) x pipeline depth (tasks in flight).
#: ``stream_switch_cycles`` stays: the generated kernel runs one stream, so no SIM time measures it.
OVERHEAD_GRID = (250.0, 500.0, 925.0, 1850.0, 3700.0, 7400.0, 14800.0)
DEPTH_GRID = (1, 2, 3, 4)


def row_key(row: dict) -> tuple:
    """What identifies a candidate across rankings made with different parameters."""
    cube = row["cube_tiles"]
    return (row["q_tile"], row["kv_tile"], tuple(row["vec_tile"]), row["unroll_factor"], row["head_group"],
            row["streams"], tuple((s, ax, tuple(cube[s][ax])) for s in sorted(cube) for ax in ("m", "k", "n")))


def fit_params(samples: list[tuple[object, object, list[dict]]], rescore) -> dict:
    """Grid-fit ``task_overhead_cycles`` and ``pipeline_depth`` to SIM times.

    ``samples``: ``(spec, plan, rows)`` per SPEC, ``rows`` the simulated rows (``rank --sim --json``
    rows with ``sim_us``). ``rescore(spec, plan, params) -> {row_key: score_cycles}``. The objective is
    the mean Spearman rho between the re-scored rows and their SIM times over the SPECs (ties: the
    default parameters first, then the grid order). Returns ``{"params", "spearman", "default_spearman",
    "table"}``.
    """
    from opdesign.costmodel.agreement import spearman

    def mean_rho(params: CostParams) -> float:
        rhos = []
        for spec, plan, rows in samples:
            scores = rescore(spec, plan, params)
            done = [r for r in rows if r.get("sim_us") is not None and row_key(r) in scores]
            rho = spearman([scores[row_key(r)] for r in done], [r["sim_us"] for r in done])
            rhos.append(rho if rho is not None else 0.0)
        return sum(rhos) / len(rhos) if rhos else 0.0

    default = CostParams()
    best_params, best = default, mean_rho(default)
    table = [{"task_overhead_cycles": default.task_overhead_cycles, "pipeline_depth": default.pipeline_depth,
              "spearman": round(best, 4)}]
    for overhead in OVERHEAD_GRID:
        for depth in DEPTH_GRID:
            params = default.model_copy(update={"task_overhead_cycles": overhead, "pipeline_depth": depth})
            if params == default:
                continue
            rho = mean_rho(params)
            table.append({"task_overhead_cycles": overhead, "pipeline_depth": depth, "spearman": round(rho, 4)})
            if rho > best + 1e-9:
                best_params, best = params, rho
    return {"params": best_params, "spearman": round(best, 4), "default_spearman": table[0]["spearman"],
            "table": table}
