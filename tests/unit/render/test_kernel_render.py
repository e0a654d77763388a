"""The generated PyPTO kernel, checked without PyPTO: it parses, it is the DESIGN.md pseudocode,
and every pypto name, keyword, method and view/assemble rank in it matches the release manifest."""

from __future__ import annotations

import ast

import pytest
from conftest import EXAMPLES

from opdesign.pypto_run.selfcheck import HARNESS_MARKER, HarnessError, design_line_offset, read_harness, with_constants
from opdesign.render.design import kernel_proper, render_all
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec
from opdesign.validate.analysis.api_surface import check_source, load_api_surface

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


VARIANTS = [  # (example, field changes): each variant's kernel must render, parse and use only release names
    ("sparse_topk_2048", {"dynamic_axes": [{"name": "batch", "range": [1, 64], "uniform": True}]}),
    ("causal_gqa_tail", {"mask": "tensor"}),
    ("causal_gqa_tail", {"layout": "BNSD", "mask": "none"}),
    ("causal_gqa_tail", {"dtype": "fp32"}),
    ("paged_fp8_decode", {"quant": "none", "device": "a3"}),
    ("sk16_backward_lm", {"mask": "causal", "layout": "BSND"}),
]


@pytest.mark.parametrize("name, changes", VARIANTS, ids=[f"{n}-{'-'.join(c)}" for n, c in VARIANTS])
def test_variant_kernels_render_and_use_only_release_names(name, changes):
    from conftest import spec_variant

    plan = estimate(spec_variant(load_spec(EXAMPLES / f"{name}.yaml"), **changes))
    kernel = render_all(plan, "en")[f"{plan.op_name}_kernel.py"]
    ast.parse(kernel)
    assert check_source(kernel) == []


def test_the_sk02_fallback_kernel_renders():
    """A top-k SPEC whose row does not fit UB plans SK-01 Sparse Attn; its kernel renders too."""
    from conftest import spec_variant

    spec = spec_variant(load_spec(EXAMPLES / "sparse_topk_2048.yaml"), shape__topk=16384, shape__seq_kv=32768,
                        dynamic_axes=[{"name": "seq_kv", "range": [1, 32768], "uniform": False}])
    plan = estimate(spec)
    assert plan.skeleton.id == "SK-01" and plan.fallback_from == "SK-02"
    kernel = render_all(plan, "en")[f"{plan.op_name}_kernel.py"]
    assert check_source(kernel) == [] and "pypto.scatter(" in kernel


def test_good_rule_examples_use_only_names_the_release_has():
    """`opdesign rules ID` never shows a 'good' example written with a pypto name 0.2.0 lacks."""
    from opdesign.validate import all_rules

    for rule in all_rules().values():
        if rule.example_kind == "pseudocode":
            names = [h for h in check_source(rule.good) if h.kind in ("name", "method")]
            assert names == [], (rule.id, names)


def test_quick_scales_the_performance_form_constants_down(tmp_path):
    """dense_fa_8192 is the performance form (compile-time SEQ_Q / SEQ_KV): --quick runs a copy of the
    kernel with its lengths and tiles divided by the SPEC's factor 8, the same 2 x 8 tile loop, every line
    in place; a run without --quick is the config's own shape (never shrunk)."""
    plan = estimate(load_spec(EXAMPLES / "dense_fa_8192.yaml"))
    assert plan.form == "performance" and (plan.q_tile, plan.kv_tile, plan.q_tiles, plan.kv_tiles) == (4096, 1024, 2, 8)
    kernel = tmp_path / "dense_fa_8192_kernel.py"
    kernel.write_text(render_all(plan, "en")[kernel.name], encoding="utf-8")
    configs = read_harness(kernel)["CONFIGS"]
    consts = {"SEQ_Q": 1024, "SEQ_KV": 1024, "Q_TILE": 512, "KV_TILE": 128}
    for cfg in configs:
        assert cfg["quick_constants"] == consts
        assert (cfg["quick"]["seq_q"], cfg["quick"]["seq_kv"]) == (1024, 1024)
        assert (cfg["shape"]["seq_q"], cfg["shape"]["seq_kv"]) == (8192, 8192)  # a run without --quick is full size
        assert cfg["shrunk"] is None and cfg["tile_pairs"] == cfg["shape"]["batch"] * cfg["shape"]["num_heads"] * 16
        assert "seq_q 8192 -> 1024, seq_kv 8192 -> 1024, Q_TILE 4096 -> 512, KV_TILE 1024 -> 128" in cfg["quick_shrunk"]
    copy = with_constants(kernel, consts, tmp_path / "quick" / kernel.name)
    before, after = kernel.read_text().splitlines(), copy.read_text().splitlines()
    assert len(before) == len(after)
    changed = {a for a, b in zip(before, after, strict=True) if a != b}
    assert {line.split(" = ")[0] for line in changed} == set(consts)  # OUT_ROWS stays 512
    module = {n.targets[0].id: n.value.value for n in ast.parse(copy.read_text()).body
              if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}
    assert {k: module[k] for k in consts} == consts
    assert -(-module["SEQ_Q"] // module["Q_TILE"]) == module["Q_TILES"] == 2
    assert -(-module["SEQ_KV"] // module["KV_TILE"]) == module["KV_TILES"] == 8
    with pytest.raises(HarnessError, match="NO_SUCH"):
        with_constants(kernel, {"NO_SUCH": 1}, tmp_path / "x.py")


def test_quick_keeps_the_baseline_form_kernel_as_is():
    plan = estimate(load_spec(EXAMPLES / "causal_gqa_tail.yaml"))
    assert plan.form != "performance"
    text = render_all(plan, "en")[f"{plan.op_name}_kernel.py"]
    harness = text.split("CONFIGS = ", 1)[1]
    configs = ast.literal_eval(harness[: harness.index("\n]\n") + 3])
    assert configs and all("quick_constants" not in c and c["shrunk"] is None for c in configs)


def test_performance_form_writes_only_the_valid_rows_of_a_q_tail():
    """SEQ_Q 300 with Q_TILE 160: the last Q tile has 140 rows; each output block is viewed, reshaped and
    assembled with its valid rows (before the fix PyPTO refused the full-size assemble: ASSEMBLEOpError)."""
    spec = EXAMPLES.parents[1] / "tests" / "fixtures" / "generated" / "gen_perf_causal_tail.yaml"
    plan = estimate(load_spec(spec))
    assert plan.form == "performance" and (plan.seq_q, plan.q_tile, plan.q_tiles) == (300, 160, 2)
    kernel = render_all(plan, "en")[f"{plan.op_name}_kernel.py"]
    # the causal performance form runs a static Q loop (issue 30 item 2), so q_valid is an int here
    assert "rows = min(OUT_ROWS, q_valid - r * OUT_ROWS)" in kernel
    assert "pypto.view(o_run, [OUT_ROWS, HEAD_DIM], [r * OUT_ROWS, 0], valid_shape=[rows, HEAD_DIM])" in kernel
    assert "pypto.view(l_run, [OUT_ROWS, 1], [r * OUT_ROWS, 0], valid_shape=[rows, 1])" in kernel
    assert "pypto.reshape(o_fin, [1, OUT_ROWS, 1, HEAD_DIM], valid_shape=[1, rows, 1, HEAD_DIM])" in kernel
    assert check_source(kernel) == []
    dense = estimate(load_spec(EXAMPLES / "dense_fa_8192.yaml"))  # 8192 = 2 x 4096: no tail, no valid_shape
    assert "valid_shape=[rows" not in render_all(dense, "en")[f"{dense.op_name}_kernel.py"]
