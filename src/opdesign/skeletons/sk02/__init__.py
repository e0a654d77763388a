"""SK-02 single-pass attention: top-k sparse attention whose whole top-k row fits one pass.

Planning and its three conditions: :mod:`.plan`; UB budget and expansion: :mod:`.budget`;
validator rules: :mod:`.rules`. When a condition fails, :func:`.plan.estimate_sk02` returns
:class:`~opdesign.skeletons.base.Rejected` and the registry falls back to SK-01.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opdesign.plan.buffers import l1_budget
from opdesign.skeletons.base import BlockTiles, Rejected, Skeleton
from opdesign.skeletons.sk02.budget import single_pass_expansion, single_pass_ub_budget

if TYPE_CHECKING:
    from opdesign.plan.models import Budget, Expansion, Plan
    from opdesign.spec import Spec

ID = "SK-02"


def applies(spec: Spec) -> bool:
    """Top-k sparse attention (``mask: topk``) goes to SK-02 first."""
    return spec.mask == "topk"


def estimate(*args: Any, **kwargs: Any) -> Plan | Rejected:
    """:func:`.plan.estimate_sk02` (imported on the first call: the validator never plans)."""
    from opdesign.skeletons.sk02.plan import estimate_sk02

    return estimate_sk02(*args, **kwargs)


def numerical_notes(plan: Plan) -> list[str]:
    return [
        "single pass: scores, row max and row sum stay FP32 within one pass; no state is carried (SK-02-R3, AT-02)",
        f"P is cast to {plan.dtype} before C2 (C-API-02 equal operand dtypes)",
        "topk_indices slots past cur_seq hold -1 and are clamped to 0; tokens with cur_seq == 0 keep the zeros "
        "of the output allocation (SK-02-R6)",
    ]


def rederive_budgets(t: BlockTiles) -> tuple[Budget, Budget] | None:
    """The whole top-k row resident (SK-02-R2): UB of one pass and L1 from the block's tiles."""
    if (t.device is None or t.cube is None or t.vec is None or set(t.vec) != {"V1", "V2"} or t.q_tile is None
            or t.head_dim is None or t.kv_tile is None or t.dtype is None):
        return None
    ub = single_pass_ub_budget(t.device, q_tile=t.q_tile, s2_tile=t.kv_tile, head_dim=t.head_dim, dtype=t.dtype,
                               vec=t.vec)
    return ub, l1_budget(t.device, t.cube, t.cube_nbuffer)


def rederive_expansion(t: BlockTiles) -> Expansion:
    """The gathers, V1 and V2 of one pass."""
    return single_pass_expansion(t.q_tile, t.kv_tile, t.head_dim, t.vec, 1)


def static_axes(plan: Plan) -> dict[str, tuple[Any, str]]:
    """SK-02 fixes the head counts and, unless top-k is a dynamic axis, ``TOPK``."""
    from opdesign.plan.runnable import fixed_heads

    fixed = fixed_heads(plan)
    if plan.topk is not None and "topk" not in {a["name"] for a in plan.dynamic_axes}:
        fixed["topk"] = (plan.topk, "TOPK")
    return fixed


SKELETON = Skeleton(
    static_axes=static_axes,
    id=ID, template_dir="sk02", applies=applies, plan=estimate, numerical_notes=numerical_notes,
    rule_modules=("opdesign.skeletons.sk02.rules",), rederive_budgets=rederive_budgets,
    rederive_expansion=rederive_expansion, cube_in_vector_scope=True,
)
