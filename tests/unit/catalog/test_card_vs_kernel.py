"""Where a card and real kernels disagree, the finding is a warning (registry.Hit.level); where the
design says the card's case applies, it stays an error. The cases are the per-rule files' own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rule_harness import build

from opdesign.validate import validate_text

ROOT = Path(__file__).resolve().parents[2] / "fixtures"


def _case(path: str, name: str) -> dict:
    data = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    return next(c for c in data["cases"] if c["name"] == name)


def _levels(rule: str, case: dict) -> list[tuple[int | str, str]]:
    built = build(case["kind"], case["snippet"])
    report = validate_text(built.design, "DESIGN.md", built.interfaces, "eval/module_interfaces.yaml")
    return sorted((built.where("design", f.line), f.level) for f in report.findings if f.rule == rule)


@pytest.mark.parametrize("path,name,rule,want", [
    ("common/rules/OD-PC-03.yaml", "mixed_scope_on_950_warns", "OD-PC-03", [(4, "warning")]),
    ("common/rules/OD-PC-03.yaml", "fails", "OD-PC-03", [(1, "error"), (3, "warning")]),
    ("sk01/rules/AT-17-R4.yaml", "top_k_rows_warn", "AT-17-R4", [(4, "warning")]),
    ("sk01/rules/AT-17-R4.yaml", "fails", "AT-17-R4", [(2, "error")]),
    ("sk01/rules/SK-01-R1.yaml", "fails", "SK-01-R1", [(5, "warning")]),
    ("sk01/rules/SK-01-R1.yaml", "c2_on_the_c1_tile_fails", "SK-01-R1", [(6, "error")]),
    ("sk01/rules/SK-01-R1.yaml", "no_tile_shape_at_all_fails", "SK-01-R1", [(1, "error"), (2, "error")]),
    ("common/rules/OD-PC-04.yaml", "never_set_warns", "OD-PC-04", [(3, "warning")]),
    ("common/rules/OD-PC-04.yaml", "fails", "OD-PC-04", [(4, "error")]),
    ("sk16/rules/SK-16-R4.yaml", "kernel_without_host_code_warns", "SK-16-R4", [(4, "warning")]),
    ("sk16/rules/SK-16-R4.yaml", "fails", "SK-16-R4", [(4, "error")]),
])
def test_finding_level(path: str, name: str, rule: str, want: list) -> None:
    assert _levels(rule, _case(path, name)) == want
