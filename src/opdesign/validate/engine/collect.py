"""All validator rules: the shared rule modules of :mod:`opdesign.validate` plus each registered
handed-in skeleton's ``rule_modules``, imported once by name (so no rule module imports this one back).
"""

from __future__ import annotations

import importlib
from functools import cache

from opdesign.validate.api import Rule, registered, skeletons

#: The shared rule modules (document, interfaces, numbers, budgets, pseudocode).
RULE_MODULES = tuple(f"opdesign.validate.rules.{name}" for name in (
    "document", "interfaces", "numbers", "budget", "ub", "pseudocode", "api", "code", "softmax", "kernel_verdict",
    "artifacts"))


def all_rules() -> dict[str, Rule]:
    """Every rule by id, in family order then id (imports the rule modules once): the shared ones and
    those of the skeletons handed in (:func:`opdesign.validate.api.use_skeletons`)."""
    return _all_rules(tuple(m for s in skeletons().all for m in s.rule_modules))


@cache
def _all_rules(skeleton_modules: tuple[str, ...]) -> dict[str, Rule]:
    for name in RULE_MODULES + skeleton_modules:
        importlib.import_module(name)
    return registered()


def get_rule(rule_id: str) -> Rule | None:
    return all_rules().get(rule_id.strip().upper())
