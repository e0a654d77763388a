"""Malformed opdesign blocks and interface entries give findings, never a crashed rule (OD-DOC-10)."""

from __future__ import annotations

from validate_support import FIXTURES, IFACE

from opdesign.validate import validate_text

SK02 = FIXTURES / "_base" / "sk02_en"


def _run(design: str, iface: str | None = None):
    return validate_text(design, interfaces_text=iface if iface is not None else (SK02 / IFACE).read_text())


def _base() -> str:
    return (SK02 / "DESIGN.md").read_text()


def test_a_block_without_c2_is_a_finding_not_a_crash():
    text = _base()
    start = text.index("    C2:\n")
    end = text.index("  vec_tiles:\n")
    report = _run(text[:start] + text[end:])
    rules = {f.rule for f in report.findings}
    assert "OD-DOC-10" not in rules, report.findings
    assert any(f.rule == "OD-NUM-02" and "has no C2" in f.message for f in report.findings)


def test_a_list_dtype_is_a_finding_not_a_crash():
    text = _base().replace("      dtype: fp32\n      view: [8, 2048]", "      dtype: [1, 2]\n      view: [8, 2048]", 1)
    assert "dtype: [1, 2]" in text
    report = _run(text)
    assert "OD-DOC-10" not in {f.rule for f in report.findings}, report.findings


def test_a_mapping_module_id_is_a_finding_not_a_crash():
    iface = (SK02 / IFACE).read_text()
    first = next(line for line in iface.splitlines() if line.lstrip().startswith("- id:"))
    report = _run(_base(), iface.replace(first, first.split("id:")[0] + "id: {}", 1))
    assert "OD-DOC-10" not in {f.rule for f in report.findings}, report.findings
    assert report.findings
