"""SK-01 online flash attention: forward attention over KV tiles with an online softmax.

Planning: :mod:`.plan` (tiles, counts, the plan), :mod:`.parts` (form checks, vector tiles,
expansion, loop and state rows), :mod:`.variants` (variant row, unroll, FP8 tolerance),
:mod:`.budget` (UB). Validator rules: :mod:`.rules`, :mod:`.rules_perf`, :mod:`.rules_variants`.
"""

from __future__ import annotations

from opdesign.catalog import Card, load_catalog
from opdesign.plan.buffers import l1_budget
from opdesign.plan.models import Budget, Expansion, Phrase, Plan, text
from opdesign.skeletons.base import BlockTiles, Skeleton
from opdesign.skeletons.sk01.budget import ub_budget
from opdesign.skeletons.sk01.parts import expansion
from opdesign.skeletons.sk01.plan import estimate_sk01

ID = "SK-01"
FORMS = ("baseline", "performance")


def card() -> Card:
    """The SK-01 card (``patterns/skeletons/SK-01-online-flash-attention.md``)."""
    return load_catalog().card(ID)


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


SKELETON = Skeleton(
    id=ID, template_dir="sk01", applies=lambda spec: True, plan=estimate_sk01, numerical_notes=numerical_notes,
    rule_modules=("opdesign.skeletons.sk01.rules", "opdesign.skeletons.sk01.rules_perf",
                  "opdesign.skeletons.sk01.rules_variants", "opdesign.skeletons.sk01.rules_code"),
    rederive_budgets=rederive_budgets, rederive_expansion=rederive_expansion, ranked=True,
)
