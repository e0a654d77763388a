"""SK-02 single-pass top-k sparse attention: the plan, the UB formula, the SK-01 fallback, the
artifacts (validate clean, scaffold self-check), broken scaffold variants and the SK-02 validator rules."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys

import pytest
import yaml
from conftest import EXAMPLES, run_cli, spec_variant

import opdesign.skeletons.sk02.plan as sk02
from opdesign.catalog import load_catalog
from opdesign.errors import SpecError
from opdesign.render.design import render_all, render_scaffold
from opdesign.skeletons import registry
from opdesign.skeletons.registry import estimate
from opdesign.skeletons.sk02 import budget
from opdesign.spec import load_spec, parse_spec
from opdesign.validate import validate_text

SPARSE = load_spec(EXAMPLES / "sparse_topk_2048.yaml")


def _variant(**changes):
    return spec_variant(SPARSE, **changes)


def _run(script: str, tmp_path, name: str = "op_scaffold.py") -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(script, encoding="utf-8")
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)


# --- plan ---------------------------------------------------------------------------


def test_example_plans_sk02_single_pass():
    plan = estimate(SPARSE)
    assert plan.skeleton.id == "SK-02" and plan.fallback_from is None
    assert [c.id for c in plan.skeleton_checks if c.passed] == ["SK-02-COND-1", "SK-02-COND-2", "SK-02-COND-3"]
    # no KV loop, no accumulators, no unroll (SK-02-R3)
    assert (plan.kv_loop, plan.state, plan.unroll.unroll_list, plan.kv_tiles) == ("none", [], [], 1)
    assert plan.design_block()["accumulators"] == {}
    # S2_TILE = align16(2048); 16 heads share the KV head, halved to 8 rows so UB fits
    assert (plan.topk, plan.kv_tile, plan.q_tile, plan.q_tiles) == (2048, 2048, 8, 2)
    assert plan.root_count == plan.task_count == 4 * 4 * 1 * 2
    assert plan.work_per_root_macs == 8 * 2048 * 512
    # one cube tile for C1 and C2, one vector tile: set once outside the loops (SK-02-R5)
    assert plan.cube_tiles["C1"].m == (16, 16) and plan.cube_tiles["C1"].k == plan.cube_tiles["C1"].n == (128, 128)
    assert (plan.cube_tiles["C1"].model_dump(exclude={"stage", "reason"})
            == plan.cube_tiles["C2"].model_dump(exclude={"stage", "reason"}))
    assert plan.vec_tiles["V1"].shape == plan.vec_tiles["V2"].shape == (8, 128)
    assert plan.vec_tiles["V1"].view == (8, 2048) and plan.vec_tiles["V2"].view == (8, 512)
    # card configuration: vec_nbuffer {-1: 4} and stitch 128 required, sg_set_scope 2, kv_act_seqs on the host
    assert plan.config["pass_options"] == {"cube_l1_reuse_setting": {0: 4}, "cube_nbuffer_setting": {1: 2},
                                           "vec_nbuffer_setting": {-1: 4}}
    assert plan.config["runtime_options"] == {"stitch_function_max_num": 128, "ready_on_host_tensors": ["kv_act_seqs"]}
    assert {e.key: e.value for e in plan.config_entries}["sg_set_scope"] == 2
    counts = {d.name: d.value for d in plan.counts}
    assert counts["normalisation"] == "after_pv" and counts["head_loop"] == "range" and counts["seq_kv_max"] == 4096
    inputs = {t.name: (t.shape, t.dtype) for t in plan.primary_inputs}
    assert inputs["topk_indices"] == (["batch", "seq_q", "topk"], "int32")
    assert inputs["kv_act_seqs"] == (["batch"], "int32")
    assert [a.id for a in plan.atoms] == ["AT-12", "AT-02", "AT-13", "AT-20", "AT-21"]


def test_ub_formula_items_and_why_q_tile_halves():
    plan = estimate(SPARSE)
    items = {i.name: i.bytes for i in plan.ub_budget.items}
    rows = 8 // 2  # q_tile over the 2 vector sub-blocks
    assert items == {
        "topk_index_row": 2048 * 4,
        "kv_gather_tiles": 2 * 8 * 128 * 2 * 2,  # K and V gather tile, bf16, tensor_count.unary
        "scores_row": rows * 2048 * 4 * 2,  # whole FP32 row, two result buffers
        "p_cast": rows * 2048 * 2,
        "row_stats": 2 * rows * 32,
        "vector_op_peak": 8 * 128 * 4 * 4,  # V1 reduce
        "MM2_RESULT_SIZE": rows * 512 * 4 * 2,
    }
    assert plan.ub_budget.total_bytes == 131328 <= plan.ub_budget.capacity_bytes == 196608
    assert plan.l1_budget.total_bytes == (16 * 128 + 128 * 128) * 2 * 2 + 16 * 128 * 2 * 3  # nbuffer 2, MM2_LEFT
    # the first candidate, all 16 heads of the group, needs 254464 B > 192 KiB
    fit16 = sk02._fit(SPARSE, load_catalog().device("a3"), load_catalog().card("SK-02"), 16, 2048)
    assert fit16.ub.total_bytes == 254464 and not fit16.ub.fits
    assert "halved to 8" in plan.tile_decisions[0].basis


def test_many_kv_heads_use_pypto_loop_and_validate_clean():
    spec = _variant(shape__num_heads=128, shape__num_kv_heads=8, typical_configs=[
        {"name": "func_mha8", "type": "functional", "priority": "P0", "shape": {"batch": 1, "seq_q": 1}}])
    plan = estimate(spec)
    counts = {d.name: d.value for d in plan.counts}
    assert plan.skeleton.id == "SK-02" and counts["head_loop"] == "pypto.loop"
    assert "16 head-tile iterations" in next(d.basis for d in plan.counts if d.name == "head_loop")
    files = render_all(plan)
    assert 'for kv_h in pypto.loop(NUM_KV_HEADS, name="LOOP_kv_head"):' in files["DESIGN.md"]
    report = validate_text(files["DESIGN.md"], interfaces_text=files["eval/module_interfaces.yaml"])
    assert report.findings == []


@pytest.mark.slow
def test_before_pv_normalisation_scaffold_passes(tmp_path):
    """head_dim >= S2_TILE divides P before PV; the scaffold still matches the golden."""
    spec = _variant(shape__topk=64, shape__head_dim=128, shape__seq_kv=200,
                    dynamic_axes=[{"name": "seq_kv", "range": [1, 200], "uniform": False}],
                    typical_configs=[{"name": "func_small", "type": "functional", "priority": "P0"}])
    plan = estimate(spec)
    assert next(d.value for d in plan.counts if d.name == "normalisation") == "before_pv"
    assert plan.kv_tile == 64 and plan.skeleton.id == "SK-02"
    res = _run(render_scaffold(plan), tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 of 1 configs within tolerance" in res.stdout


# --- fallback to SK-01 ----------------------------------------------------------------


def _expect_fallback(spec, monkeypatch, failed_id: str) -> None:
    """estimate() hands the SPEC to the fallback (SK-01) planner with fallback_from and the failed condition."""
    seen = {}

    def fake_sk01(spec_arg, golden=None, **overrides):
        seen.update(overrides)
        return "sk01-plan"

    monkeypatch.setattr(registry, "FALLBACK", dataclasses.replace(registry.FALLBACK, plan=fake_sk01))
    assert estimate(spec) == "sk01-plan"
    assert seen["fallback_from"] == "SK-02"
    assert [c.id for c in seen["skeleton_checks"] if not c.passed] == [failed_id]


def test_topk_too_large_for_ub_falls_back_naming_condition_2(monkeypatch):
    spec = _variant(shape__topk=16384, shape__seq_kv=32768,
                    dynamic_axes=[{"name": "seq_kv", "range": [1, 32768], "uniform": False}])
    checks = sk02.sk02_checks(spec)
    c2 = next(c for c in checks if c.id == "SK-02-COND-2")
    assert not c2.passed and [c.passed for c in checks] == [True, False, True]
    # even one query row needs 14 B per top-k slot (index 4, scores 2 x 4, P 2) > 192 KiB
    one_row = 16384 * 4 + 2 * 1 * 128 * 2 * 2 + 16384 * 4 * 2 + 16384 * 2 + 2 * 32 + 1 * 128 * 4 * 4 + 512 * 4 * 2
    assert one_row == 236608
    assert c2.observed == f"UB {one_row} B > 196608 B even at q_tile 1 (S2_TILE 16384)"
    _expect_fallback(spec, monkeypatch, "SK-02-COND-2")


def test_runtime_topk_falls_back_naming_condition_1(monkeypatch):
    spec = _variant(dynamic_axes=[{"name": "topk", "range": [256, 2048], "uniform": True},
                                  {"name": "seq_kv", "range": [1, 4096], "uniform": False}])
    c1 = sk02.sk02_checks(spec)[0]
    assert (c1.id, c1.passed) == ("SK-02-COND-1", False)
    assert c1.observed == "topk is a dynamic axis in [256, 2048]: the top-k count is a runtime value"
    _expect_fallback(spec, monkeypatch, "SK-02-COND-1")


def test_configs_with_different_topk_fall_back_naming_condition_1(monkeypatch):
    data = copy.deepcopy(SPARSE.model_dump(mode="json", exclude_none=True))
    data["typical_configs"][1]["shape"]["topk"] = 1024
    spec = parse_spec(data)
    assert "typical configs use topk [1024, 2048]" in sk02.sk02_checks(spec)[0].observed
    _expect_fallback(spec, monkeypatch, "SK-02-COND-1")


def test_real_fallback_reaches_sk01_or_names_its_scope():
    """Through the real SK-01 planner: an SK-01 plan that records the SK-02 fallback, or (while
    SK-01 does not plan mask topk yet) a SpecError naming the mask field."""
    spec = _variant(shape__topk=16384, shape__seq_kv=32768,
                    dynamic_axes=[{"name": "seq_kv", "range": [1, 32768], "uniform": False}])
    try:
        plan = estimate(spec)
    except SpecError as err:
        assert str(err).startswith("mask: 'topk'")
        return
    assert plan.skeleton.id == "SK-01" and plan.fallback_from == "SK-02"
    assert [c.id for c in plan.skeleton_checks if not c.passed] == ["SK-02-COND-2"]


def test_spec_topk_axis_needs_topk_mask_and_scope_is_named():
    data = copy.deepcopy(load_spec(EXAMPLES / "causal_gqa_tail.yaml").model_dump(mode="json", exclude_none=True))
    data["dynamic_axes"].append({"name": "topk", "range": [1, 8], "uniform": True})
    with pytest.raises(SpecError, match=r"dynamic_axes: a topk axis needs mask: topk"):
        parse_spec(data)
    with pytest.raises(SpecError, match=r"^kv_cache: 'paged' is not planned by SK-02 \(mask topk\)"):
        estimate(_variant(kv_cache="paged", shape__block_size=128))


# --- artifacts ------------------------------------------------------------------------


@pytest.mark.slow
def test_new_validate_and_scaffold_self_check(tmp_path):
    out = tmp_path / "sparse"
    res = run_cli("new", "--spec", str(EXAMPLES / "sparse_topk_2048.yaml"), "--out", str(out))
    assert res.returncode == 0, res.stderr
    res = run_cli("validate", str(out), "--format", "json")
    report = yaml.safe_load(res.stdout)
    assert res.returncode == 0 and report["findings"] == [], res.stdout
    proc = subprocess.run([sys.executable, str(out / "sparse_topk_2048_scaffold.py")], capture_output=True,
                          text=True, timeout=300, cwd=out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "self-check: 3 of 3 configs within tolerance"
    assert "non-finite=0 skipped tokens (cur_seq == 0)=3 effective topk in [0, 2048] PASS" in lines[0]
    assert "non-finite=0 skipped tokens (cur_seq == 0)=1 effective topk in [0, 1500] PASS" in lines[1]


BROKEN = {  # name: (original line, broken line, configs that must FAIL)
    # gather ignoring the indices: the first rows of the cache instead of the picked ones (a config whose
    # indices pick every visible position, seq_kv < topk, cannot tell the difference)
    "gather_ignores_indices": ("    return cache[np.maximum(idx, 0)]",
                               "    return cache[np.arange(idx.shape[0]) % cache.shape[0]]",
                               {"func_decode_mtp4", "perf_decode_b8"}),
    # no cur_seq == 0 skip: the empty row's softmax divides 0 by 0 (only configs with such tokens)
    "empty_rows_not_skipped": ("            if cur_seq == 0:", "            if False:",
                               {"func_decode_mtp4", "func_gqa_short_kv"}),
    # -1 / padding slots read as keys: valid_shape ignored
    "padding_slots_counted": ("                    ok = cols < cur_seq", "                    ok = cols < S2_TILE",
                              {"func_decode_mtp4", "func_gqa_short_kv", "perf_decode_b8"}),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
@pytest.mark.slow
def test_broken_scaffold_variant_fails_its_self_check(name, tmp_path):
    script = render_scaffold(estimate(SPARSE))
    old, new, failing = BROKEN[name]
    assert script.count(old) == 1
    res = _run(script.replace(old, new), tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert {line.split(":")[0] for line in lines if line.endswith(" FAIL")} == failing
    assert lines[-1] == f"self-check: {3 - len(failing)} of 3 configs within tolerance"
    if name == "empty_rows_not_skipped":  # NaN rows, reported as such
        assert all("non-finite=0 " not in line for line in lines if line.endswith(" FAIL"))


# --- validator ------------------------------------------------------------------------


def _design() -> tuple[str, str]:
    files = render_all(estimate(SPARSE))
    return files["DESIGN.md"], files["eval/module_interfaces.yaml"]


@pytest.mark.parametrize("old, new, needle", [
    ("  accumulators: {}", "  accumulators: {oi: fp32}", "  accumulators: {oi: fp32}"),
    ("  unroll_list: []", "  unroll_list: [1]", "  unroll_list: [1]"),
    ("                        pypto.set_pass_options(sg_set_scope=2)\n",
     "                        mi = pypto.full([Q_TILE, 1], -3.4e38, pypto.DT_FP32)\n"
     "                        pypto.set_pass_options(sg_set_scope=2)\n",
     "mi = pypto.full("),
    ("                for kv_h in range(NUM_KV_HEADS):",
     "                for kv_h, _f in pypto.loop_unroll(NUM_KV_HEADS, unroll_list=[1]):",
     "pypto.loop_unroll(NUM_KV_HEADS"),
    ("            if cur_seq > 0:", "            if pypto.is_loop_begin(s_idx):", "is_loop_begin(s_idx)"),
])
def test_sk02_r3_flags_kv_loop_state_and_unroll(old, new, needle):
    text, iface = _design()
    assert text.count(old) == 1
    bad = text.replace(old, new)
    line = next(n for n, row in enumerate(bad.splitlines(), start=1) if needle in row)
    report = validate_text(bad, interfaces_text=iface)
    hits = [f for f in report.findings if f.rule == "SK-02-R3"]
    assert line in [f.line for f in hits] and all(f.level == "error" for f in hits), report.findings
    assert report.exit_code == 1


def test_sk02_gather_in_ub_is_not_flagged_but_sk01_is():
    """AT-17-R4 forbids gather_in_ub in SK-01 designs only: SK-02's top-k load may use it (domain.md §5)."""
    text, iface = _design()
    old = "k_sel = pypto.index_select(k_b, 0, idx)"
    sk02_text = text.replace(old, "k_sel = pypto.experimental.gather_in_ub(k_b, idx, kv_block_table, SEQ_KV_MAX, -2)")
    assert sk02_text != text
    assert validate_text(sk02_text, interfaces_text=iface).findings == []
    sk01_text = sk02_text.replace("  skeleton: SK-02\n", "  skeleton: SK-01\n", 1)
    assert "AT-17-R4" in {f.rule for f in validate_text(sk01_text, interfaces_text=iface).findings}


def test_sk02_budget_is_re_derived_by_the_validator():
    text, iface = _design()
    bad = text.replace("    total_bytes: 131328", "    total_bytes: 120000", 1)
    report = validate_text(bad, interfaces_text=iface)
    assert any(f.rule == "OD-NUM-05" and "the tiles give 131328 B" in f.message for f in report.findings)
    assert budget.single_pass_ub_budget(load_catalog().device("a3"), q_tile=8, s2_tile=2048, head_dim=512, dtype="bf16",
                                        vec=estimate(SPARSE).vec_tiles).total_bytes == 131328
