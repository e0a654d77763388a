"""The validator's per-process memo (issue 15, bulk validate): the same bytes under another path give
the findings a fresh run gives, filed under that path; other bytes are another entry."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import EXAMPLES

from opdesign.validate import validate_paths, validate_text
from opdesign.validate.engine import memo
from opdesign.workflows.new import new_design


def _rows(report) -> list[tuple[str, str, str, str, int]]:
    return [(f.rule, f.level, f.message, f.file, f.line) for f in report.findings]


def test_a_copy_is_reported_under_its_own_paths_as_a_fresh_run_reports_it(tmp_path: Path) -> None:
    first = tmp_path / "a" / "op"
    new_design(EXAMPLES / "causal_gqa_tail.yaml", first)
    design = first / "DESIGN.md"
    design.write_text(design.read_text(encoding="utf-8").replace("## ", "## x ", 1), encoding="utf-8")
    second = tmp_path / "b" / "other"
    shutil.copytree(first, second)
    memo.clear()
    fresh = _rows(validate_paths([second]))
    memo.clear()
    validate_paths([first])  # memoised under the first folder's paths
    again = _rows(validate_paths([second]))
    assert again == fresh
    files = {row[3] for row in again}
    assert files and all(f.startswith(str(second)) for f in files)
    assert any(f.endswith("DESIGN.md") for f in files)  # the broken chapter heading is a finding of the copy
    assert any(f.endswith("_kernel.py") for f in validate_paths([second]).files)


def test_other_bytes_or_other_interfaces_are_not_served_from_the_memo() -> None:
    memo.clear()
    plain = validate_text("# T\n\nno chapters\n", name="a/DESIGN.md")
    other = validate_text("# T\n\nno chapters at all\n", name="a/DESIGN.md")
    with_iface = validate_text("# T\n\nno chapters\n", name="a/DESIGN.md", interfaces_text="modules: [")
    assert _rows(plain) != _rows(with_iface)
    assert [f.rule for f in with_iface.findings if f.file == "a/eval/module_interfaces.yaml"]
    assert not [f for f in plain.findings if f.file == "a/eval/module_interfaces.yaml"]
    memo.clear()
    assert _rows(validate_text("# T\n\nno chapters at all\n", name="a/DESIGN.md")) == _rows(other)


def test_a_path_given_twice_counts_once(tmp_path: Path) -> None:
    """`opdesign validate d/DESIGN.md d/DESIGN.md`: one file checked, its findings once (was 'checked 2 files')."""
    out = tmp_path / "op"
    new_design(EXAMPLES / "causal_gqa_tail.yaml", out)
    once, twice = validate_paths([out / "DESIGN.md"]), validate_paths([out / "DESIGN.md", out / "DESIGN.md"])
    assert twice.files == once.files == [str(out / "DESIGN.md")]
    assert _rows(twice) == _rows(once) and twice.summary == once.summary
    both = validate_paths([out, out / "DESIGN.md"])  # the folder names its DESIGN.md and its kernel
    assert both.files == [str(out / "DESIGN.md"), str(out / "causal_gqa_tail_kernel.py")]
