"""SK-01 with layout TND and a paged KV cache: packed query rows (cumulative actual_seq_q), K / V pages read
through block_table with per-batch kv_act_seqs (the paged path's lengths). Plan, DESIGN.md, interfaces,
scaffold and kernel of tests/fixtures/sk01/paged_tnd.yaml."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO, run_cli
from tnd_support import assert_verifies, needs_pypto, new_folder, scaffold_lines

from opdesign.plan.fields import cumulative_lengths
from opdesign.render.design import render_kernel
from opdesign.render.phrases import say
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

SPEC = REPO / "tests" / "fixtures" / "sk01" / "paged_tnd.yaml"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return new_folder(tmp_path_factory, SPEC, "paged_tnd")


def test_plan_packs_q_and_keeps_per_batch_kv_lengths():
    spec = load_spec(SPEC)
    plan = estimate(spec)
    assert (plan.skeleton.id, plan.layout, plan.kv_cache, plan.form) == ("SK-01", "TND", "paged", "baseline")
    assert plan.batch_lengths == {"seq_q": "actual_seq_q", "seq_kv": "kv_act_seqs"}
    assert cumulative_lengths(spec) == ("actual_seq_q",)  # kv_act_seqs stays per-batch lengths
    perf1 = next(c for c in plan.form_checks if c.id == "SK-01-PERF-1")
    assert not perf1.passed and say(perf1.observed) == (
        "layout TND packs the query batches and each batch's paged K length is read at run time from kv_act_seqs")
    assert plan.config["runtime_options"]["ready_on_host_tensors"] == ["block_table", "actual_seq_q", "kv_act_seqs"]
    counts = {d.name: d.value for d in plan.counts}
    # 4 batches at the per-batch maximum 1024 query rows: 4 x 8 heads x 16 Q tiles of 64 rows
    assert (plan.q_tile, plan.kv_tile, plan.root_count) == (64, 128, 4 * 8 * 16)
    assert counts["t_q_max"] == 4 * 1024 and "t_kv_max" not in counts  # paged K / V rows are not packed
    assert (counts["seq_kv_paged"], counts["pages_per_kv_tile"]) == (2048, 1)
    assert [(t.name, t.shape) for t in plan.primary_inputs] == [
        ("q", ["batch * seq_q", "num_heads", "head_dim"]),
        ("k_cache", ["num_blocks", "block_size", "num_kv_heads", "head_dim"]),
        ("v_cache", ["num_blocks", "block_size", "num_kv_heads", "head_dim"]),
        ("block_table", ["batch", "max_blocks_per_seq"]), ("actual_seq_q", ["batch"]), ("kv_act_seqs", ["batch"])]


def test_new_writes_a_design_that_validates(generated):
    res = run_cli("validate", str(generated))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout
    design = (generated / "DESIGN.md").read_text(encoding="utf-8")
    assert "| q | input | [batch * seq_q, num_heads, head_dim] | bfloat16 | TND |" in design
    assert "Layout TND (packed varlen) with a paged KV cache" in design
    assert "its KV length is `kv_act_seqs[b]`, a per-batch length (not cumulative)" in design
    interfaces = yaml.safe_load((generated / "eval" / "module_interfaces.yaml").read_text())
    assert [t["name"] for t in interfaces["primary_inputs"]] == [
        "q", "k_cache", "v_cache", "block_table", "actual_seq_q", "kv_act_seqs"]


def test_kernel_offsets_q_by_the_cumulative_rows_and_gathers_pages():
    kernel = render_kernel(estimate(load_spec(SPEC)))
    for line in ("q: pypto.Tensor((TQ, NH, HEAD_DIM), pypto.DT_BF16),",
                 "k_cache: pypto.Tensor((NBLK, BLOCK_SIZE, NKV, HEAD_DIM), pypto.DT_BF16),",
                 "q_start = actual_seq_q[(b - 1).max(0)] * b.min(1)",
                 "q_len = actual_seq_q[b] - q_start",
                 "kv_len = kv_act_seqs[b]",
                 "col = (kj * PAGES_PER_TILE + i).min(max_blocks - 1)", "page = block_table[b, col].max(0)",
                 "[q_start + q_off, h * HEAD_DIM], valid_shape=[q_valid, HEAD_DIM])",
                 "pypto.assemble(o_3d, [q_start + q_off, h, 0], attn_out)"):
        assert line in kernel, line
    assert "kv_start" not in kernel and "actual_seq_kv" not in kernel
    compile(kernel, "kernel.py", "exec")


def test_scaffold_quick_passes(generated):
    lines = scaffold_lines(generated, "paged_tnd", 2, quick=True)
    assert "[quick: batch 4 -> 2, seq_q 1024 -> 384, seq_kv 2048 -> 385] PASS" in lines[0]


@pytest.mark.slow
def test_scaffold_full_size_passes(generated):
    scaffold_lines(generated, "paged_tnd", 2, quick=False)


@pytest.mark.pypto
@needs_pypto
def test_paged_tnd_kernel_compiles_simulates_and_verifies(generated):
    assert_verifies(generated, ["func_b4_q1024_kv2048", "func_b3_q300_kv700"])


# --- the PageAttn FP8 row on packed Q (a5): PyPTO 0.2.0 ships only the A2/A3 platform, so an FP8 kernel cannot
# compile here (tests/e2e/pypto/test_kernels_pypto.py pins that refusal); the scaffold is the numeric check.
FP8_SPEC = REPO / "tests" / "fixtures" / "sk01" / "paged_fp8_tnd.yaml"


@pytest.fixture(scope="module")
def generated_fp8(tmp_path_factory):
    return new_folder(tmp_path_factory, FP8_SPEC, "paged_fp8_tnd")


def test_fp8_plan_keeps_the_paged_scales():
    plan = estimate(load_spec(FP8_SPEC))
    assert (plan.layout, plan.kv_cache, plan.quant, plan.variant) == ("TND", "paged", "fp8", "PageAttn FP8")
    assert plan.batch_lengths == {"seq_q": "actual_seq_q", "seq_kv": "kv_act_seqs"}
    inputs = {t.name: (t.shape, t.dtype, t.storage_of) for t in plan.primary_inputs}
    assert inputs["q"][0] == ["batch * seq_q", "num_heads", "head_dim"]
    assert inputs["v_cache"][1:] == ("int8", "float8_e4m3")
    assert inputs["v_inv_scale"] == (["num_blocks", "num_kv_heads", "block_size"], "float32", None)


def test_fp8_design_and_kernel_validate(generated_fp8):
    res = run_cli("validate", str(generated_fp8))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout
    kernel = (generated_fp8 / "paged_fp8_tnd_kernel.py").read_text(encoding="utf-8")
    for line in ("q_start = actual_seq_q[(b - 1).max(0)] * b.min(1)",
                 "kv_len = kv_act_seqs[b]",
                 "vs_2d = pypto.reshape(v_inv_scale, [num_blocks * num_kv_heads, BLOCK_SIZE], inplace=True)",
                 "vs_page = pypto.view(vs_2d, [1, BLOCK_SIZE], [page * num_kv_heads + kv_h, 0])",
                 "p_c = pypto.cast(pypto.mul(pypto.div(p_v, p_amax), FP8_MAX), pypto.DT_FP8E4M3)"):
        assert line in kernel, line
    compile(kernel, "kernel.py", "exec")


def test_fp8_scaffold_quick_passes_against_its_rounding_model(generated_fp8):
    lines = scaffold_lines(generated_fp8, "paged_fp8_tnd", 2, quick=True)
    assert all(" model_err=" in line and "(bound 7.812e-03)" in line for line in lines[:2]), lines


@pytest.mark.slow
def test_fp8_scaffold_full_size_passes(generated_fp8):
    scaffold_lines(generated_fp8, "paged_fp8_tnd", 2, quick=False)


@pytest.mark.pypto
@needs_pypto
def test_fp8_kernel_is_refused_by_the_release_platform(generated_fp8):
    """The FP8E4M3 matmul of the kernel is refused while the graph is built (only DAV_3510 takes it)."""
    from opdesign.pypto_run.design import verify_dir

    report = verify_dir(generated_fp8, quick=True, verify=False, configs=["func_b3_q16_kv1000"])
    assert not report.compiled and not report.passed
    assert any("FC3000" in e.message and "only DAV_3510 architecture is supported" in e.message
               for e in report.errors), report.errors
    assert report.configs[0].sim_us is None
