"""Plans: the models every skeleton fills (:mod:`~opdesign.plan.models`) and the shared planning
helpers the skeleton packages build them with (tiles, buffers, KV blocks, SPEC-derived fields).

The helpers are leaves: they read the SPEC and the catalog and never a skeleton package.
The models are re-exported here on first access (a module ``__getattr__``), so that importing a
helper such as :mod:`opdesign.plan.checks` (the validator does) loads no Plan or SPEC model.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Balance", "Budget", "BudgetItem", "Choice", "ConfigEntry", "CoreLoad", "CubeTile", "Decision", "Expansion",
    "ExpansionOp", "FormCheck", "LoopRow", "Module", "Plan", "Stage", "StateRow", "TensorSpec", "Unroll", "VecTile",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from opdesign.plan import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
