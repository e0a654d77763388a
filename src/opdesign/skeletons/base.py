"""What a skeleton package provides to the core: one :class:`Skeleton` object per package.

The core (pipeline, render, validate, agent, cli) reads these attributes and never compares
skeleton ids: the template folder, whether the cost model ranks the plans, the numerical notes of
the interface file, the validator rule modules, and the budgets the validator re-derives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opdesign.plan.core import BlockTiles  # the validator builds it; re-exported for the registrations

if TYPE_CHECKING:  # the validator imports the registrations: no SPEC, Plan or catalog models at run time
    from opdesign.plan.models import Budget, Expansion, FormCheck, Plan, Text
    from opdesign.spec import Spec

GoldenCount = tuple[int, str] | None


@dataclass(frozen=True)
class Rejected:
    """A skeleton's applicability conditions failed (``checks`` holds them all, the failed ones with
    ``passed=False``); the registry hands the SPEC to the fallback skeleton."""

    checks: list[FormCheck]



@dataclass(frozen=True)
class Skeleton:
    """A registered skeleton.

    Attributes:
        id: the card id (``SK-01``).
        template_dir: folder under ``templates/`` with its DESIGN sections, pseudocode and scaffold.
        applies: whether a SPEC belongs to this skeleton (before its own conditions are checked).
        plan: SPEC (+ golden module count, + Plan overrides of a fallback) -> Plan, or
            :class:`Rejected` when its conditions fail. A package's ``plan`` imports its planner on
            the first call, so that registering the skeleton (the validator reads every one) loads none.
        numerical_notes: the ``numerical_notes`` of ``eval/module_interfaces.yaml`` for a plan.
        rule_modules: module names of its validator rules (imported by the rule collection).
        rederive_budgets: (UB, L1) re-derived from a block, or None when the block lacks a figure.
        rederive_expansion: the C-TILE-04 estimate re-derived from a block with valid V1/V2 tiles,
            ``q_tile``, ``kv_tile`` and ``head_dim``.
        ranked: the cost model (:mod:`opdesign.tuning`) ranks its plans.
        cube_in_vector_scope: its pseudocode keeps matmuls inside one ``sg_set_scope`` (AT-21 exception).
        static_axes: plan -> {axis (or ``group``): (value, kernel constant)} its kernel fixes at compile
            time (:mod:`opdesign.plan.runnable`: a typical config must keep them).
        static_kv_loop: in the performance form its kernel's ``qi`` / ``kj`` loops are static and run
            ``task_count * q_tiles / root_count`` KV steps per (batch, head) (the validator counts them).
    """

    id: str
    template_dir: str
    applies: Callable[[Spec], bool]
    plan: Callable[..., Plan | Rejected]
    numerical_notes: Callable[[Plan], list[Text]]
    rule_modules: tuple[str, ...]
    rederive_budgets: Callable[[BlockTiles], tuple[Budget, Budget] | None]
    rederive_expansion: Callable[[BlockTiles], Expansion]
    ranked: bool = False
    cube_in_vector_scope: bool = False
    static_axes: Callable[[Plan], dict[str, tuple[Any, str]]] | None = None
    static_kv_loop: bool = False
