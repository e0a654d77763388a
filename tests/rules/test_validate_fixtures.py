"""Per-rule fixtures (tests/fixtures/validate/<RULE-ID>/): each rule has a failing case at a known line.

The passing case of every rule is the base design it mutates
(``_base/<name>``), which must produce no finding at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from validate_support import FIXTURES, IFACE, errors_except, run_case

from opdesign.validate import all_rules, get_rule, validate_paths

RULE_DIRS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and get_rule(p.name) is not None)
# Rules without an input that triggers them, and where they are tested instead.
ENGINE_ONLY = {"OD-DOC-10": "test_validate_api.py::test_a_crashing_check_is_reported_not_raised",
               # the bases are frozen card-notation designs; the API rule's cases are per-rule case files
               "OD-PC-05": "tests/fixtures/common/rules/OD-PC-05.yaml",
               # the code rules (kernel .py and pseudocode): per-rule case files and the kernel mutation test
               **{f"OD-KN-0{n}": f"tests/fixtures/common/rules/OD-KN-0{n}.yaml, tests/unit/validate/test_kernel_lint.py"
                  for n in range(1, 9)},
               # the online-softmax rescale (issue 33): its case file, kernel mutations and generated kernels
               "AT-01-R3": "tests/fixtures/common/rules/AT-01-R3.yaml, tests/unit/validate/test_kernel_lint.py"}


def test_every_rule_has_a_failing_fixture() -> None:
    missing = set(all_rules()) - {p.name for p in RULE_DIRS}
    assert missing == set(ENGINE_ONLY)


@pytest.mark.parametrize("base", sorted(p.name for p in (FIXTURES / "_base").iterdir()))
def test_base_designs_pass_clean(base: str) -> None:
    report = validate_paths([FIXTURES / "_base" / base])
    assert report.findings == [] and report.exit_code == 0


@pytest.mark.parametrize("folder", RULE_DIRS, ids=[p.name for p in RULE_DIRS])
def test_rule_fixture(folder: Path, tmp_path: Path) -> None:
    expect = yaml.safe_load((folder / "expect.yaml").read_text(encoding="utf-8"))
    assert expect["rule"] == folder.name
    base = FIXTURES / "_base" / expect["base"]
    design = (folder / "bad.md") if (folder / "bad.md").exists() else base / "DESIGN.md"
    iface = (folder / "bad_interfaces.yaml") if (folder / "bad_interfaces.yaml").exists() else base / IFACE
    iface_text = None if expect.get("drop_interfaces") else iface.read_text(encoding="utf-8")
    report = run_case(design.read_bytes(), iface_text, tmp_path, expect.get("mode", "paths"))
    suffix = "module_interfaces.yaml" if expect["file"] == "interfaces" else "DESIGN.md"
    hits = [f for f in report.findings if f.rule == expect["rule"] and f.file.endswith(suffix)]
    assert expect["line"] in [f.line for f in hits], report.findings
    # the finding at the mutated line has the rule's level (a rule may report a known card-vs-kernel
    # disagreement elsewhere as a warning, registry.Hit.level)
    assert all(f.level == get_rule(expect["rule"]).level for f in hits if f.line == expect["line"])
    if expect["only"]:
        assert errors_except(report, expect["rule"]) == []
    good = validate_paths([base])
    assert expect["rule"] not in {f.rule for f in good.findings}


def test_unusable_fixture_exits_2(tmp_path: Path) -> None:
    report = run_case((FIXTURES / "OD-DOC-01" / "bad.md").read_bytes(), None, tmp_path)
    assert report.exit_code == 2
    assert [f.message for f in report.findings] == ["input unusable: not UTF-8 (invalid byte at offset 34)"]
