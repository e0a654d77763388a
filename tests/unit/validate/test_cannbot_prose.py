"""Issue 33: a CANNBot design (no ``opdesign:`` block) is judged by the CANNBot contract plus content rules.

The fixture tests/fixtures/validate/cannbot_prose/ is a small vector operator written for this test, with
its decisions as prose bullets and its pseudocode as text, and the ``schema_version: "2.1"`` string of
CANNBot's earlier template.
"""

from __future__ import annotations

from pathlib import Path

from opdesign.validate import validate_paths, validate_text

FOLDER = Path(__file__).resolve().parents[2] / "fixtures" / "validate" / "cannbot_prose"


def test_a_valid_cannbot_design_in_prose_has_no_error() -> None:
    report = validate_paths([FOLDER])
    assert report.summary.error == 0, [f for f in report.findings if f.level == "error"]
    tables = sorted(f.message.split(" has no ")[1].split(" table")[0] for f in report.findings if f.rule == "OD-DOC-06")
    assert tables == ["design checks", "implementation config", "loops", "state", "tiling parameters"]
    assert {f.level for f in report.findings if f.rule == "OD-DOC-06"} == {"warning"}
    [version] = [f for f in report.findings if f.rule == "OD-DOC-03"]
    assert (version.level, version.line) == ("info", 2) and "'2.1'" in version.message
    assert {f.level for f in report.findings if f.rule == "OD-DOC-12"} == {"info"}


def test_the_table_conventions_and_a_string_version_are_errors_with_the_opdesign_block() -> None:
    text = (FOLDER / "DESIGN.md").read_text(encoding="utf-8").replace(
        "dynamic_axes: [T]\n", "dynamic_axes: [T]\nopdesign:\n  pypto: 0.2.0\n")
    findings = validate_text(text).findings
    assert {(f.rule, f.level) for f in findings if f.rule in ("OD-DOC-03", "OD-DOC-06")} == {
        ("OD-DOC-03", "error"), ("OD-DOC-06", "error")}
    assert len([f for f in findings if f.rule == "OD-DOC-06"]) == 5


def test_missing_dynamic_axes_reads_clearly() -> None:
    text = (FOLDER / "DESIGN.md").read_text(encoding="utf-8").replace("dynamic_axes: [T]\n", "dynamic_axes:\n")
    [finding] = [f for f in validate_text(text).findings if f.rule == "OD-DOC-03" and f.level == "error"]
    assert finding.line == 4
    assert finding.message.startswith("dynamic_axes is empty: list at least one dynamic axis")
    assert "None" not in finding.message
