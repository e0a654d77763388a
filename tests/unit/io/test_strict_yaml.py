"""One strict YAML loader for every user input (opdesign.io.yamlsafe): repeated keys, YAML 1.1 base-60 and
octal numbers and a float schema_version are refused with their line, never read silently.

SPEC: ``error: spec_invalid: PATH: line N: invalid YAML: ...``, exit 2. DESIGN.md front matter (the
``opdesign:`` block included): an OD-DOC-02 finding at the file line. Interface file: OD-IF-01 at its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli

from opdesign.errors import SpecError
from opdesign.io.yamlsafe import YamlProblem, load
from opdesign.spec import load_spec
from opdesign.validate import validate_paths, validate_text

SPEC = (EXAMPLES / "dense_fa_8192.yaml").read_text(encoding="utf-8")
@pytest.mark.parametrize("text,line,message", [
    ("a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a' (first at line 1)"),
    ("m:\n  x: 1\n  x: 1\n", 3, "duplicate key 'x' (first at line 2)"),
    ("{a: 1, b: 2, a: 3}\n", 1, "duplicate key 'a' (first at line 1)"),
    ("seq_q: 16:40\n", 1, "'16:40' is a YAML 1.1 base-60 number (read as 1000)"),
    ("t: -1:30.5\n", 1, "'-1:30.5' is a YAML 1.1 base-60 number (read as -90.5)"),
    ("x: [1, 010]\n", 1, "'010' is a YAML 1.1 octal number (read as 8)"),
    ("a: &x [*x]\n", 1, "recursive alias: the anchor on this line is used inside its own value"),
    ("a: 1\nm: &x\n  b: [1, {c: *x}]\n", 2, "recursive alias"),  # the line of the anchor
])
def test_the_loader_refuses_with_the_line(text: str, line: int, message: str) -> None:
    with pytest.raises(YamlProblem) as err:
        load(text)
    assert err.value.line == line
    assert message in err.value.message


def test_what_stays_accepted() -> None:
    assert load("a: '16:40'\nb: 0\nc: 0x10\nd: 1.5\ne: \"010\"\n").data == {
        "a": "16:40", "b": 0, "c": 16, "d": 1.5, "e": "010"}
    assert load("1: a\n'1': b\n").data == {1: "a", "1": "b"}  # an int and a string key are different keys
    merged = load("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 3\n").data  # a merge key may be overridden
    assert merged["use"] == {"x": 3, "y": 2}
    assert load("a: &x [1]\nb: [*x, {c: *x}]\n").data == {"a": [1], "b": [[1], {"c": [1]}]}  # shared, no cycle


def _line(text: str, needle: str) -> int:
    return next(i for i, row in enumerate(text.splitlines(), 1) if needle in row)


@pytest.mark.parametrize("old,new,at,message", [
    ("dtype: bf16\n", "dtype: bf16\ndtype: fp16\n", "dtype: fp16", "duplicate key 'dtype' (first at line {first})"),
    ("mask: none\n", "mask: none\nmask: causal\n", "mask: causal", "duplicate key 'mask' (first at line {first})"),
    ("seq_q: 8192", "seq_q: 16:40", "16:40", "'16:40' is a YAML 1.1 base-60 number (read as 1000)"),
])
def test_a_spec_with_a_repeated_key_or_base60_number_exits_2_with_the_line(tmp_path: Path, old: str, new: str,
                                                                           at: str, message: str) -> None:
    text = SPEC.replace(old, new, 1)
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    if "{first}" in message:
        message = message.format(first=_line(text, old.strip()))
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert err.value.message.startswith(f"{spec}: line {_line(text, at)}: invalid YAML: ")
    assert message in err.value.message
    res = run_cli("estimate", "--spec", str(spec))
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr == f"error: spec_invalid: {err.value.message}\n"


def test_a_float_or_string_schema_version_is_refused(tmp_path: Path) -> None:
    for value, shown in (("1.0", "float 1.0"), ("'1'", "str '1'")):
        spec = tmp_path / "spec.yaml"
        spec.write_text(SPEC.replace("schema_version: 1\n", f"schema_version: {value}\n"), encoding="utf-8")
        res = run_cli("new", "--spec", str(spec), "--out", str(tmp_path / "out"))
        assert res.returncode == 2
        assert f"schema_version: schema_version is the integer 1, not {shown}" in res.stderr
        assert not (tmp_path / "out").exists()


def test_loose_spec_scalars_are_refused() -> None:
    import yaml

    from opdesign.spec import parse_spec

    data = yaml.safe_load(SPEC)
    data["dynamic_axes"][0]["uniform"] = "yes"
    with pytest.raises(SpecError, match="dynamic_axes.0.uniform: Input should be a valid boolean"):
        parse_spec(data)
    data = yaml.safe_load(SPEC)
    data["performance"]["baseline_us"] = "16948"
    with pytest.raises(SpecError, match="performance.baseline_us: Input should be a valid number"):
        parse_spec(data)


# --- validate inputs: a finding at the line ---

DESIGN = ("---\nschema_version: 1\nop_name: my_op\n{extra}dynamic_axes:\n"
          "- {{name: seq_kv, range: [1, 8192]}}\n---\n# my_op\n")


@pytest.mark.parametrize("extra,line,message", [
    ("op_name: other\n", 4, "front matter: duplicate key 'op_name' (first at line 3)"),
    ("opdesign:\n  q_tile: 64\n  kv_tile: 64\n  q_tile: 128\n", 7,
     "front matter: duplicate key 'q_tile' (first at line 5)"),
    ("opdesign:\n  seq_q: 16:40\n", 5, "front matter: '16:40' is a YAML 1.1 base-60 number (read as 1000)"),
])
def test_front_matter_and_block_problems_are_findings_at_their_line(extra: str, line: int, message: str) -> None:
    report = validate_text(DESIGN.format(extra=extra))
    found = [(f.rule, f.line, f.message) for f in report.findings if f.rule == "OD-DOC-02"]
    assert found == [("OD-DOC-02", line, message + ": quote it or write the number" if "base-60" in message
                      else message + ": a key may appear once per mapping")]
    assert report.exit_code == 1


def test_a_float_schema_version_in_the_front_matter_is_a_finding() -> None:
    text = DESIGN.format(extra="").replace("schema_version: 1", "schema_version: 1.0")
    found = [(f.rule, f.line, f.message) for f in validate_text(text).findings if f.rule == "OD-DOC-03"]
    assert found == [("OD-DOC-03", 2, "schema_version must be a positive integer, got 1.0")]


def test_a_repeated_interface_key_is_an_interface_finding(tmp_path: Path) -> None:
    folder = tmp_path / "op"
    (folder / "eval").mkdir(parents=True)
    (folder / "DESIGN.md").write_text(DESIGN.format(extra=""), encoding="utf-8")
    (folder / "eval" / "module_interfaces.yaml").write_text(
        "schema_version: 1\nop: my_op\nmodules:\n- id: 1\n  name: a\n  id: 2\n", encoding="utf-8")
    report = validate_paths([folder])
    found = [(f.rule, Path(f.file).name, f.line, f.message) for f in report.findings if f.rule == "OD-IF-01"]
    assert found == [("OD-IF-01", "module_interfaces.yaml", 6,
                      "interface file: duplicate key 'id' (first at line 4): a key may appear once per mapping")]


def test_every_shipped_yaml_passes_the_strict_loader() -> None:
    """Cards, constraint tables, phrase tables, example SPECs and fixtures load with their own (faster)
    loaders; they must still hold no repeated key or YAML 1.1 number."""
    root = Path(__file__).resolve().parents[3]
    checked = 0
    for folder in ("constraints", "templates", "patterns", "examples", "tests/fixtures"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".yaml", ".yml", ".md") or not path.is_file() or "validate" in path.parts:
                continue  # tests/fixtures/validate holds deliberately broken designs
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".md":
                if not text.startswith("---\n") or "\n---" not in text[4:]:
                    continue
                text = text[4:text.index("\n---", 4) + 1]
            try:
                load(text)
            except YamlProblem as err:
                assert not any(word in err.message for word in ("duplicate key", "base-60", "octal")), (path, err)
            checked += 1
    assert checked > 50
