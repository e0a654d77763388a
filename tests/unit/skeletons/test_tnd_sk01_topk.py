"""SK-01 with layout TND and top-k (the Sparse Attn fallback when SK-02's conditions fail): topk_indices
[T_q, topk] holds each packed query token's picks as positions of its own batch's KV, as SK-02's TND does.
Plan, DESIGN.md, interfaces, scaffold and kernel of tests/fixtures/sk01/sparse_topk_tnd_fallback.yaml."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO, run_cli
from tnd_support import assert_verifies, needs_pypto, new_folder, scaffold_lines

from opdesign.render.design import render_kernel
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

SPEC = REPO / "tests" / "fixtures" / "sk01" / "sparse_topk_tnd_fallback.yaml"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return new_folder(tmp_path_factory, SPEC, "sparse_topk_tnd_fallback")


def test_sk02_rejects_the_run_time_topk_and_sk01_plans_the_packed_fallback():
    plan = estimate(load_spec(SPEC))
    assert (plan.skeleton.id, plan.layout, plan.variant, plan.fallback_from) == ("SK-01", "TND", "Sparse Attn", "SK-02")
    assert [(c.id, c.passed) for c in plan.skeleton_checks][:1] == [("SK-02-COND-1", False)]
    assert plan.batch_lengths == {"seq_q": "actual_seq_q", "seq_kv": "actual_seq_kv"}
    assert [(t.name, t.shape, t.dtype) for t in plan.primary_inputs][-1] == (
        "topk_indices", ["batch * seq_q", "topk"], "int32")


def test_new_writes_a_design_that_validates(generated):
    res = run_cli("validate", str(generated))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout
    design = (generated / "DESIGN.md").read_text(encoding="utf-8")
    assert "| topk_indices | input | [batch * seq_q, topk] | int32 | - |" in design
    assert "row `cum_q[b-1] + r` holds query `r`'s picks as positions of batch `b`'s own KV" in design
    interfaces = yaml.safe_load((generated / "eval" / "module_interfaces.yaml").read_text())
    assert [t["name"] for t in interfaces["primary_inputs"]] == [
        "q", "k", "v", "actual_seq_q", "actual_seq_kv", "topk_indices"]


def test_kernel_views_the_picks_at_the_packed_row():
    kernel = render_kernel(estimate(load_spec(SPEC)))
    for line in ("topk_indices: pypto.Tensor((TQ, TOPK), pypto.DT_INT32),",
                 "topk = topk_indices.shape[1]",
                 "idx_2d = topk_indices",
                 "idx_t = pypto.view(idx_2d, [Q_TILE, TOPK_MAX], [q_start + q_off, 0], valid_shape=[q_valid, topk])",
                 "kv_start = actual_seq_kv[(b - 1).max(0)] * b.min(1)"):
        assert line in kernel, line
    assert "b * seq_q" not in kernel
    compile(kernel, "kernel.py", "exec")


def test_scaffold_quick_passes(generated):
    scaffold_lines(generated, "sparse_topk_tnd_fallback", 2, quick=True)


@pytest.mark.slow
def test_scaffold_full_size_passes(generated):
    scaffold_lines(generated, "sparse_topk_tnd_fallback", 2, quick=False)


@pytest.mark.pypto
@needs_pypto
def test_topk_tnd_kernel_compiles_simulates_and_verifies(generated):
    assert_verifies(generated, ["func_b4_q4_kv1024", "func_b3_q2_kv300"])
