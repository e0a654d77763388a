"""SK-16 attention backward: dQ, dK, dV from q, k, v, o, dO and the forward l, m.

Planning and its "When" conditions: :mod:`.plan`; budgets and expansion: :mod:`.budget`;
validator rules: :mod:`.rules`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opdesign.skeletons.base import BlockTiles, Skeleton
from opdesign.skeletons.sk16.budget import budgets, expansion

if TYPE_CHECKING:
    from opdesign.plan.models import Budget, Expansion, Plan
    from opdesign.spec import Spec

ID = "SK-16"


def applies(spec: Spec) -> bool:
    """Every backward SPEC goes to SK-16 (its conditions then decide whether it can be planned)."""
    return spec.direction == "backward"


def estimate(*args: Any, **kwargs: Any) -> Plan:
    """:func:`.plan.estimate_sk16` (imported on the first call: the validator never plans)."""
    from opdesign.skeletons.sk16.plan import estimate_sk16

    return estimate_sk16(*args, **kwargs)


def numerical_notes(plan: Plan) -> list[str]:
    return [
        "P is rebuilt from the forward l/m inputs, never recomputed (SK-16-R2); S, dP, P, dS and D stay FP32",
        f"P and dS are cast to {plan.dtype} before C2 (SK-16-R9, C-API-02 equal operand dtypes)",
        "dq, dk, dv accumulate in FP32 GM tensors the host zero-initialises (SK-16-R4, C-API-05)"
        if plan.passes == 1 else "dq, dk, dv accumulate in FP32 UB and are assembled on the last step (C-API-05)",
    ]


def rederive_budgets(t: BlockTiles) -> tuple[Budget, Budget] | None:
    """S/dP and dQ/dK results, P/dS casts and the two-pass accumulators from the block's square tile."""
    if (t.device is None or t.cube is None or t.vec is None or set(t.vec) != {"V1", "V2"} or t.q_tile is None
            or t.head_dim is None or t.dtype is None):
        return None
    ub, l1, _l0 = budgets(t.device, t.q_tile, t.head_dim, t.dtype, t.cube, t.vec, t.passes)
    return ub, l1


def rederive_expansion(t: BlockTiles) -> Expansion:
    """The backward V1 / V2 op tables (the two-pass accumulate included)."""
    return expansion(t.vec, t.passes)


def static_axes(plan: Plan) -> dict[str, tuple[Any, str]]:
    """SK-16 fixes the head counts (``NUM_HEADS`` / ``NUM_KV_HEADS``)."""
    from opdesign.plan.runnable import fixed_heads

    return fixed_heads(plan)


SKELETON = Skeleton(
    static_axes=static_axes,
    id=ID, template_dir="sk16", applies=applies, plan=estimate, numerical_notes=numerical_notes,
    rule_modules=("opdesign.skeletons.sk16.rules",), rederive_budgets=rederive_budgets,
    rederive_expansion=rederive_expansion,
)
