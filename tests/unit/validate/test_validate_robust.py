"""The validator on hostile input: never a traceback, never an internal-error finding.

Hypothesis fuzzes raw text, line-level mutations of a generated design,
random front matter and random interface files; explicit cases cover binary,
invalid UTF-8, 10 MB files, YAML tags and alias bombs, deep nesting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from validate_support import FIXTURES, IFACE, run_case

from opdesign.validate import MAX_INPUT_BYTES, Report, validate_paths, validate_text
from opdesign.validate.output import format_text

BASE = FIXTURES / "_base" / "baseline_zh"
DESIGN_LINES = (BASE / "DESIGN.md").read_text(encoding="utf-8").splitlines()
INTERFACES = (BASE / IFACE).read_text(encoding="utf-8")
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKENS = ["---", "```", "```python", "## 伪代码", "## Pseudocode", "<slot>", "{x}", "TODO", "| a | b |", "|---|---|",
          "opdesign:", "  q_tile: -1", "  cube_tiles: {C1: {m: [0, 0]}}", "    pypto.sg_set_scope(3)",
          "for i in range(n):", "    x = pypto.matmul(a, b)", "<!-- opdesign: disable=C-TILE-04 -->", "\t", "&a [*a]",
          "Decision: module_count = x", "- id: 0", "!!python/object:os.system", "[[[[", "(((("]


def _sound(report: Report) -> None:
    assert all(f.rule != "OD-DOC-10" for f in report.findings), [f.message for f in report.findings]
    assert all(f.line >= 1 for f in report.findings)
    Report.model_validate_json(report.model_dump_json())
    assert len(format_text(report).splitlines()) == len(report.findings) + 1  # one line per finding


@FUZZ
@given(st.text(max_size=3000))
def test_random_text(text: str) -> None:
    _sound(validate_text(text, interfaces_text=text))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["del", "dup", "swap", "insert", "indent"]),
                          st.integers(0, len(DESIGN_LINES) - 1), st.sampled_from(TOKENS)), max_size=12))
def test_mutated_design(ops: list[tuple[str, int, str]]) -> None:
    lines = list(DESIGN_LINES)
    for op, i, token in ops:
        i %= max(len(lines), 1)
        if not lines:
            lines = [token]
        elif op == "del":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            lines[i], lines[-1 - i] = lines[-1 - i], lines[i]
        elif op == "insert":
            lines.insert(i, token)
        else:
            lines[i] = "    " + lines[i]
    _sound(validate_text("\n".join(lines), interfaces_text=INTERFACES))


YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25)
KEYS = st.sampled_from(["schema_version", "op_name", "dynamic_axes", "opdesign", "op", "primary_inputs", "modules",
                        "final_outputs", "composition_verification", "q_tile", "cube_tiles", "vec_tiles", "device",
                        "form", "skeleton", "ub_budget", "accumulators", "unroll_list", "inputs", "outputs", "id"])


@FUZZ
@given(st.dictionaries(KEYS, YAML_VALUES, max_size=8), st.dictionaries(KEYS, YAML_VALUES, max_size=8),
       st.dictionaries(KEYS, YAML_VALUES, max_size=8))
def test_random_front_matter_block_and_interfaces(front: dict, block: dict, iface: dict) -> None:
    body = "\n".join(DESIGN_LINES[DESIGN_LINES.index("---", 1) + 1:])
    front = {**front, "opdesign": block} if block else front
    text = "---\n" + yaml.safe_dump(front, allow_unicode=True) + "---\n" + body
    _sound(validate_text(text, interfaces_text=yaml.safe_dump(iface, allow_unicode=True)))


def test_unusable_bytes(tmp_path: Path) -> None:
    cases = {
        "binary": b"\x00\x01\x02\xff" * 10,
        "latin1": "---\nop_name: café\n---\n".encode("latin-1"),
        "utf16": "---\nop_name: x\n---\n".encode("utf-16"),
        "huge": b"# x\n" + b"a" * (10 * 1024 * 1024),
    }
    for name, data in cases.items():
        report = run_case(data, INTERFACES, tmp_path)
        assert report.exit_code == 2, name
        assert [f.rule for f in report.findings] == ["OD-DOC-01"], name
    assert MAX_INPUT_BYTES == 256 * 1024
    assert validate_text("x" * (MAX_INPUT_BYTES + 1)).exit_code == 2
    bom = run_case("\ufeff".encode() + (BASE / "DESIGN.md").read_bytes(), INTERFACES, tmp_path)
    assert bom.findings == []


def _front(text: str) -> list[str]:
    report = validate_text(text)
    _sound(report)
    return [f.message for f in report.findings if f.rule == "OD-DOC-02"]


def test_hostile_yaml_is_refused_not_expanded_or_executed(tmp_path: Path) -> None:
    laughs = ("a: &a [x, x, x, x, x, x, x, x, x]\n"
              "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
              "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
              "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
              "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]")
    assert _front(f"---\n{laughs}\n---\n") == ["front matter: more than 32 YAML aliases (refused)"]
    few = ("a: &a [x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n"
           "d: [*c, *c, *c, *c, *c, *c, *c, *c]")
    assert _front(f"---\n{few}\n---\n") == []  # 24 aliases: allowed, 1024 leaves
    marker = tmp_path / "pwned"
    tag = f"---\nop_name: !!python/object/apply:os.system ['touch {marker}']\n---\n"
    assert _front(tag)[0].startswith("front matter: not valid YAML: could not determine a constructor")
    assert not marker.exists()
    assert _front("---\nx: " + "[" * 500 + "]" * 500 + "\n---\n") == [
        "front matter: YAML nested deeper than 64 levels (refused)"]
    assert _front("---\n- a\n- b\n---\n") == ["front matter is a YAML list, expected a mapping"]
    assert _front("---\nop_name: [x\n---\n")[0].startswith("front matter: not valid YAML")
    assert _front("---\nop_name: x\n") == ["front matter opened on line 1 is never closed by a '---' line"]
    report = validate_text((BASE / "DESIGN.md").read_text(encoding="utf-8"),
                           interfaces_text="a: !!python/name:os.system\n")
    assert [f.rule for f in report.findings] == ["OD-IF-01"]


def test_deep_markdown_and_code_nesting() -> None:
    texts = [
        "> " * 3000 + "x\n", "- " * 3000 + "x\n", "[" * 5000 + "\n",
        "## Pseudocode\n\n```python\nx = " + "(" * 5000 + ")" * 5000 + "\n```\n",
        "## Pseudocode\n\n```python\n" + "".join(" " * i + "if x:\n" for i in range(2000)) + "```\n",
        "## Pseudocode\n\n```python\n" + "".join("    " * i + f"for i{i} in pypto.loop(n, unroll_list=[1]):\n"
                                                 for i in range(90)) + "    " * 90 + "y = pypto.matmul(a, b)\n```\n",
    ]
    for text in texts:
        _sound(validate_text(text))


def test_a_500_term_expression_is_checked_at_its_line_not_reported_as_internal() -> None:
    # a sum of 500 terms nests 500 BinOps: OD-KN-06, OD-KN-03 and C-SYM-06 walk it without recursion
    from opdesign.validate import validate_kernel_text

    terms = " + ".join(["kv_len"] * 500)
    kernel = ('"""SK-01 kernel."""\nimport pypto\n\n\n@pypto.frontend.jit()\n'
              "def k(lens: pypto.Tensor((pypto.DYNAMIC,), pypto.DT_INT32)):\n"
              "    for b in pypto.loop(4, name='b'):\n"
              f"        early = {terms}\n"
              "        kv_len = lens[b]\n"
              f"        total = {terms}\n"
              f"        for z in range({terms}):\n"
              "            pass\n")
    found = [(f.rule, f.line, f.message) for f in validate_kernel_text(kernel).findings]
    assert all(rule != "OD-DOC-10" for rule, _line, _m in found), found
    assert ("OD-KN-06", 8, "kv_len is read before it is bound (its first assignment is at line 9)") in found
    assert ("C-SYM-06", 11,
            "range over symbolic bound an expression of 1998 nodes (nested 501 deep): use pypto.loop") in found
    # a rule that still recurses (a 500-deep .min() chain) names the expression's line, not line 1
    chain = kernel.replace(f"        total = {terms}\n", "        total = kv_len" + ".min(4)" * 500 + "\n")
    internal = [(f.line, f.message) for f in validate_kernel_text(chain).findings if f.rule == "OD-DOC-10"]
    assert internal and all(line == 10 and "line 10 is nested 1003 levels deep" in m for line, m in internal), internal
    design = "## Pseudocode\n\n```python\nfor z in range(" + terms + "):\n    pass\n```\n"
    found = [(f.rule, f.line) for f in validate_text(design).findings]
    assert ("C-SYM-06", 4) in found and all(rule != "OD-DOC-10" for rule, _line in found), found


def test_many_designs_in_one_call(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"op{i}" / "eval").mkdir(parents=True)
        (tmp_path / f"op{i}" / "DESIGN.md").write_bytes((BASE / "DESIGN.md").read_bytes())
        (tmp_path / f"op{i}" / IFACE).write_text(INTERFACES, encoding="utf-8")
    report = validate_paths(sorted(tmp_path.iterdir()))
    assert len(report.files) == 20 and report.findings == []


@pytest.mark.slow
def test_a_file_at_the_size_limit_is_checked_in_bounded_memory() -> None:
    """At the former 5 MiB limit, 2.5 M lines of 'a' took 38 s and 2.2 GB (markdown-it per-line cost).

    Time is a benchmark figure (benchmarks/bench_validate.py), never asserted here.
    """
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for unit in ("a\n", "- - a\n"):
        text = (unit * (MAX_INPUT_BYTES // len(unit)))[:MAX_INPUT_BYTES]
        report = validate_text(text)
        assert report.exit_code == 1 and report.unusable_inputs == []
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500 * 1024  # KiB on Linux


def test_many_kernel_blocks_are_bounded_and_said() -> None:
    from opdesign.validate.parse.pseudocode import MAX_KERNELS

    block = "```python\n@pypto.frontend.jit()\ndef k(q):\n    return q\n```\n"
    report = validate_text("## Pseudocode\n" + block * (MAX_KERNELS + 5))
    notes = [f.message for f in report.findings if f.rule == "OD-DOC-10"]
    assert notes == [f"the pseudocode chapter has {MAX_KERNELS + 5} kernel-like code blocks; only the first "
                     f"{MAX_KERNELS} were checked"]

