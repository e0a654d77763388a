"""Estimator: form choice, tiles, counts and budgets on real SPECs."""

from __future__ import annotations

import json
from math import ceil

import pytest
from conftest import EXAMPLES, run_cli, spec_variant

from opdesign.catalog import load_catalog
from opdesign.errors import SpecError
from opdesign.render.phrases import say
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec, parse_spec

DENSE = load_spec(EXAMPLES / "dense_fa_8192.yaml")
CAUSAL = load_spec(EXAMPLES / "causal_gqa_tail.yaml")


_variant = spec_variant


def test_dense_8192_takes_the_performance_form():
    plan = estimate(DENSE)
    assert plan.form == "performance"
    assert all(c.passed for c in plan.form_checks)
    assert (plan.q_tile, plan.kv_tile, plan.q_tiles, plan.kv_tiles) == (4096, 1024, 2, 8)
    assert 16 <= plan.root_count <= 256 and plan.root_count == 1 * 8 * 2
    assert plan.task_count == 16 * 8
    assert plan.kv_loop == "range"
    assert plan.unroll.unroll_list == [1]
    # SSA state adds no resident buffer (SK-01 perf invariant 3)
    assert not any(i.name.endswith("_resident") for i in plan.ub_budget.items)
    assert plan.ub_budget.total_bytes == sum(i.bytes for i in plan.ub_budget.items) <= 196608


def test_fp32_dense_falls_back_to_the_baseline_naming_the_overflowing_budget(tmp_path):
    """Issue 13 deliverable 6: all four conditions hold, but the performance tiles overflow L1 in FP32."""
    spec = _variant(DENSE, dtype="fp32")
    plan = estimate(spec)
    assert all(c.passed for c in plan.form_checks)
    # 128 overflows UB once FAI sumUb/maxUb/expUb are counted
    assert plan.form == "baseline" and (plan.q_tile, plan.kv_tile) == (64, 128)
    assert plan.ub_budget.fits and plan.l1_budget.fits and all(b.fits for b in plan.l0_budgets)
    reason = say(plan.form_reason)
    assert reason == ("safe baseline: the four SK-01 performance-form conditions hold, but the performance tiles "
                      "q_tile 4096, kv_tile 1024 have no legal tiling (L1 720896 B > 524288 B; C-TILE-03), "
                      "so the design goes back to the baseline")
    from opdesign.render.design import render_design

    assert f"Form: **baseline** ({reason})." in render_design(plan)


def test_head_dim_256_falls_back_to_baseline_naming_condition_2():
    plan = estimate(_variant(DENSE, shape__head_dim=256, shape__num_heads=8))
    assert plan.form == "baseline"
    failed = [c.id for c in plan.form_checks if not c.passed]
    assert failed == ["SK-01-PERF-2"]
    assert "SK-01-PERF-2" in say(plan.form_reason) and "head_dim = 256" in say(plan.form_reason)
    # oi for head_dim 256 does not fit next to the FAI result buffers at q_tile 128 (C-TILE-03)
    assert (plan.q_tile, plan.kv_tile) == (64, 128)
    assert "halved to 64" in say(plan.tile_decisions[0].basis)
    assert plan.ub_budget.total_bytes <= plan.ub_budget.capacity_bytes


def test_non_uniform_varlen_falls_back_naming_condition_1():
    spec = _variant(DENSE, dynamic_axes=[{"name": "seq_kv", "range": [512, 8192], "uniform": False}])
    plan = estimate(spec)
    assert plan.form == "baseline"
    assert [c.id for c in plan.form_checks if not c.passed] == ["SK-01-PERF-1"]
    assert "non-uniform varlen" in say(plan.form_reason)


def test_missing_performance_target_falls_back_naming_condition_4():
    data = DENSE.model_dump(mode="json", exclude_none=True)
    del data["performance"]
    plan = estimate(parse_spec(data))
    assert [c.id for c in plan.form_checks if not c.passed] == ["SK-01-PERF-4"]


def test_causal_gqa_tail_counts_and_budget():
    plan = estimate(CAUSAL)
    assert plan.form == "baseline"
    # the 128 tile needs 211200 B of UB with FAI's sumUb / maxUb / expUb x KERNEL_TASK_NUM (3 x 64 x 32 x 3
    # = 18432 B) against 196608 B, so the baseline halves Q_TILE and says which reading forced it
    assert (plan.q_tile, plan.kv_tile) == (64, 128)
    assert "sumUb / maxUb / expUb x KERNEL_TASK_NUM add 18432 B" in say(plan.tile_decisions[0].basis)
    assert "UB 211200 B > 196608 B" in say(plan.tile_decisions[0].basis)
    assert plan.q_tiles == ceil(1000 / 64) == 16
    assert plan.root_count == 2 * 8 * 16
    # causal: q block i (64 rows) sees ceil((i + 1) / 2) KV blocks of 128, so 2 x (1+...+8) = 72 per (batch, head)
    assert plan.task_count == 2 * 8 * 72
    assert plan.group_size == 4
    ub = {i.name: i.bytes for i in plan.ub_budget.items}
    assert ub["oi_resident"] == 32 * 128 * 4  # q_tile / CV_RATIO rows x head_dim x FP32
    assert ub["MM1_RESULT_SIZE"] == 32 * 128 * 4 * 2
    assert ub["SHARE_UB_SIZE"] == 32 * 4
    assert ub["sumUb"] == ub["maxUb"] == ub["expUb"] == 32 * 32 * 3
    assert plan.ub_budget.total_bytes <= load_catalog().device("a2").ub_bytes
    for tile in plan.cube_tiles.values():
        for l0, l1 in (tile.m, tile.k, tile.n):
            assert 0 < l0 <= l1 and l1 % l0 == 0 and l0 % 16 == 0
    for tile in plan.vec_tiles.values():
        assert tile.shape[1] * 4 % 32 == 0 and tile.shape[1] * 2 % 32 == 0


def test_variant_fields_are_required():
    with pytest.raises(SpecError, match="shape.block_size: required when kv_cache is 'paged'"):
        _variant(CAUSAL, kv_cache="paged")
    with pytest.raises(SpecError, match="shape.window: required when mask is 'sliding_window'"):
        _variant(CAUSAL, mask="sliding_window")


def test_estimate_json_has_the_documented_keys():
    res = run_cli("estimate", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"), "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    for key in ("skeleton", "atoms", "form", "form_checks", "q_tile", "kv_tile", "cube_tiles", "vec_tiles",
                "unroll_factor", "root_count", "task_count", "ub_budget", "config", "module_count"):
        assert key in plan
    assert set(plan["ub_budget"]) >= {"items", "total_bytes", "capacity_bytes"}
    assert plan["config"]["runtime_options"]["stitch_function_max_num"] == 128
    text = run_cli("estimate", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"))
    assert "performance form" in text.stdout and "root_count = 16" in text.stdout
