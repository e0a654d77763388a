"""The CANNBot artifact contract, checked by this test's own small checker (not ``opdesign.validate``).

The contract (pypto-op-design ``references/artifacts.yaml`` and the checks of its
``scripts/validate_artifacts.py`` / ``scripts/validate_yaml.py``; domain.md §9):

- DESIGN.md opens with ``---\\n`` and a ``\\n---\\n`` line closes a YAML mapping holding
  ``schema_version``, ``op_name`` (a non-empty string) and ``dynamic_axes`` (a non-empty list);
- each of the seven required headings is the whole text of some heading (any level, stripped,
  compared case-insensitively; a heading in fenced code does not count);
- ``eval/module_interfaces.yaml`` has the six required keys; ``primary_inputs``, ``modules`` and
  ``final_outputs`` are non-empty lists of mappings; module ids run 1, 2, ...; every module has
  non-empty ``inputs`` and ``outputs``; then the six wiring rules.

The default ``opdesign new`` output of every example passes it; ``--lang en`` fails it on the
headings and on nothing else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, run_cli
from markdown_it import MarkdownIt

from opdesign.workflows.new import new_design

REQUIRED_FRONT = ("schema_version", "op_name", "dynamic_axes")
REQUIRED_HEADINGS = ("算子契约", "计算图与 API 映射", "分解与模块边界", "范式与设计决策", "伪代码",
                     "验证方案 / Verification Plan", "风险与开放问题")
REQUIRED_KEYS = ("schema_version", "op", "primary_inputs", "modules", "final_outputs", "composition_verification")
DTYPES = frozenset({"float32", "float16", "bfloat16", "int32", "int64", "bool", "int", "int8"})
DIM_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
             ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.USub, ast.UAdd)
MODULE_SOURCE = re.compile(r"module_(\d+)")
SPECS = sorted(EXAMPLES.glob("*.yaml"))


def heading_texts(markdown: str) -> set[str]:
    """Whole texts of the headings (markdown-it tokens: fenced code holds no heading), lower-cased."""
    tokens = MarkdownIt().parse(markdown)
    return {tokens[i + 1].content.strip().lower() for i, tok in enumerate(tokens) if tok.type == "heading_open"}


def design_failures(text: str) -> list[str]:
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        return ["no front matter"]
    front_text, body = text[4:].split("\n---\n", 1)
    front = yaml.safe_load(front_text)
    if not isinstance(front, dict):
        return ["front matter is not a mapping"]
    failures = [f"front matter lacks {key}" for key in REQUIRED_FRONT if key not in front]
    if not isinstance(front.get("op_name"), str) or not front["op_name"].strip():
        failures.append("op_name is not a non-empty string")
    if not isinstance(front.get("dynamic_axes"), list) or not front["dynamic_axes"]:
        failures.append("dynamic_axes is not a non-empty list")
    found = heading_texts(body)
    return failures + [f"heading missing: {h}" for h in REQUIRED_HEADINGS if h.lower() not in found]


def dims(shape: object) -> list[str]:
    """Dimension expressions of a shape written as a list or as a string ``"[B, T]"``."""
    if isinstance(shape, list):
        return [str(d) for d in shape]
    return [d.strip() for d in str(shape).strip().strip("[]").split(",") if d.strip()]


def dim_ok(expr: str) -> bool:
    """Names, integers and ``+ - * //`` only (wiring rule 5)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return False
    return all(isinstance(n, DIM_NODES) and not (isinstance(n, ast.Constant) and type(n.value) is not int)
               for n in ast.walk(tree))


def _rows(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(r, dict) for r in value)


def interface_failures(data: object) -> list[str]:
    if not isinstance(data, dict):
        return ["interface file is not a mapping"]
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        return [f"interface keys missing: {missing}"]
    for key in ("primary_inputs", "modules", "final_outputs"):
        if not _rows(data[key]):
            return [f"{key} is not a non-empty list of mappings"]
    for index, module in enumerate(data["modules"], start=1):
        if type(module.get("id")) is not int or module["id"] != index:
            return ["module ids are not 1, 2, ..."]
        if not _rows(module.get("inputs")) or not _rows(module.get("outputs")):
            return [f"module {index} has no inputs or no outputs"]
    failures: list[str] = []

    def shape_and_dtype(entry: dict, where: str) -> None:
        failures.extend(f"rule 5: {where} dim {d!r}" for d in dims(entry.get("shape", "")) if not dim_ok(d))
        if entry.get("dtype") is not None and entry["dtype"] not in DTYPES:
            failures.append(f"rule 6: {where} dtype {entry['dtype']!r}")

    primary = {p.get("name") for p in data["primary_inputs"]}
    for p in data["primary_inputs"]:
        shape_and_dtype(p, f"primary {p.get('name')}")
    outputs: dict[int, set[str]] = {}
    for module in data["modules"]:
        names: set[str] = set()
        for out in module["outputs"]:
            if out.get("name") in names:
                failures.append(f"rule 4: module {module['id']} output {out.get('name')} twice")
            names.add(out.get("name"))
            shape_and_dtype(out, f"module {module['id']} output {out.get('name')}")
        outputs[module["id"]] = names
    for module in data["modules"]:
        for inp in module["inputs"]:
            if inp.get("source") == "primary":
                if inp.get("name") not in primary:
                    failures.append(f"rule 1: module {module['id']} input {inp.get('name')}")
                continue
            match = MODULE_SOURCE.fullmatch(str(inp.get("source")))
            if not match or int(match.group(1)) >= module["id"] or inp.get("name") not in outputs[int(match.group(1))]:
                failures.append(f"rule 2: module {module['id']} input {inp.get('name')} from {inp.get('source')}")
    for final in data["final_outputs"]:
        match = MODULE_SOURCE.fullmatch(str(final.get("source")))
        if (not match or int(match.group(1)) > len(data["modules"])
                or final.get("name") not in outputs[int(match.group(1))]):
            failures.append(f"rule 3: final output {final.get('name')} from {final.get('source')}")
    return failures


def contract_failures(op_dir: Path) -> list[str]:
    design = (op_dir / "DESIGN.md").read_text(encoding="utf-8")
    iface = yaml.safe_load((op_dir / "eval" / "module_interfaces.yaml").read_text(encoding="utf-8"))
    return design_failures(design) + interface_failures(iface)


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_default_new_output_passes_the_cannbot_contract(spec: Path, tmp_path: Path) -> None:
    new_design(spec, tmp_path / "op")
    assert contract_failures(tmp_path / "op") == []


def test_cli_default_passes_and_english_fails_on_the_headings_only(tmp_path: Path) -> None:
    spec = EXAMPLES / "causal_gqa_tail.yaml"
    for lang, extra in (("default", ()), ("en", ("--lang", "en"))):
        res = run_cli("new", "--spec", str(spec), "--out", str(tmp_path / lang), *extra)
        assert res.returncode == 0, res.stderr
    assert contract_failures(tmp_path / "default") == []
    assert contract_failures(tmp_path / "en") == [f"heading missing: {h}" for h in REQUIRED_HEADINGS]


def test_the_checker_fails_on_broken_wiring_and_numbered_headings() -> None:
    good = {"schema_version": 1, "op": "x", "composition_verification": {"rtol": 0.01},
            "primary_inputs": [{"name": "q", "shape": "[B, T]", "dtype": "bfloat16"}],
            "modules": [{"id": 1, "inputs": [{"name": "q", "source": "primary"}],
                         "outputs": [{"name": "o", "shape": ["B", "T // 2"], "dtype": "float32"}]}],
            "final_outputs": [{"name": "o", "source": "module_1"}]}
    assert interface_failures(good) == []
    bad = yaml.safe_load(yaml.safe_dump(good))
    bad["modules"][0]["inputs"][0] = {"name": "o", "source": "module_1"}
    bad["modules"][0]["outputs"][0]["shape"] = "[B ** 2, T]"
    bad["final_outputs"][0]["source"] = "module_2"
    assert interface_failures(bad) == ["rule 5: module 1 output o dim 'B ** 2'",
                                       "rule 2: module 1 input o from module_1",
                                       "rule 3: final output o from module_2"]
    front = "---\nschema_version: 1\nop_name: x\ndynamic_axes: [B]\n---\n"
    chapters = "".join(f"## {h}\n\n" for h in REQUIRED_HEADINGS)
    assert design_failures(front + chapters) == []
    assert design_failures(front + chapters.replace("## 伪代码", "## 5. 伪代码")) == ["heading missing: 伪代码"]
    assert design_failures(front + chapters.replace("## 伪代码", "```\n## 伪代码\n```")) == ["heading missing: 伪代码"]
