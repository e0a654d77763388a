"""The per-SPEC refit of ``opdesign tune``: the committed calibration is the prior, every measured row refits.

:func:`opdesign.tuning.model.calibration.fit_params` grid-fits the three figures SIM times can move
(``task_overhead_cycles``, ``step_dispatch_cycles``, ``pipeline_depth``: ``calibration.FITTED``) to the
Spearman agreement between the model's scores and the SIM times of the measured rows, keeping the point
nearest the prior among equally good ones. Scoring only the measured rows (:class:`Rescorer`) keeps a grid
point a few milliseconds however large the space.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opdesign.tuning.model.calibration import FITTED, fit_params, row_key
from opdesign.tuning.model.params import CostParams

#: fewer measured rows say nothing about an order
MIN_ROWS = 3


def _arrays_of(row: dict[str, Any]) -> dict[str, int]:
    cube = row["cube_tiles"]
    return {"q": row["q_tile"], "kv": row["kv_tile"], "m0": cube["C1"]["m"][0], "m1": cube["C1"]["m"][1],
            "k10": cube["C1"]["k"][0], "k11": cube["C1"]["k"][1], "n0": cube["C1"]["n"][0], "n1": cube["C1"]["n"][1],
            "m20": cube["C2"]["m"][0], "m21": cube["C2"]["m"][1], "k20": cube["C2"]["k"][0], "k21": cube["C2"]["k"][1],
            "n20": cube["C2"]["n"][0], "n21": cube["C2"]["n"][1], "vr": row["vec_tile"][0], "vc": row["vec_tile"][1],
            "u": row["unroll_factor"], "g": row["head_group"], "s": row["streams"]}


class Rescorer:
    """``rescore(spec, plan, params) -> {row_key: score_cycles}`` for a fixed set of rows of one SPEC."""

    def __init__(self, spec: Any, plan: Any, prior: CostParams, rows: list[dict[str, Any]]) -> None:
        from opdesign.tuning.rank import _legal_space
        from opdesign.tuning.space import context

        self.ctx = context(spec, plan)
        c, load, _, _ = _legal_space(self.ctx, True)
        idx, keys = [], []
        for row in rows:
            want = _arrays_of(row)
            hit = np.flatnonzero(np.logical_and.reduce([c[k] == v for k, v in want.items() if k in c]))
            if len(hit):
                idx.append(int(hit[0]))
                keys.append(row_key(row))
        sel = np.array(idx, dtype=np.int64)
        self.c = {k: v[sel] for k, v in c.items()}
        self.load = {k: v[sel] for k, v in load.items()}
        self.keys = keys

    def __call__(self, _spec: Any, _plan: Any, params: CostParams) -> dict[tuple, int]:
        from opdesign.tuning.model.stages import score

        if not self.keys:
            return {}
        got = score(self.ctx, self.c, params, self.load)["score"]
        return {k: int(s) for k, s in zip(self.keys, got, strict=True)}


def refit(spec: Any, plan: Any, prior: CostParams, measured: list[dict[str, Any]]) -> dict[str, Any]:
    """Fit from every measured row (``{row fields..., "sim_us"}``); the prior when too few. Returns
    ``{"params", "moved": {name: [prior, fitted]}, "spearman", "prior_spearman", "rows"}``."""
    rows = [r for r in measured if r.get("sim_us") is not None]
    if len(rows) < MIN_ROWS:
        return {"params": prior, "moved": {}, "spearman": None, "prior_spearman": None, "rows": len(rows)}
    fit = fit_params([(spec, plan, rows)], Rescorer(spec, plan, prior, rows), prior)
    params = fit["params"]
    moved = {k: [getattr(prior, k), getattr(params, k)] for k in FITTED if getattr(prior, k) != getattr(params, k)}
    return {"params": params, "moved": moved, "spearman": fit["spearman"], "prior_spearman": fit["default_spearman"],
            "rows": len(rows)}
