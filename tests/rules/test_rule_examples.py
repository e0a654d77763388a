"""Every rule's ``bad`` / ``good`` example (``opdesign rules ID``) run through the rule itself.

pylint-style: the bad example gives at least one finding of its rule, the good one none. The
harness (tests/rule_harness.py) wraps each snippet into the smallest document its kind describes.
"""

from __future__ import annotations

import pytest
from rule_harness import build, run_example

from opdesign.validate import all_rules, validate_text
from opdesign.validate.api import EXAMPLE_KINDS

RULES = sorted(all_rules())


def test_every_rule_has_both_examples_and_a_kind() -> None:
    for rule in all_rules().values():
        assert rule.bad.strip() and rule.good.strip() and rule.bad != rule.good, rule.id
        assert rule.example_kind in EXAMPLE_KINDS, rule.id
        assert "\n..." not in "\n" + rule.bad and "\n..." not in "\n" + rule.good, f"{rule.id}: an abbreviated example"


def test_the_minimal_document_is_clean() -> None:
    built = build()
    report = validate_text(built.design, "DESIGN.md", built.interfaces)
    assert [f.rule for f in report.findings] == ["OD-NUM-01"]  # info: no opdesign block


@pytest.mark.parametrize("rule_id", RULES)
def test_bad_example_fires(rule_id: str) -> None:
    found = run_example(all_rules()[rule_id], "bad")
    assert any(rule == rule_id for rule, _where in found), found


@pytest.mark.parametrize("rule_id", RULES)
def test_good_example_does_not_fire(rule_id: str) -> None:
    found = run_example(all_rules()[rule_id], "good")
    assert not [w for rule, w in found if rule == rule_id], found
