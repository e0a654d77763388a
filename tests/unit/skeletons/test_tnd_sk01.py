"""SK-01 with layout TND (packed varlen batches): plan, DESIGN.md, interfaces, scaffold and kernel of the
causal GQA prefill fixture (4 batches of 1..4096 tokens), and the variants TND refuses by field."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml
from conftest import EXAMPLES, REPO, run_cli
from tnd_support import assert_verifies, needs_pypto, new_folder, scaffold_lines

from opdesign.errors import SpecError
from opdesign.render.design import render_kernel
from opdesign.render.phrases import say
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec, parse_spec

SPEC = REPO / "tests" / "fixtures" / "sk01" / "causal_gqa_tnd.yaml"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return new_folder(tmp_path_factory, SPEC, "causal_gqa_tnd")


def test_plan_is_the_baseline_with_packed_counts():
    plan = estimate(load_spec(SPEC))
    assert (plan.skeleton.id, plan.layout, plan.form) == ("SK-01", "TND", "baseline")
    perf1 = next(c for c in plan.form_checks if c.id == "SK-01-PERF-1")
    assert not perf1.passed and say(perf1.observed) == (
        "layout TND packs the batches, so each batch's K length is read at run time from the cumulative actual_seq_kv")
    assert plan.batch_lengths == {"seq_q": "actual_seq_q", "seq_kv": "actual_seq_kv"}
    assert plan.config["runtime_options"]["ready_on_host_tensors"] == ["actual_seq_q", "actual_seq_kv"]
    counts = {d.name: d.value for d in plan.counts}
    # every batch at the typical per-batch maximum 4096: 4 x 8 heads x 64 Q tiles of 64 rows
    assert (plan.q_tile, plan.kv_tile, plan.root_count) == (64, 128, 4 * 8 * 64)
    assert counts["t_q_max"] == counts["t_kv_max"] == 4 * 4096
    assert [(t.name, t.shape) for t in plan.primary_inputs][:3] == [
        ("q", ["batch * seq_q", "num_heads", "head_dim"]), ("k", ["batch * seq_kv", "num_kv_heads", "head_dim"]),
        ("v", ["batch * seq_kv", "num_kv_heads", "head_dim"])]


def test_new_writes_a_design_that_validates_in_both_languages(generated, tmp_path):
    res = run_cli("validate", str(generated))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout
    en = tmp_path / "en"
    assert run_cli("new", "--spec", str(SPEC), "--out", str(en), "--lang", "en").returncode == 0
    res = run_cli("validate", str(en))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout
    design = (generated / "DESIGN.md").read_text(encoding="utf-8")
    assert "| q | input | [batch * seq_q, num_heads, head_dim] | bfloat16 | TND |" in design
    assert "| [T_q <= 16384, 8, 128] |" in design and "[cum[b-1], cum[b])" in design
    interfaces = yaml.safe_load((generated / "eval" / "module_interfaces.yaml").read_text())
    assert [t["name"] for t in interfaces["primary_inputs"]] == ["q", "k", "v", "actual_seq_q", "actual_seq_kv"]
    assert interfaces["final_outputs"] == [{"name": "attn_out", "source": "module_1"}]


def test_kernel_reads_the_cumulative_offsets_per_batch():
    kernel = render_kernel(estimate(load_spec(SPEC)))
    for line in ("q: pypto.Tensor((TQ, NH, HEAD_DIM), pypto.DT_BF16),",
                 "batch = actual_seq_q.shape[0]",
                 "q_start = actual_seq_q[(b - 1).max(0)] * b.min(1)",
                 "kv_len = actual_seq_kv[b] - kv_start",
                 "[q_start + q_off, h * HEAD_DIM], valid_shape=[q_valid, HEAD_DIM])",
                 "[kv_start + kv_off, kv_h * HEAD_DIM], valid_shape=[kv_valid, HEAD_DIM])",
                 "pypto.assemble(o_3d, [q_start + q_off, h, 0], attn_out)"):
        assert line in kernel, line
    compile(kernel, "kernel.py", "exec")


def test_scaffold_quick_passes_and_shrinks_the_batches(generated):
    lines = scaffold_lines(generated, "causal_gqa_tnd", 3, quick=True)
    assert "[quick: batch 4 -> 2, seq_q 4096 -> 384, seq_kv 4096 -> 384] PASS" in lines[0]


@pytest.mark.slow
def test_scaffold_full_size_passes(generated):
    scaffold_lines(generated, "causal_gqa_tnd", 3, quick=False)


def _tnd(example, **changes):
    data = copy.deepcopy(yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())) | {"layout": "TND"} | changes
    return parse_spec(data)


@pytest.mark.parametrize("example, changes, message", [
    ("paged_fp8_decode", {"kv_cache": "contiguous"}, "kv_cache: 'contiguous' is not planned by SK-01 with layout TND "
                                                     "and quant fp8 in this version of opdesign (supported: paged)"),
])
def test_unplanned_tnd_variants_name_their_field(example, changes, message):
    with pytest.raises(SpecError) as err:
        estimate(_tnd(example, **changes))
    assert err.value.message.startswith(message), err.value.message


@pytest.mark.parametrize("mask, extra", [("none", {}), ("sliding_window", {"window": 256})])
def test_other_planned_masks_render_and_validate(tmp_path, mask, extra):
    data = yaml.safe_load(SPEC.read_text())
    data["mask"] = mask
    data["shape"] |= extra
    data["typical_configs"] = data["typical_configs"][1:2]
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert run_cli("new", "--spec", str(spec), "--out", str(out)).returncode == 0
    assert run_cli("validate", str(out)).returncode == 0
    res = subprocess.run([sys.executable, str(out / "causal_gqa_tnd_scaffold.py"), "--quick"],
                         capture_output=True, text=True, timeout=600)
    assert (res.returncode == 0
            and res.stdout.splitlines()[-1] == "self-check: 1 of 1 configs within tolerance"), res.stdout


@pytest.mark.pypto
@needs_pypto
def test_tnd_kernel_compiles_simulates_and_verifies(generated):
    assert_verifies(generated, ["func_b4_s4096", "func_b3_s1000", "func_b2_q300_kv700"])
