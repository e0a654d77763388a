"""Per-rule cases in the sqlfluff style: ``tests/fixtures/<common|sk01|sk02|sk16>/rules/<RULE-ID>.yaml``.

Each file holds ``rule`` and ``cases``: ``{name, kind, snippet, expect}`` (optional ``interfaces``: the
whole interface text, ``null`` for none given). ``expect`` lists ``{rule, line}`` of the findings of the
file's rule (and of any rule it names); ``line`` is the line within the snippet, or ``design:N`` /
``interfaces:N`` outside it (tests/rule_harness.py builds the document around the snippet).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rule_harness import INTERFACES, run

from opdesign.validate import all_rules

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted(ROOT.glob("*/rules/*.yaml"))
SKELETON_FOLDERS = {"sk01": ("SK-01-", "AT-17-", "OD-NUM-06"), "sk02": ("SK-02-",), "sk16": ("SK-16-",)}


def _cases() -> list[tuple[str, str, dict]]:
    out = []
    for path in FILES:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in data["cases"]:
            out.append((data["rule"], f"{path.stem}:{case['name']}", case))
    return out


CASES = _cases()


def test_every_rule_has_a_case_file_with_a_fail_and_a_pass() -> None:
    by_rule: dict[str, list[dict]] = {}
    for rule_id, _name, case in CASES:
        by_rule.setdefault(rule_id, []).append(case)
    assert sorted(by_rule) == sorted(all_rules())
    for rule_id, cases in by_rule.items():
        assert any(c["expect"] for c in cases), f"{rule_id}: no failing case"
        assert any(not c["expect"] for c in cases), f"{rule_id}: no passing case"


def test_case_files_sit_in_their_skeleton_folder() -> None:
    for path in FILES:
        folder, rule_id = path.parent.parent.name, path.stem
        want = next((k for k, prefixes in SKELETON_FOLDERS.items() if rule_id.startswith(prefixes)), "common")
        assert folder == want, path
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["rule"] == rule_id


@pytest.mark.parametrize("rule_id,name,case", CASES, ids=[n for _r, n, _c in CASES])
def test_rule_case(rule_id: str, name: str, case: dict) -> None:
    rule = all_rules()[rule_id]
    found = run(case["kind"], case["snippet"], rule.needs_block, case.get("interfaces", INTERFACES))
    wanted = {rule_id} | {e["rule"] for e in case["expect"]}
    got = sorted((r, str(w)) for r, w in found if r in wanted)
    assert got == sorted((e["rule"], str(e["line"])) for e in case["expect"]), found
