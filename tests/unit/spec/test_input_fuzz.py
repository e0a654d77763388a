"""Mutated inputs never crash: a mutated SPEC gives a Spec or a SpecError naming a field or a line,
a mutated generated design gives findings and never a rule that raised (OD-DOC-10).

The default suite runs a few dozen cases (Hypothesis, deadline None); the slow-marked test runs the
5000 cases of benchmarks/fuzz_validator.py (also a script: it prints the crash count).
"""

from __future__ import annotations

import copy
import importlib.util
import random
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opdesign.errors import SpecError
from opdesign.spec import Spec, load_spec

ROOT = Path(__file__).resolve().parents[3]
SPECS = {path.stem: path.read_text(encoding="utf-8") for path in sorted(EXAMPLES.glob("*.yaml"))}
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=True) | st.text(max_size=12)
    | st.sampled_from(["bf16", "fp8", "a3", "causal", "paged", "seq_kv", "16:40", "010", "backward"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12)
#: ``origin: field.path: message`` or ``origin: line N: invalid YAML: message``.
NAMED = re.compile(r'^\S+: (line \d+: invalid YAML: |(<root>|(?:[\w.]|\["(?:[^"\\]|\\.)*"\])+): )')


@cache
def fuzz_module() -> Any:
    spec = importlib.util.spec_from_file_location("fuzz_validator", ROOT / "benchmarks" / "fuzz_validator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def design_bases() -> list[tuple[str, str, str]]:
    return fuzz_module().bases()


def _paths(data: Any, path: tuple = ()) -> list[tuple]:
    return fuzz_module()._paths(data, path)


def _load(text: str) -> Spec | SpecError:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_spec(path)
        except SpecError as err:
            assert err.message.startswith(f"{path}: "), err.message
            assert NAMED.match(err.message), err.message
            return err


@FUZZ
@given(st.sampled_from(sorted(SPECS)), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(
    ["replace", "delete", "unknown"]), VALUES), min_size=1, max_size=3))
def test_a_mutated_spec_is_a_spec_or_an_error_naming_the_field(name: str, ops: list) -> None:
    data = yaml.safe_load(SPECS[name])
    for index, op, value in ops:
        paths = _paths(data)
        if not paths:
            break
        path = paths[index % len(paths)]
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if op == "delete":
            del parent[path[-1]]
        elif op == "unknown" and isinstance(parent, dict):
            parent[f"x_{index % 7}"] = value
        else:
            parent[path[-1]] = value
    result = _load(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    assert isinstance(result, (Spec, SpecError))


@FUZZ
@given(st.sampled_from(sorted(SPECS)), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(
    ["dup", "del", "base60", "octal", "indent", "tab"])), min_size=1, max_size=3))
def test_a_spec_text_mutation_is_a_spec_or_an_error_naming_the_line(name: str, ops: list) -> None:
    lines = SPECS[name].splitlines()
    for index, op in ops:
        i = index % len(lines)
        if op == "dup":
            lines.insert(i, lines[i])
        elif op == "del":
            del lines[i]
        elif op == "base60":
            lines[i] = re.sub(r"\b(\d+)\b", r"\1:30", lines[i], count=1)
        elif op == "octal":
            lines[i] = re.sub(r"(?<![\w.])(\d+)\b", r"0\1", lines[i], count=1)
        elif op == "indent":
            lines[i] = "  " + lines[i]
        else:
            lines[i] = "\t" + lines[i]
        if not lines:
            lines = ["{}"]
    result = _load("\n".join(lines) + "\n")
    assert isinstance(result, (Spec, SpecError))


def test_the_listed_spec_mutations() -> None:
    base = SPECS["dense_fa_8192"]
    cases = {  # mutation -> what the message says
        base.replace("seq_q: 8192", "seq_q: 16:40"): "line 12: invalid YAML: '16:40' is a YAML 1.1 base-60 number",
        base.replace("dtype: bf16\n", "dtype: bf16\ndtype: bf16\n"): "line 11: invalid YAML: duplicate key 'dtype'",
        base.replace("schema_version: 1\n", "schema_version: 1.0\n"): "schema_version: schema_version is the integer 1",
    }
    for text, message in cases.items():
        result = _load(text)
        assert isinstance(result, SpecError) and message in result.message, (message, result)


def _crashes(design: str, iface: str) -> list[str]:
    return fuzz_module().crashes(design, iface)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_a_mutated_generated_design_never_crashes_a_rule(seed: int) -> None:
    rng = random.Random(seed)
    design, iface, done = fuzz_module().mutated(rng.choice(design_bases()), rng)
    assert _crashes(design, iface) == [], done


def _base(name: str) -> tuple[str, str, str]:
    return next(base for base in design_bases() if base[0] == name)


def _front(design: str) -> tuple[dict, str]:
    front_text, rest = fuzz_module()._split(design)
    return yaml.safe_load(front_text), rest


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10_000)


@pytest.mark.parametrize("base,edit", [
    ("dense_fa_8192_en", ("interfaces", lambda d: d["modules"].append({"id": {}}))),
    ("dense_fa_8192_en", ("interfaces", lambda d: d["modules"][0].update(id={}))),
    ("dense_fa_8192_en", ("front", lambda d: d["opdesign"]["vec_tiles"]["V1"].update(dtype=[1, 2]))),
    ("sparse_topk_2048_en", ("front", lambda d: d["opdesign"]["cube_tiles"].pop("C2"))),
    ("dense_fa_8192_zh", ("front", lambda d: d["opdesign"].update(dtype={"id": {}}))),
])
def test_the_measured_crashes_are_findings(base: str, edit) -> None:
    """The minimal cases of the issue (and the fuzzer's): a finding about the value, never OD-DOC-10."""
    from opdesign.validate import validate_text

    name, design, iface = _base(base)
    where, change = edit
    if where == "interfaces":
        data = yaml.safe_load(iface)
        change(data)
        iface = _dump(data)
    else:
        front, rest = _front(design)
        change(front)
        design = "---\n" + _dump(front) + rest
    report = validate_text(design, interfaces_text=iface)
    assert [f for f in report.findings if f.rule == "OD-DOC-10"] == []
    assert report.exit_code == 1
    assert any(f.level == "error" for f in report.findings)


@pytest.mark.slow
def test_5000_mutated_designs_crash_no_rule() -> None:
    result = fuzz_module().run(5000, 0, design_bases())
    assert result["crashes"] == 0, result["by_rule"]


def test_the_mutations_are_deterministic() -> None:
    base = design_bases()[0]
    first = fuzz_module().mutated(copy.deepcopy(base), random.Random(7))
    assert first == fuzz_module().mutated(copy.deepcopy(base), random.Random(7))
