"""Library API of the validator: parsing, headings, placeholders, suppression, skipping, robustness net."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from validate_support import FIXTURES, IFACE, make_fixtures_module

from opdesign.validate import (
    Finding,
    Report,
    all_rules,
    get_rule,
    validate_paths,
    validate_text,
)
from opdesign.validate.api import Rule
from opdesign.validate.parse.document import match_chapter, parse

BASE = FIXTURES / "_base" / "perf_en"
DESIGN = (BASE / "DESIGN.md").read_text(encoding="utf-8")
INTERFACES = (BASE / IFACE).read_text(encoding="utf-8")


def _rules(report: Report) -> list[str]:
    return [f.rule for f in report.findings]


def test_report_model_and_json_shape() -> None:
    report = validate_text(DESIGN, name="op/DESIGN.md", interfaces_text=INTERFACES)
    assert isinstance(report, Report) and report.findings == [] and report.files == ["op/DESIGN.md"]
    data = json.loads(report.model_dump_json())
    assert set(data) == {"files", "findings", "summary"}
    assert data["summary"] == {"error": 0, "warning": 0, "info": 0}
    bad = validate_text(DESIGN.replace("KV_TILE = 1024", "KV_TILE = 512"), name="op/DESIGN.md",
                        interfaces_text=INTERFACES)
    line = DESIGN.splitlines().index("KV_TILE = 1024") + 1
    assert bad.findings == [Finding(rule="OD-NUM-04", level="error", file="op/DESIGN.md", line=line,
                                    message="KV_TILE = 512, the opdesign block says kv_tile: 1024")]
    assert bad.exit_code == 1 and bad.summary.error == 1


def test_without_interfaces_text_the_interface_rules_are_reported_skipped() -> None:
    report = validate_text(DESIGN)
    assert [(f.rule, f.level, f.file) for f in report.findings] == [("OD-IF-02", "info", "DESIGN.md")]
    named = validate_text(DESIGN.replace("Decision: module_count = 1", "Decision: module_count = 3"),
                          name="x/DESIGN.md", interfaces_text=INTERFACES.replace("- id: 1", "- id: 7"))
    assert {(f.rule, f.file) for f in named.findings} >= {("OD-IF-04", "x/eval/module_interfaces.yaml"),
                                                          ("OD-DOC-08", "x/DESIGN.md")}


@pytest.mark.parametrize("text,key", [
    ("验证方案 / Verification Plan", "verification"), ("验证方案/Verification Plan", "verification"),
    ("验证方案", "verification"), ("VERIFICATION PLAN", "verification"), ("5. Verification Plan", "verification"),
    ("计算图与 API 映射", "graph"), ("compute graph and api mapping", "graph"), ("伪代码", "pseudocode"),
    ("Verification", None), ("1. 算子契约说明", None), ("Pseudocode notes", None),
])
def test_chapter_names_en_zh_case_and_numbering(text: str, key: str | None) -> None:
    assert match_chapter(text) == key


def test_heading_inside_fenced_code_is_not_a_heading() -> None:
    doc = parse("# Title\n\n```markdown\n## 算子契约\n```\n\n## Pseudocode\n")
    assert [(h.text, h.line, h.chapter) for h in doc.headings] == [("Title", 1, None), ("Pseudocode", 7, "pseudocode")]
    report = validate_text("```\n## Operator Contract\n```\n")
    assert "missing chapter 'Operator Contract' (算子契约)" in [f.message for f in report.findings]


def test_placeholders_only_in_prose() -> None:
    text = DESIGN.replace(
        "- Open question:",
        "- keep `{-1: 2}`, `[M, N]` and `<T>` in code spans; <br> is HTML; FAI L1TileShape <128,128,128>\n"
        "- but <tile rows> and {rows} and TBD are slots\n- Open question:")
    text = text.replace("import pypto\n", 'import pypto  # TODO in code is fine\nOPTS = {"a": 1}  # <b>\n')
    report = validate_text(text, interfaces_text=INTERFACES)
    hits = [(f.line, f.message) for f in report.findings if f.rule == "OD-DOC-05"]
    line = text.splitlines().index("- but <tile rows> and {rows} and TBD are slots") + 1
    assert hits == [(line, "placeholder TBD, <tile rows>, {rows} left in the document")]


def _c_tile_04_text() -> str:
    entry = next(m for m in make_fixtures_module().load_mutations() if m["rule"] == "C-TILE-04")
    design, _iface, _line = make_fixtures_module().mutate(entry)
    return design


def test_disable_comment_suppresses_a_warning_and_says_so() -> None:
    text = _c_tile_04_text()
    assert "C-TILE-04" in _rules(validate_text(text, interfaces_text=INTERFACES))
    marked = text.replace("## Risks and Open Questions\n", "## Risks and Open Questions\n\n"
                                                           "<!-- opdesign: disable=C-TILE-04, OD-NUM-05 -->\n")
    report = validate_text(marked, interfaces_text=INTERFACES)
    assert "C-TILE-04" not in _rules(report) and "OD-NUM-05" not in _rules(report)
    notes = sorted(f.message for f in report.findings if f.rule == "OD-DOC-09")
    assert notes == ["C-TILE-04 suppressed for this document (1 finding(s))",
                     "OD-NUM-05 suppressed for this document (1 finding(s))"]
    assert report.exit_code == 0


def test_disable_comment_cannot_suppress_errors_or_unknown_ids() -> None:
    text = DESIGN.replace("KV_TILE = 1024", "KV_TILE = 512").replace(
        "## Risks and Open Questions\n", "## Risks and Open Questions\n<!-- opdesign: disable=OD-NUM-04,XX-99 -->\n")
    report = validate_text(text, interfaces_text=INTERFACES)
    assert "OD-NUM-04" in _rules(report) and report.exit_code == 1
    assert sorted(f.message for f in report.findings if f.rule == "OD-DOC-09") == [
        "OD-NUM-04 is error-level and cannot be suppressed: fix the design instead",
        "unknown rule id XX-99 in a disable comment"]
    in_code = DESIGN.replace("import pypto\n", "import pypto\n# <!-- opdesign: disable=C-TILE-04 -->\n")
    assert "OD-DOC-09" not in _rules(validate_text(in_code, interfaces_text=INTERFACES))


def test_handwritten_design_skips_number_rules_and_says_which() -> None:
    entry = next(m for m in make_fixtures_module().load_mutations() if m["rule"] == "OD-NUM-01")
    design, iface, _line = make_fixtures_module().mutate(entry)
    report = validate_text(design, interfaces_text=iface)
    (note,) = report.findings
    needs_block = [r.id for r in all_rules().values() if r.needs_block]
    assert note.rule == "OD-NUM-01" and note.level == "info" and all(i in note.message for i in needs_block)
    broken = validate_text(design.replace("KV_TILE = 1024", "KV_TILE = 512"), interfaces_text=iface)
    assert "OD-NUM-04" not in _rules(broken)  # skipped, and said so above, never silently passed


def test_a_crashing_check_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = get_rule("C-TILE-02")

    def boom(ctx):
        raise ZeroDivisionError("synthetic")

    monkeypatch.setitem(all_rules(), "C-TILE-02", Rule(**{**rule.__dict__, "check": boom}))
    report = validate_text(DESIGN, interfaces_text=INTERFACES)
    assert [(f.rule, f.level, f.message) for f in report.findings] == [
        ("OD-DOC-10", "error", "C-TILE-02 could not be evaluated: ZeroDivisionError: synthetic")]
    assert report.exit_code == 1


def test_paths_folder_file_missing_and_folder_without_design(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = validate_paths([BASE, BASE / "DESIGN.md", tmp_path / "nothing.md", tmp_path / "empty"])
    assert report.files == [str(BASE / "DESIGN.md"), str(tmp_path / "nothing.md"),  # the folder's DESIGN.md once
                            str(tmp_path / "empty" / "DESIGN.md")]
    assert [(f.file, f.message) for f in report.findings] == sorted([
        (str(tmp_path / "empty" / "DESIGN.md"), "input unusable: no such file"),
        (str(tmp_path / "nothing.md"), "input unusable: no such file")])
    assert report.exit_code == 2


def test_every_rule_is_documented() -> None:
    for rule in all_rules().values():
        assert rule.level in ("error", "warning", "info") and rule.explanation and rule.bad and rule.good, rule.id
        assert rule.source and rule.message


def test_validate_path_does_not_import_numpy() -> None:
    code = ("import sys; from opdesign.workflows.validate import validate_paths; "
            f"r = validate_paths([{str(BASE)!r}]); assert not r.findings; print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_validate_path_does_not_import_jinja2() -> None:
    code = ("import sys; from opdesign.workflows.validate import validate_paths; "
            f"validate_paths([{str(BASE)!r}]); print('jinja2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_design_check_table_found_by_its_sub_heading() -> None:
    text = DESIGN.replace("| check | result | basis |", "| item | result | basis |")
    assert validate_text(text, interfaces_text=INTERFACES).findings == []
    no_basis = text.replace("| C-TILE-03 UB budget | pass | 182528 B <= 196608 B |",
                            "| C-TILE-03 UB budget | pass | - |")
    line = no_basis.splitlines().index("| C-TILE-03 UB budget | pass | - |") + 1
    found = validate_text(no_basis, interfaces_text=INTERFACES).findings
    assert [(f.rule, f.line) for f in found] == [("OD-DOC-07", line)]
