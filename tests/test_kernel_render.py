"""The generated PyPTO kernel, checked without PyPTO: it parses, it is the DESIGN.md pseudocode,
and every pypto name, keyword, method and view/assemble rank in it matches the release manifest."""

from __future__ import annotations

import ast

import pytest
from conftest import EXAMPLES

from opdesign.pypto_run.selfcheck import HARNESS_MARKER, design_line_offset, read_harness
from opdesign.render.design import kernel_proper, render_all
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec
from opdesign.validate.api_surface import check_source, load_api_surface

EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


@pytest.fixture(scope="module", params=EXAMPLE_NAMES)
def rendered(request, tmp_path_factory):
    plan = estimate(load_spec(EXAMPLES / f"{request.param}.yaml"))
    files = render_all(plan, "en")
    out = tmp_path_factory.mktemp(request.param)
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    return plan, files, out


def test_kernel_parses_and_names_its_harness(rendered):
    plan, files, out = rendered
    text = files[f"{plan.op_name}_kernel.py"]
    tree = ast.parse(text)
    assert "from __future__ import annotations" not in text  # PyPTO's jit reads the annotations as objects
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == f"{plan.op_name}_kernel"]
    assert len(kernels) == 1 and any("jit" in ast.unparse(d) for d in kernels[0].decorator_list)
    harness = read_harness(out / f"{plan.op_name}_kernel.py")
    assert harness["KERNEL_FUNCTION"] == f"{plan.op_name}_kernel"
    assert [c["name"] for c in harness["CONFIGS"]] == [c["name"] for c in plan.typical_configs]
    assert tuple(harness["TOLERANCE"]) == (plan.rtol, plan.atol)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "make_case" for n in tree.body)


def test_design_pseudocode_is_the_kernel_proper(rendered):
    plan, files, out = rendered
    kernel = files[f"{plan.op_name}_kernel.py"]
    proper = kernel_proper(kernel)
    assert HARNESS_MARKER not in proper and proper in files["DESIGN.md"]
    offset = design_line_offset(out / "DESIGN.md", proper.splitlines())
    assert offset is not None
    design_lines = files["DESIGN.md"].splitlines()
    kernel_lines = kernel.splitlines()
    for line in (1, len(proper.splitlines())):  # kernel line N is DESIGN.md line offset + N
        assert design_lines[offset + line - 1] == kernel_lines[line - 1]


def test_every_pypto_name_exists_in_the_release(rendered):
    plan, files, _ = rendered
    assert check_source(files[f"{plan.op_name}_kernel.py"]) == []
    api = load_api_surface()
    used = {ast.unparse(n) for n in ast.walk(ast.parse(kernel_proper(files[f"{plan.op_name}_kernel.py"])))
            if isinstance(n, ast.Attribute) and ast.unparse(n).startswith("pypto.")}
    assert used and all(api.has(name) or api.has(name.rsplit(".", 1)[0]) for name in used), sorted(used)


def test_kernel_is_deterministic():
    spec = load_spec(EXAMPLES / "causal_gqa_tail.yaml")
    first = render_all(estimate(spec), "en")
    assert render_all(estimate(spec), "en") == first
