"""Plans: the models every skeleton fills (:mod:`~opdesign.plan.models`) and the shared planning
helpers the skeleton packages build them with (tiles, buffers, KV blocks, SPEC-derived fields).

The helpers are leaves: they read the SPEC and the catalog and never a skeleton package.
"""

from opdesign.plan.models import (
    Balance,
    Budget,
    BudgetItem,
    Choice,
    ConfigEntry,
    CoreLoad,
    CubeTile,
    Decision,
    Expansion,
    ExpansionOp,
    FormCheck,
    LoopRow,
    Module,
    Plan,
    Stage,
    StateRow,
    TensorSpec,
    Unroll,
    VecTile,
)

__all__ = [
    "Balance", "Budget", "BudgetItem", "Choice", "ConfigEntry", "CoreLoad", "CubeTile", "Decision", "Expansion",
    "ExpansionOp", "FormCheck", "LoopRow", "Module", "Plan", "Stage", "StateRow", "TensorSpec", "Unroll", "VecTile",
]
