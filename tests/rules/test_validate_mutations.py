"""Single-rule mutations of generated designs (tests/fixtures/validate/mutations.yaml).

Each mutation must yield its rule's finding at the mutated line and no
error-level finding of another rule; the stored fixture files must be what
the mutation produces today (else run tests/fixtures/validate/make_fixtures.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from validate_support import FIXTURES, errors_except, make_fixtures_module, run_case

MF = make_fixtures_module()
MUTATIONS = MF.load_mutations()
IDS = [f"{m['rule']}-{i}" for i, m in enumerate(MUTATIONS)]
REQUIRED = {  # the mutations the issue names, by (rule, what)
    ("C-TILE-02", "24 x bf16"), ("C-TILE-05", "not a multiple of L0"), ("SK-01-R6", "oi declared bf16"),
    ("SK-01-R2", "inside the KV loop"), ("SK-01-R1", "removed before C2"), ("C-LOOP-05", "[4, 2]"),
    ("C-TILE-03", "UB total above"), ("SK-01-P1", "Q_TILE 2048 != seq_q / 2"),
    ("OD-PC-03", "sg_set_scope(2) never reset"),
    ("OD-IF-06", "from a later module"), ("OD-DOC-08", "module_count 2 in the text, 1 in the interface"),
}


def test_the_required_mutations_are_listed() -> None:
    for rule, what in REQUIRED:
        assert any(m["rule"] == rule and what in m["why"] for m in MUTATIONS), (rule, what)
    assert len({m["rule"] for m in MUTATIONS}) >= 15


@pytest.mark.parametrize("entry", MUTATIONS, ids=IDS)
def test_mutation_is_reported_at_its_line(entry: dict, tmp_path: Path) -> None:
    design, iface, line = MF.mutate(entry)
    report = run_case(design.encode("utf-8"), None if entry.get("drop_interfaces") else iface, tmp_path,
                      entry.get("mode", "paths"))
    suffix = "module_interfaces.yaml" if entry.get("file") == "interfaces" else "DESIGN.md"
    lines = [f.line for f in report.findings if f.rule == entry["rule"] and f.file.endswith(suffix)]
    assert line in lines, report.findings
    if entry.get("only", True):
        assert errors_except(report, entry["rule"]) == []


@pytest.mark.parametrize("entry", [m for m in MUTATIONS if m.get("fixture", True)],
                         ids=[i for i, m in zip(IDS, MUTATIONS, strict=True) if m.get("fixture", True)])
def test_stored_fixture_is_current(entry: dict) -> None:
    design, iface, line = MF.mutate(entry)
    folder = FIXTURES / entry["rule"]
    if entry.get("design"):
        assert (folder / "bad.md").read_text(encoding="utf-8") == design
    if entry.get("interfaces"):
        assert (folder / "bad_interfaces.yaml").read_text(encoding="utf-8") == iface
    assert yaml.safe_load((folder / "expect.yaml").read_text(encoding="utf-8")) == MF.expect_of(entry, line)
