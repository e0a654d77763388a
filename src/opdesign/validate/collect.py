"""All validator rules: the shared rule modules of :mod:`opdesign.validate` plus each registered
skeleton's ``rule_modules``, imported once by name (so no rule module imports this one back).
"""

from __future__ import annotations

import importlib
from functools import cache

from opdesign.skeletons.registry import SKELETONS
from opdesign.validate.registry import Rule, registered

#: The shared rule modules (document, interfaces, numbers, budgets, pseudocode).
RULE_MODULES = tuple(f"opdesign.validate.{name}" for name in (
    "rules_document", "rules_interfaces", "rules_numbers", "rules_budget", "rules_ub", "rules_pseudocode", "rules_api",
    "rules_code", "rules_artifacts"))


@cache
def all_rules() -> dict[str, Rule]:
    """Every rule by id, in family order then id (imports the rule modules once)."""
    for name in RULE_MODULES + tuple(m for s in SKELETONS for m in s.rule_modules):
        importlib.import_module(name)
    return registered()


def get_rule(rule_id: str) -> Rule | None:
    return all_rules().get(rule_id.strip().upper())
