"""What a ranked row pins in a plan: the bridge from ``opdesign rank`` to a kernel run of that row.

A row of :class:`opdesign.tuning.Ranking` (``rows`` or ``rejected``, as the model or as its
``model_dump`` / ``rank --json`` dict) names one candidate. :func:`plan_fields` returns the plan
fields it fixes, :func:`with_cube_tiles` puts its cube TileShapes into a plan that already has
the row's ``q_tile`` / ``kv_tile`` (the kernel template renders ``set_cube_tile_shapes`` per stage
from ``Plan.cube_tiles``, so a rectangular QK or PV tile renders as it is).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from opdesign.plan.models import CubeTile, Plan

#: the plan fields a row pins, in the order :func:`plan_fields` returns them
PINNED = ("q_tile", "kv_tile", "qk_tile", "pv_tile", "streams", "head_group", "unroll_factor", "vec_tile",
          "cube_tiles")


def _get(row: Any, key: str) -> Any:
    return row[key] if isinstance(row, dict) else getattr(row, key)


def plan_fields(row: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """The plan fields a ranked (or rejected) row pins.

    Returns a dict with, in :data:`PINNED` order:

    * ``q_tile``, ``kv_tile``: Q rows / K-V columns per loop step (``Plan.q_tile`` / ``Plan.kv_tile``);
    * ``qk_tile``: ``[m, n]`` L1 tile of the QK score block S (C1 m and n);
    * ``pv_tile``: ``[m, n]`` L1 tile of the P block C2 multiplies (C2 m = Q rows, C2 k = KV columns
      of P = rows of V);
    * ``streams``: concurrent task streams per core (1 = none); ``head_group``: AT-23 chains G (1 = none);
    * ``unroll_factor`` and ``vec_tile`` (``[rows, cols]`` of the V1 TileShape);
    * ``cube_tiles``: ``{"C1" | "C2": {"m" | "k" | "n": [L0, L1]}}``, the three lists each stage's
      ``pypto.set_cube_tile_shapes(m, k, n)`` takes (pypto 0.2.0: ``List[int]`` of length 2 per axis).

    ``qk_tile`` / ``pv_tile`` are read from ``cube_tiles`` (the L1 entries), so they are the
    clipped tiles the candidate runs, whatever form the row's own ``qk_tile`` field has.
    """
    cube = {stage: {ax: [int(v) for v in tiles[ax]] for ax in ("m", "k", "n")}
            for stage, tiles in _get(row, "cube_tiles").items()}
    return {
        "q_tile": int(_get(row, "q_tile")),
        "kv_tile": int(_get(row, "kv_tile")),
        "qk_tile": [cube["C1"]["m"][1], cube["C1"]["n"][1]],
        "pv_tile": [cube["C2"]["m"][1], cube["C2"]["k"][1]],
        "streams": int(_get(row, "streams")),
        "head_group": int(_get(row, "head_group")),
        "unroll_factor": int(_get(row, "unroll_factor")),
        "vec_tile": [int(v) for v in _get(row, "vec_tile")],
        "cube_tiles": cube,
    }


def with_cube_tiles(plan: Plan, fields: dict[str, Any]) -> Plan:
    """``plan`` with the cube TileShapes of ``fields`` (from :func:`plan_fields`).

    Only the cube tiles change; the plan must already have the row's ``q_tile`` and ``kv_tile``
    (plan the SPEC with them first), else ``ValueError``. The kernel template renders the
    result's ``set_cube_tile_shapes`` per stage, rectangular tiles included. The plan's UB / L1 /
    L0 budgets and vector tiles are not re-derived: a DESIGN.md rendered from the result states
    the old budgets (``opdesign validate`` warns OD-NUM-05); the kernel does not read them.
    """
    if (plan.q_tile, plan.kv_tile) != (fields["q_tile"], fields["kv_tile"]):
        raise ValueError(f"plan tiles q_tile {plan.q_tile} kv_tile {plan.kv_tile} differ from the row's "
                         f"q_tile {fields['q_tile']} kv_tile {fields['kv_tile']}; plan the SPEC with them first")
    cube = {}
    for stage, old in plan.cube_tiles.items():
        axes = fields["cube_tiles"][stage]
        cube[stage] = CubeTile(stage=old.stage, m=tuple(axes["m"]), k=tuple(axes["k"]), n=tuple(axes["n"]),
                               operand_dtype=old.operand_dtype, reason=old.reason)  # the axes' meaning is the same
    return plan.model_copy(update={"cube_tiles": cube})
