"""SK-01 online flash attention: forward attention over KV tiles with an online softmax.

Planning: :mod:`.plan` (tiles, counts, the plan), :mod:`.parts` (form checks, vector tiles,
loop and state rows), :mod:`.variants` (variant row, unroll, FP8 tolerance),
:mod:`.budget` (UB, expansion). Validator rules: :mod:`.rules`, :mod:`.rules_perf`, :mod:`.rules_variants`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opdesign.catalog import load_catalog
from opdesign.plan.buffers import l1_budget
from opdesign.plan.core import Phrase, text
from opdesign.skeletons.base import BlockTiles, Skeleton
from opdesign.skeletons.sk01.budget import expansion, ub_budget

if TYPE_CHECKING:
    from opdesign.catalog import Card
    from opdesign.plan.core import Budget, Expansion
    from opdesign.plan.models import Plan

ID = "SK-01"
FORMS = ("baseline", "performance")


def card() -> Card:
    """The SK-01 card (``patterns/skeletons/SK-01-online-flash-attention.md``)."""
    return load_catalog().card(ID)


def estimate(*args: Any, **kwargs: Any) -> Plan:
    """:func:`.plan.estimate_sk01` (imported on the first call: the validator never plans)."""
    from opdesign.skeletons.sk01.plan import estimate_sk01

    return estimate_sk01(*args, **kwargs)


def numerical_notes(plan: Plan) -> list[Phrase]:
    p_note = text("sk01.note.p_fp8") if plan.quant == "fp8" else text("sk01.note.p_cast", dtype=plan.dtype)
    return [text("sk01.note.fp32_state"), p_note]


def rederive_budgets(t: BlockTiles) -> tuple[Budget, Budget] | None:
    """UB (resident oi/li/mi in the baseline form) and L1 from the block's C1/C2/V1/V2 tiles."""
    if (t.device is None or t.cube is None or t.vec is None or t.q_tile is None or t.head_dim is None
            or t.form not in FORMS or set(t.cube) != {"C1", "C2"} or set(t.vec) != {"V1", "V2"}):
        return None
    ub = ub_budget(t.device, q_tile=t.q_tile, head_dim=t.head_dim, resident_state=t.form == "baseline",
                   cube=t.cube, vec=t.vec)
    return ub, l1_budget(t.device, t.cube, t.cube_nbuffer)


def rederive_expansion(t: BlockTiles) -> Expansion:
    """V1/V2 op tables of one traced body, FP8 ops included when ``quant: fp8``."""
    return expansion(t.q_tile, t.kv_tile, t.head_dim, t.vec, 1, fp8=t.quant == "fp8")


def static_axes(plan: Plan) -> dict[str, tuple[Any, str]]:
    """SK-01 fixes the GQA group (``GROUP``), and in the performance form the lengths (``SEQ_Q`` / ``SEQ_KV``)."""
    fixed: dict[str, tuple[Any, str]] = {"group": (plan.group_size, "GROUP")}
    if plan.form == "performance":
        fixed.update(seq_q=(plan.seq_q, "SEQ_Q"), seq_kv=(plan.seq_kv, "SEQ_KV"))
    return fixed


SKELETON = Skeleton(
    static_axes=static_axes, static_kv_loop=True,
    id=ID, template_dir="sk01", applies=lambda spec: True, plan=estimate, numerical_notes=numerical_notes,
    rule_modules=("opdesign.skeletons.sk01.rules", "opdesign.skeletons.sk01.rules_perf",
                  "opdesign.skeletons.sk01.rules_variants", "opdesign.skeletons.sk01.rules_code"),
    rederive_budgets=rederive_budgets, rederive_expansion=rederive_expansion, ranked=True,
)
