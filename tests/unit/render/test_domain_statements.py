"""Statements an Ascend kernel engineer signs: device-dependent data paths, guarded divisions,
FP8 dtypes and scales, unique interface tensors, one expansion definition (issue 14)."""

from __future__ import annotations

from conftest import EXAMPLES, spec_variant

from opdesign.render.design import render_design
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

CAUSAL = load_spec(EXAMPLES / "causal_gqa_tail.yaml")  # a2
FAI = load_spec(EXAMPLES / "causal_gqa_fai.yaml")  # a5


def _flow_line(design: str) -> str:
    return next(line for line in design.splitlines() if line.startswith("Data flow per task"))


def test_p_goes_through_gm_on_a2_a3_and_straight_to_l1_on_a5():
    for device in ("a2", "a3"):
        line = _flow_line(render_design(estimate(spec_variant(CAUSAL, device=device))))
        assert "UB -> GM -> L1" in line and f"{device}.ub_to_l1 is false" in line
        assert "no GM round trip" not in line
    line = _flow_line(render_design(estimate(FAI)))
    assert "straight to L1" in line and "no GM round trip" in line and "a5.ub_to_l1" in line


def test_a_row_with_no_visible_column_is_guarded_everywhere():
    plan = estimate(CAUSAL)
    design = render_design(plan)
    li = next(r for r in plan.state if r.name == "li")
    assert li.final_use.key == "sk01.state.li_use_masked"
    assert "`o_i / (l_i + L_FLOOR)`" in design  # graph V2 row
    assert "o = oi / (li + L_FLOOR)" in design  # state table
    assert "pypto.div(o_acc, pypto.add(l_acc, L_FLOOR))" in design  # pseudocode
    assert "rows `r < seq_q - seq_kv`" in design and "torch.zeros" in design
    # the example carries a causal typical config with seq_q > seq_kv
    cfg = next(c for c in CAUSAL.typical_configs if c.name == "func_sq1000_kv700")
    assert cfg.shape.seq_q > cfg.shape.seq_kv
    # no mask: every row sees a column, the plain division stays
    unmasked = render_design(estimate(spec_variant(CAUSAL, mask="none")))
    assert "o = oi / li on the last block" in unmasked and "L_FLOOR" not in unmasked


def test_fp8_design_says_fp8_for_v_and_p_and_multiplies_the_inverse_scale():
    plan = estimate(load_spec(EXAMPLES / "paged_fp8_decode.yaml"))
    design = render_design(plan)
    assert ("| v_cache | input | [num_blocks, block_size, num_kv_heads, head_dim] | float8_e4m3 (stored as int8"
            in design)
    assert "Q, K and the output in bf16, V in FP8 E4M3" in design
    assert "P -> bf16" not in design and "P -> FP8E4M3 (V1q)" in design
    assert "per-channel" not in design and "channel scale" not in design
    # the per-token inv_scale (AT-08) is folded into P before C2 and multiplied, never divided
    assert "p_v = pypto.mul(p, vs_t)" in design
    assert "o_blk = pypto.mul(o_blk, p_inv_scale)" in design
    assert "v_inv_scale" in design and "v_scale_row" not in design


def test_sparse_design_lists_each_input_once_and_recommends_the_tiles_it_sets():
    from opdesign.render.design import render_interfaces
    from opdesign.validate import validate_text

    plan = estimate(load_spec(EXAMPLES / "sparse_topk_2048.yaml"))
    names = [t.name for t in plan.primary_inputs]
    assert names == ["q", "k", "v", "topk_indices", "kv_act_seqs"]
    assert [i["name"] for i in plan.modules[0].inputs] == names
    entry = next(e for e in plan.config_entries if e.key == "tile_shapes.cube")
    c1 = plan.cube_tiles["C1"]
    assert entry.value == [list(c1.m), list(c1.k), list(c1.n)] == [[16, 16], [128, 128], [128, 128]]
    assert "pypto.set_cube_tile_shapes([16, 16], [128, 128], [128, 128])" in render_design(plan)
    # the validator catches the old duplicate listing
    good = render_interfaces(plan)
    dup = good.replace("- name: kv_act_seqs\n",
                       "- name: topk_indices\n  shape: [batch, seq_q, topk]\n  dtype: int32\n- name: kv_act_seqs\n", 1)
    design = render_design(plan)
    assert not [f for f in validate_text(design, interfaces_text=good).findings if f.rule == "OD-IF-12"]
    assert [f.rule for f in validate_text(design, interfaces_text=dup).findings if f.rule == "OD-IF-12"] == ["OD-IF-12"]


def test_condition_3_counts_roots_with_the_seq_q_the_tile_is_sized_for():
    # seq_q dynamic up to 16384, typical 4096: Q_TILE = 8192 and 16384 / 8192 = 2 tiles per (batch, head)
    plan = estimate(load_spec(EXAMPLES / "sliding_window_512.yaml"))
    c3 = next(c for c in plan.form_checks if c.id == "SK-01-PERF-3")
    text = render_design(plan)
    assert c3.observed.args["seq_q"] == 16384 and c3.observed.args["roots"] == 1 * 8 * 2
    assert "seq_q hi 16384 for both the tile and the count" in text
    c2 = next(c for c in plan.form_checks if c.id == "SK-01-PERF-2")
    assert "head_dim in the set {64, 128}" in render_design(plan) and c2.passed


def test_backward_workspace_is_marked_as_one_a3_measurement():
    plan = estimate(spec_variant(load_spec(EXAMPLES / "sk16_backward_lm.yaml"), device="a3"))
    entry = next(e for e in plan.config_entries if e.key == "runtime_options.max_workspace_kb")
    design = render_design(plan)
    assert entry.value == 25170624 and "one A3 measurement" in entry.source
    assert "not derived from this SPEC's shapes" in design and "re-size it from the real compile" in design


def test_designs_cite_public_sources_not_the_internal_digest():
    for name in ("causal_gqa_fai", "paged_fp8_decode", "sparse_topk_2048", "sk16_backward_lm"):
        assert "domain.md" not in render_design(estimate(load_spec(EXAMPLES / f"{name}.yaml"))), name


def test_sk02_residency_says_which_reading_it_takes():
    plan = estimate(load_spec(EXAMPLES / "sparse_topk_2048.yaml"))
    c2 = next(c for c in plan.skeleton_checks if c.id == "SK-02-COND-2")
    assert c2.passed and "2 x 2048 x head_dim 512 x 2 B = 4194304 B, above UB 196608 B" in c2.observed
    assert "the strict reading (K + V resident) would reject this SPEC" in c2.observed


def test_decode_names_its_padding_and_kv_rereads_first():
    plan = estimate(load_spec(EXAMPLES / "paged_fp8_decode.yaml"))
    first = plan.risks[0]
    assert first.key == "sk01.risk.decode_waste"
    a = first.args
    assert (a["padded"], a["q_tile"], a["group"], a["fold_rows"]) == (15, 16, 4, 4)
    # K bf16 + V FP8 over seq_kv 4096 x head_dim 128, read once per head of the group of 4
    assert a["kv_bytes"] == 4096 * 128 * (2 + 1) and a["reread"] == 4 * a["kv_bytes"]


def test_cross_attention_says_which_cores_idle_and_the_split_that_fills_them():
    from conftest import REPO

    plan = estimate(load_spec(REPO / "tests" / "fixtures" / "sk01" / "cross_attention_77.yaml"))
    assert (plan.q_tile, plan.root_count) == (80, 16)
    risk = next(r for r in plan.risks if r.key == "sk01.risk.idle_cores")
    a = risk.args
    # a3: 24 AIC (Ascend910C4, hicann/pypto 910PR_9363.ini cube_core_cnt; issue 31, was 20)
    assert (a["roots"], a["cores"], a["idle"]) == (16, 24, 8)
    assert (a["q_fill"], a["roots_fill"], a["kv_split"], a["tasks"]) == (48, 32, 2, 32)
    assert "16 roots on 24 cube cores (a3) leave 8 cores idle" in render_design(plan)
    assert not any(r.key.startswith("sk01.risk.pad") for r in plan.risks)  # 3 of 80 rows: not worth a risk


def test_unroll_row_states_the_remainder_rule_and_each_config_completes_a_group():
    plan = estimate(load_spec(EXAMPLES / "paged_fp8_decode.yaml"))
    design = render_design(plan)
    assert plan.unroll_factor == 8
    assert "decode_b1_kv1030: 9 KV tiles = 1 full group(s) + 1" in design
    assert "remainder rule: loop_unroll(unroll_list=[8]) runs groups of 8 KV tiles" in design


def test_a_plan_far_down_the_ranking_says_why_it_starts_there(tmp_path):
    from opdesign.workflows.new import new_design

    new_design(EXAMPLES / "causal_gqa_tail.yaml", tmp_path / "op", lang="en")
    design = (tmp_path / "op" / "DESIGN.md").read_text(encoding="utf-8")
    assert "Cost-model rank of these tiles: 6678 of 14474" in design  # ranked with the committed calibration
    assert "Why the design starts at rank 6678, not rank 1: the safe baseline is SK-01's first-run form" in design
    assert "so rank 1 (q_tile: 64 -> 256; kv_tile: 128 -> 512;" in design
    assert "score gain 81.5 %) is the first tuning step" in design
    assert "pv_tile: [64, 128] -> [64, 512]" in design and "streams: 1 -> 4" in design
