"""SK-01 with layout TND and a mask tensor (the FA Score row on packed rows): attn_mask [T_q, seq_kv] has one
row per packed query token, its column c the token's own batch's KV position c. Plan, DESIGN.md, interfaces,
scaffold and kernel of tests/fixtures/sk01/tensor_mask_tnd.yaml."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO, run_cli
from tnd_support import assert_verifies, needs_pypto, new_folder, scaffold_lines

from opdesign.render.design import render_kernel
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

SPEC = REPO / "tests" / "fixtures" / "sk01" / "tensor_mask_tnd.yaml"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return new_folder(tmp_path_factory, SPEC, "tensor_mask_tnd")


def test_plan_has_a_packed_mask_input():
    plan = estimate(load_spec(SPEC))
    assert (plan.skeleton.id, plan.layout, plan.mask, plan.variant) == ("SK-01", "TND", "tensor", "FA Score")
    assert [(t.name, t.shape, t.dtype) for t in plan.primary_inputs][3:] == [
        ("actual_seq_q", ["batch"], "int32"), ("actual_seq_kv", ["batch"], "int32"),
        ("attn_mask", ["batch * seq_q", "seq_kv"], "bool")]


def test_new_writes_a_design_that_validates(generated):
    res = run_cli("validate", str(generated))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout
    design = (generated / "DESIGN.md").read_text(encoding="utf-8")
    assert "| attn_mask | input | [batch * seq_q, seq_kv] | bool | - |" in design
    assert ("row `cum_q[b-1] + r` is query `r` of batch `b` and its column `c` is batch `b`'s own KV position `c`"
            in design)
    interfaces = yaml.safe_load((generated / "eval" / "module_interfaces.yaml").read_text())
    mask = next(t for t in interfaces["primary_inputs"] if t["name"] == "attn_mask")
    assert mask["shape"] == ["batch * seq_q", "seq_kv"] and mask["dtype"] == "bool"


def test_kernel_views_the_mask_at_the_packed_row():
    kernel = render_kernel(estimate(load_spec(SPEC)))
    for line in ("attn_mask: pypto.Tensor((TQ, SKV), pypto.DT_BOOL),",
                 "mask_2d = attn_mask",
                 "hidden = pypto.view(mask_2d, [Q_TILE, KV_TILE], [q_start + q_off, kv_off], "
                 "valid_shape=[q_valid, kv_valid])",
                 "kv_start = actual_seq_kv[(b - 1).max(0)] * b.min(1)"):
        assert line in kernel, line
    assert "b * seq_q" not in kernel
    compile(kernel, "kernel.py", "exec")


def test_scaffold_quick_passes(generated):
    lines = scaffold_lines(generated, "tensor_mask_tnd", 2, quick=True)
    assert "[quick: batch 4 -> 2, seq_q 1024 -> 384, seq_kv 1024 -> 384] PASS" in lines[0]


@pytest.mark.slow
def test_scaffold_full_size_passes(generated):
    scaffold_lines(generated, "tensor_mask_tnd", 2, quick=False)


@pytest.mark.pypto
@needs_pypto
def test_mask_tnd_kernel_compiles_simulates_and_verifies(generated):
    assert_verifies(generated, ["func_b4_s1024", "func_b3_q300_kv700"])
