"""Cost model (issue 5): instruction cycles, the budget twin, orderings, rejections, CLI."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli

from opdesign.catalog import load_catalog
from opdesign.errors import CatalogError, InputError
from opdesign.io.paths import data_dir
from opdesign.plan import buffers
from opdesign.plan.tiles import choose_cube_tiles
from opdesign.skeletons.registry import estimate
from opdesign.skeletons.sk01 import budget
from opdesign.skeletons.sk01.parts import expansion, vec_tiles
from opdesign.spec import load_spec
from opdesign.tuning import CostParams, parameter_table, rank_candidates, tuning_candidates
from opdesign.tuning.model.isa import (
    INSTRUCTIONS,
    TRANSFER_HEAD_CYCLES,
    formula_for,
    formula_table,
    instr_cycles,
    vector_cycles,
)
from opdesign.tuning.space import check_rules, context, enumerate_candidates, vec_shapes
from opdesign.workflows.new import rank_spec

DENSE = load_spec(EXAMPLES / "dense_fa_8192.yaml")
CAUSAL = load_spec(EXAMPLES / "causal_gqa_tail.yaml")
A3 = load_catalog().device("a3")


@pytest.fixture(scope="module")
def dense_all():
    """The dense example's space within its performance form (q_tile fixed by SK-01-P1, at most the static
    range's 8 KV tiles by SK-01-P2, as ``new --within-form`` ranks it)."""
    return rank_candidates(DENSE, estimate(DENSE), include_rejected=True, within_form=True)


@pytest.fixture(scope="module")
def dense_space():
    """The dense example's whole space, rejected rows included (no form filter)."""
    return rank_candidates(DENSE, estimate(DENSE), include_rejected=True)


# --- instruction cycles ---------------------------------------------------------


def test_formula_table_ships_the_source_rows() -> None:
    path = data_dir("constraints") / "costmodel" / "pto_a2a3_vector_formula_params.csv"
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 274 and set(rows[0]) == {"op", "dtype", "cols", "slope", "bias"}
    assert len(formula_table()) == 274
    assert "formula_params.csv" in (path.parent / "README.md").read_text()


@pytest.mark.parametrize(("op", "dtype", "cols", "rule", "row_cols", "cycles_16"), [
    ("TROWMAX", "fp32", 128, "exact", "128", 176),            # 0.0625 x 2048 + 48
    ("TEXP", "fp32", 128, "any-dtype", "*", 94),              # the only TEXP row: any, *
    ("TMUL", "bf16", 128, "bf16-as-fp16 exact", "128", 58),   # our fallback: 0.0156 x 2048 + 26
    ("TROWMAX", "fp32", 512, "nearest-cols 336 for 512", "336", 473),  # our fallback: widest fp32 row
    ("TSUB", "fp32", 8, "nearest-cols 32 for 8", "32", 50),
])
def test_formula_lookup_order_and_fallbacks(op, dtype, cols, rule, row_cols, cycles_16) -> None:
    match = formula_for(op, dtype, cols)
    assert (match.rule, match.cols) == (rule, row_cols)
    assert vector_cycles(op, dtype, 16, cols) == cycles_16


def test_formula_lookup_refuses_an_unknown_op() -> None:
    with pytest.raises(CatalogError, match="no TFOO row"):
        formula_for("TFOO", "fp32", 128)


def test_every_attention_instruction_has_a_cost() -> None:
    extra = {"TMATMUL": {"k": 128}, "TCVT": {"dst_dtype": "bf16"}, "TLOAD": {"path": "gm_to_ub"},
             "TSTORE": {"path": "ub_to_gm"}}
    cycles = {op: instr_cycles(op, "fp32", 16, 128, A3, **extra.get(op, {})) for op in INSTRUCTIONS}
    assert len(cycles) == 12 and all(v > 0 for v in cycles.values())
    assert instr_cycles("TMATMUL", "bf16", 128, 128, A3, k=128) == 6 + 8 * 8 * 8   # head + fractals
    assert instr_cycles("TMATMUL", "fp32", 128, 128, A3, k=128) == 6 + 2 * 512     # fp32: 2 cycles per fractal
    assert cycles["TCVT"] == 14 + 2 * (16 * 128 * 4 // 256)
    assert cycles["TLOAD"] == pytest.approx(TRANSFER_HEAD_CYCLES["gm_to_ub"] + 16 * 128 * 4 / 58.562)
    with pytest.raises(ValueError, match="needs k"):
        instr_cycles("TMATMUL", "bf16", 16, 16, A3)
    with pytest.raises(ValueError, match="needs path"):
        instr_cycles("TLOAD", "bf16", 16, 16, A3, path="l0c_to_gm")


def test_bandwidth_figures_are_sourced_in_every_profile() -> None:
    for device in load_catalog().devices.values():
        assert {"gm_to_l1_bytes_per_cycle", "gm_to_ub_bytes_per_cycle", "ub_to_gm_bytes_per_cycle",
                "l0c_to_gm_bytes_per_cycle"} <= set(device.bandwidth)
        for key in device.bandwidth:
            source = device.sources[f"bandwidth.{key}"]
            assert "arch_config.hpp" in source or "assumption" in source


# --- vectorised twins agree with the scalar code ---------------------------------


@pytest.mark.parametrize("name", ["dense_fa_8192", "causal_gqa_tail", "paged_fp8_decode"])
def test_budget_twin_matches_budget_py(name: str) -> None:
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    plan = estimate(spec)
    ctx = context(spec, plan)
    c = enumerate_candidates(ctx)
    rules = check_rules(ctx, c)
    sk01 = load_catalog().card("SK-01")
    device = load_catalog().device(spec.device)
    for i in random.Random(5).sample(range(len(c["q"])), 40):
        q, kv = int(c["q"][i]), int(c["kv"][i])
        cube = choose_cube_tiles(spec, plan.form, q, kv, sk01, qk_tile=(int(c["m1"][i]), int(c["n1"][i])),
                                 pv_tile=(int(c["m21"][i]), int(c["k21"][i])))
        vec = vec_tiles(spec, q, kv, int(c["vr"][i]), int(c["vc"][i]))
        ub = budget.ub_budget(device, q_tile=q, head_dim=spec.shape.head_dim, resident_state=plan.form == "baseline",
                              cube=cube, vec=vec)
        assert rules.bytes["UB"][i] == ub.total_bytes
        assert rules.bytes["L1"][i] == buffers.l1_budget(device, cube, 2).total_bytes
        for b in [x for t in cube.values() for x in buffers.l0_budgets(device, t)]:
            assert rules.bytes[b.buffer][i] == b.total_bytes, b.buffer
        exp = expansion(q, kv, spec.shape.head_dim, vec, 1, fp8=spec.quant == "fp8")
        assert rules.expansion_max[i] == exp.max_per_op


def test_allocation_matrix_matches_greedy_allocation() -> None:
    from opdesign.plan.blocks import greedy_allocation
    from opdesign.tuning.model.stages import allocation_matrix

    rng = random.Random(11)
    for _ in range(60):
        weights = [rng.randint(0, 9) for _ in range(rng.randint(1, 60))]
        cores, repeats = rng.randint(1, 24), rng.randint(1, 30)
        matrix = allocation_matrix(np.array(weights), cores, repeats)
        expected = np.zeros_like(matrix)
        for core, pairs in enumerate(greedy_allocation(weights, cores, repeats)):
            for pos, n in pairs:
                expected[pos, core] = n
        assert (matrix == expected).all()


def _core_loads_reference(ctx, c):
    """core_loads the long way: kv_block_ranges and the full allocation matrix per (q, kv, g, u)."""
    from opdesign.plan.blocks import kv_block_ranges
    from opdesign.tuning.model.stages import allocation_matrix

    s = ctx.spec.shape
    out = []
    for q, kv, g, u in zip(*(c[k].tolist() for k in ("q", "kv", "g", "u")), strict=True):
        ks = np.array([n for _, n in kv_block_ranges(ctx.spec.mask, s.seq_q, s.seq_kv, q, kv, s.window)])
        counts = allocation_matrix(ks * g, ctx.device.aic_cores, s.batch * (s.num_heads // g))
        loads = (counts * (ks * g)[:, None]).sum(axis=0)
        busy = counts[:, int(np.argmax(loads))]
        static = max(int(ks.max()), 1) <= ctx.static_range
        # pypto.loop_unroll(unroll_list=[u]) runs k // u bodies of u steps, then k % u bodies of one step
        per_unit = (ks > 0).astype(int) if static else ks // u + ks % u
        bodies = (busy * per_unit).sum()
        out.append((loads.max(), busy.sum(), busy.sum() * g, bodies, np.count_nonzero(loads), loads.sum(),
                    (counts * per_unit[:, None]).sum()))
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize("name,shape", [
    ("causal_gqa_tail.yaml", {}), ("causal_gqa_tail.yaml", {"seq_q": 300, "seq_kv": 700}),
    ("causal_gqa_tail.yaml", {"seq_q": 700, "seq_kv": 300}), ("sliding_window_512.yaml", {}),
    ("causal_gqa_fai.yaml", {}), ("dense_fa_8192.yaml", {"seq_q": 1000, "seq_kv": 3000}),
    ("dense_fa_8192.yaml", {}), ("dense_fa_8192.yaml", {"seq_q": 4096, "seq_kv": 777, "batch": 3}),
])
def test_core_loads_closed_form_equals_the_allocation_matrix(name, shape) -> None:
    from opdesign.tuning.model.stages import core_loads

    spec = load_spec(EXAMPLES / name)
    spec = spec.model_copy(update={"shape": spec.shape.model_copy(update=shape)})
    ctx = context(spec, estimate(spec))
    c = enumerate_candidates(ctx)
    pick = np.random.default_rng(5).choice(len(c["q"]), size=min(400, len(c["q"])), replace=False)
    sample = {k: v[pick] for k, v in c.items()}
    loads = core_loads(ctx, sample)
    got = np.stack([loads[k] for k in ("tasks", "units", "roots", "bodies", "cores_busy", "task_count", "body_count")],
                   axis=1)
    assert (got == _core_loads_reference(ctx, sample)).all()


@pytest.mark.parametrize("mask,sq,skv,qt,kt,window", [
    ("causal", 1000, 1000, 128, 128, None), ("causal", 300, 700, 8, 64, None), ("causal", 700, 300, 64, 8, None),
    ("sliding_window", 4096, 4096, 128, 256, 512), ("sliding_window", 300, 1000, 16, 64, 100),
    ("sliding_window", 1000, 300, 64, 16, 50), ("none", 1000, 3000, 256, 128, None), ("topk", 77, 99, 8, 8, None),
])
def test_block_counts_equal_kv_block_ranges(mask, sq, skv, qt, kt, window) -> None:
    from opdesign.plan.blocks import kv_block_ranges
    from opdesign.tuning.space import block_counts

    expected = [n for _, n in kv_block_ranges(mask, sq, skv, qt, kt, window)]
    assert block_counts(mask, sq, skv, qt, kt, window).tolist() == expected


def test_group_rows_equals_unique_rows() -> None:
    from opdesign.tuning.model.stages import group_rows

    rng = np.random.default_rng(3)
    cols = [rng.integers(0, 5, 500), rng.integers(-3, 2, 500), rng.integers(0, 2 ** 40, 500) // 2 ** 37]
    first, inv = group_rows(*cols)
    _, want_first, want_inv = np.unique(np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True)
    assert first.tolist() == want_first.tolist() and inv.tolist() == want_inv.reshape(-1).tolist()
    wide = [rng.integers(0, 2 ** 40, 50), rng.integers(0, 2 ** 40, 50)]  # packed by codes: 2^80 does not fit
    first, inv = group_rows(*wide)
    _, want_first, want_inv = np.unique(np.stack(wide, axis=1), axis=0, return_index=True, return_inverse=True)
    assert first.tolist() == want_first.tolist() and inv.tolist() == want_inv.reshape(-1).tolist()


# --- the dense 8192 example: orderings, rejections, the plan's rank --------------


_AXES = {"qk_m": ("qk_tile", 0), "qk_n": ("qk_tile", 1), "pv_m": ("pv_tile", 0), "pv_n": ("pv_tile", 1)}


def _knob(r, knob):
    field, i = _AXES.get(knob, (knob, None))
    return getattr(r, field) if i is None else getattr(r, field)[i]


def _pairs(rows, knob):
    """Pairs of legal rows that differ only in ``knob`` (a knob or one axis of a cube tile), as
    (smaller value row, larger value row)."""
    others = [k for k in ("q_tile", "kv_tile", "qk_m", "qk_n", "pv_m", "pv_n", "vec_tile", "unroll_factor",
                          "head_group", "streams") if k != knob]
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(_knob(r, k) for k in others), []).append(r)
    for group in groups.values():
        group.sort(key=lambda r: _knob(r, knob))
        yield from zip(group, group[1:], strict=False)


@pytest.mark.parametrize(("knob", "pairs_total", "strictly_faster"),
                         [("qk_m", 195, 195), ("qk_n", 234, 234), ("pv_m", 168, 168), ("pv_n", 306, 306)])
def test_dense_larger_qk_and_pv_tiles_rank_ahead(dense_all, knob: str, pairs_total: int, strictly_faster: int) -> None:
    """Within the budgets, holding every other knob fixed, a larger axis of the QK or PV tile ranks ahead.

    A larger QK m or n or PV m always saves cycles (fewer S stores, operand reloads and C2
    chunks); a larger PV KV side saves them unless C2 is bound by its L0C->GM store, where
    the score ties and the tie-break (larger tiles first) decides.
    """
    pairs = list(_pairs(dense_all.rows, knob))
    assert len(pairs) == pairs_total
    for small, large in pairs:
        assert large.score_cycles <= small.score_cycles and large.rank < small.rank, (small, large)
    assert sum(large.score_cycles < small.score_cycles for small, large in pairs) == strictly_faster


def test_dense_plan_tiles_with_pinned_stage_cycles_and_the_rectangular_pv_tile_ahead(dense_all) -> None:
    # SK-01-P2 keeps kv_tile >= 1024 (8 KV tiles of seq 8192); the plan's tiles rank 17th
    assert (dense_all.enumerated, dense_all.legal, dense_all.chosen_rank) == (3888, 501, 17)
    chosen = dense_all.chosen
    knobs = (chosen.q_tile, chosen.kv_tile, chosen.qk_tile, chosen.pv_tile, chosen.vec_tile)
    assert knobs == (4096, 1024, [128, 128], [128, 256], (16, 128))
    # PV 128 x 512 overflows L1 (C2 operands x 2 buffers + MM2_LEFT: 622592 B > 512 KiB); 64 x 512 fits and
    # halves the C2 L1 loads: the rectangular PV tile ranks first (the article's "larger PV tiles")
    best = dense_all.rows[0]
    # QK 64 x 256 ties QK 128 x 128 on C1; with vec 16 x 256, QK n 128 would put V1 on the AIC (v1_on_aic)
    assert (best.qk_tile, best.pv_tile, best.vec_tile, best.streams) == ([64, 256], [64, 512], (16, 256), 1)
    assert best.cube_tiles["C2"] == {"m": [64, 64], "k": [128, 512], "n": [128, 128]}
    assert best.score_cycles == 10333085 and best.stages["C2"] == 338256
    # sched: 16 static-range roots of all cores, 1850 cycles each, over the busiest core's 8 steps
    assert chosen.stages == {"C1": 724141, "V1": 1119488, "C2": 231196, "V2": 149888, "sched": 3700}
    # one chain of 8 KV steps bounds it: fill + 7 x max(C1 + C2, V1 + V2, fill / 3)
    fill = 724141 + 1119488 + 231196 + 149888
    assert ((chosen.score_cycles, chosen.bottleneck, chosen.tasks_per_core, chosen.task_count)
            == (11202921, "fill", 8, 128))
    # plus the busiest core's one root epilogue and the dispatch of 16 bodies
    assert chosen.score_cycles - chosen.epilogue_cycles - 16 * 1850 == fill + 7 * (1119488 + 149888)
    # V1 per tile at [16, 128] FP32: TMULS 52 + TROWMAX 176 + TROWEXPAND 275 + TSUB 83 + TEXP 94 + TROWSUM 190
    # + TCVT 78,
    # plus the row max and sum over 8 column tiles: 2 x 7 merges of each of the 128 row tiles, a TSUB (83) each
    assert chosen.stages["V1"] == 1024 * 948 + 2 * 7 * 128 * 83


def _rejected(ranking, **knobs):
    return [r for r in ranking.rejected if all(getattr(r, k) == v for k, v in knobs.items())]


def test_dense_l0c_overflow_is_rejected_with_its_rule(dense_all) -> None:
    [row] = _rejected(dense_all, q_tile=4096, kv_tile=1024, qk_tile=[256, 256], pv_tile=[128, 256], vec_tile=(16, 128))
    assert "C-TILE-03" in row.rejected_rules
    assert "C-TILE-03: L0C C1 262144 B > 131072 B" in row.rejected_reason   # 256 x 256 x 4 B > 128 KiB
    [l1] = _rejected(dense_all, q_tile=4096, kv_tile=1024, qk_tile=[128, 128], pv_tile=[128, 512], vec_tile=(16, 128))
    # C2 operands (128 x 512 + 512 x 128) x 2 B x 2 buffers + MM2_LEFT 128 x 128 x 2 B x 3
    assert l1.rejected_rules == ["C-TILE-03"] and l1.rejected_reason == "C-TILE-03: L1 622592 B > 524288 B"


def test_dense_ub_overflow_is_rejected_with_its_rule(dense_all) -> None:
    [row] = _rejected(dense_all, q_tile=4096, kv_tile=1024, qk_tile=[128, 128], pv_tile=[128, 256], vec_tile=(16, 512))
    # 16 x 512 x 4 B x 4 (reduce) + MM1 64 KiB + MM2 64 KiB + SHARE 256 B + sumUb/maxUb/expUb 3 x 64 x 32 B x 3
    assert row.rejected_rules == ["C-TILE-03"]
    assert row.rejected_reason == "C-TILE-03: UB 280832 B > 196608 B"


def test_dense_tail_and_expansion_rules_reject(dense_space) -> None:
    tails = _rejected(dense_space, q_tile=4096, kv_tile=8)
    assert tails and all(r.rejected_rules[0] == "C-TILE-02" for r in tails)   # 8 P columns x 2 B = 16 B
    [wide] = _rejected(dense_space, q_tile=4096, kv_tile=8192, qk_tile=[128, 128], pv_tile=[128, 256],
                       vec_tile=(16, 128))
    assert wide.rejected_rules == ["C-TILE-04"]
    assert "expansion 49152 per op > 18000" in wide.rejected_reason   # 256 x 64 tiles x (1 + 2)
    assert dense_space.rejected_by_rule == {"C-TILE-05": 0, "C-TILE-02": 1680, "C-TILE-03": 109632, "C-TILE-04": 5346}


def test_rules_flag_misaligned_cube_tiles() -> None:
    plan = estimate(DENSE)
    ctx = context(DENSE, plan)
    c = {k: v[:1].copy() for k, v in enumerate_candidates(ctx).items()}
    c["m0"][:] = 24
    c["m1"][:] = 48   # L1 % L0 == 0 but 24 is not a multiple of 16 (C-TILE-05)
    assert check_rules(ctx, c).rules(0)[0] == "C-TILE-05"


def test_rules_flag_cube_tiles_that_do_not_divide_the_kv_step() -> None:
    plan = estimate(DENSE)
    ctx = context(DENSE, plan)
    c = enumerate_candidates(ctx)
    i = int(np.flatnonzero((c["q"] == 4096) & (c["kv"] == 1024) & (c["n1"] == 128) & (c["k21"] == 256))[0])
    c = {k: v[i:i + 1].copy() for k, v in c.items()}
    assert check_rules(ctx, c).bad_step.tolist() == [False]
    c["kv"][:] = 1000   # aligned to 1008: 7.875 blocks of 128 columns, so one C1 block straddles the step
    rules = check_rules(ctx, c)
    assert rules.bad_step.tolist() == [True] and rules.rules(0) == ["C-TILE-05"]
    assert "n 128 / k 256 kv_tile 1000" in rules.reason(0, c, 16)


def test_tuning_candidates_give_gain_against_the_plan() -> None:
    plan = estimate(DENSE)
    tips = tuning_candidates(DENSE, plan, n=3)
    # vec 16 x 256 needs QK n 256: with QK n 128 the softmax would run on the AIC (v1_on_aic)
    assert [t["changes"] for t in tips][:2] == [["qk_tile: [128, 128] -> [64, 256]", "pv_tile: [128, 256] -> [64, 512]",
                                                 "vec_tile: (16, 128) -> (16, 256)"],
                                                ["qk_tile: [128, 128] -> [64, 256]", "pv_tile: [128, 256] -> [64, 256]",
                                                 "vec_tile: (16, 128) -> (16, 256)"]]
    assert [t["gain_pct"] for t in tips][:2] == [7.8, 7.6]
    assert all(t["q_tile"] == plan.q_tile and t["form_rules"] == [] for t in tips)   # tuning keeps the form
    causal = tuning_candidates(CAUSAL, estimate(CAUSAL), n=2)
    # 91.0 % with a2's 24 AIC (A2A3.ini cube_core_cnt, issue 31; 89.7 % with the old 20)
    assert causal[0]["gain_pct"] == 91.0 and causal[0]["rank"] == 1 and "streams: 1 -> 4" in causal[0]["changes"]


def test_causal_ranking_balances_valid_blocks() -> None:
    ranking = rank_candidates(CAUSAL, estimate(CAUSAL), top=3)
    assert ranking.chosen_rank == 11528  # on 24 AIC (a2: A2A3.ini cube_core_cnt, issue 31); 12133 on the old 20
    chosen = ranking.chosen
    # q_tile 64 on seq 1000: valid KV blocks per q block 1,1,2,2..8,8; 2 x 8 heads -> 1152 tasks over 24 cores
    assert (chosen.task_count, chosen.cores_busy, chosen.tasks_per_core) == (1152, 24, 49)
    # unroll 1: one loop body per KV step, 1152 bodies of all cores through one scheduler bound the plan's row
    assert chosen.bottleneck == "sched" and ranking.rows[0].streams == 4
    assert all(r.score_cycles <= chosen.score_cycles for r in ranking.rows)


def test_streams_beyond_the_units_per_core_are_not_enumerated(dense_all) -> None:
    # within the form (q_tile 4096): 16 roots on 24 cores, one unit per core, so only one stream can run
    assert {r.streams for r in dense_all.rows} == {1}


def test_vec_shapes_follow_the_area_rule() -> None:
    assert vec_shapes(1024, (16, 64)) == [(16, 64), (16, 128), (16, 256), (16, 512)]
    assert vec_shapes(64, (16, 64)) == [(16, 64), (32, 64), (64, 64)]
    assert vec_shapes(8, (16, 64)) == [(16, 8)]


def test_non_sk01_plans_are_refused() -> None:
    spec = load_spec(EXAMPLES / "sk16_backward_lm.yaml")
    with pytest.raises(InputError,
                       match="ranking covers SK-01 only; sk16_backward_lm is a valid SPEC planned with SK-16") as err:
        rank_spec(spec, estimate(spec))
    assert err.value.code == "invalid_input"
    assert err.value.details == {"field": "spec", "skeleton": "SK-16", "ranked": ["SK-01"]}


def test_every_model_figure_is_documented() -> None:
    table = parameter_table()
    assert {r["name"] for r in table} >= set(CostParams.model_fields)
    for r in table:
        assert r["unit"] and len(r["reason"]) > 20, r["name"]
    slower = rank_candidates(DENSE, estimate(DENSE), top=1, params=CostParams(task_overhead_cycles=1e6))
    # static range: one dispatch per 8-step root; 16 roots through one scheduler, 8 steps on the busiest core
    assert slower.chosen.stages["sched"] == 1e6 * 16 / 8


# --- CLI ---------------------------------------------------------------------------


def test_cli_rank_json_rows_and_rejected() -> None:
    proc = run_cli("rank", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"), "--top", "3", "--json", "--show-rejected")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["chosen_rank"] == 10757 and len(data["rows"]) == 3 and len(data["rejected"]) == 3
    for row in data["rows"]:
        assert {"q_tile", "kv_tile", "unroll_factor", "head_group", "score_cycles", "stages", "bottleneck"} <= set(row)
        assert set(row["stages"]) == {"C1", "V1", "C2", "V2", "sched"}
        # q_tile 2048 breaks the performance form's Q_TILE = seq_q / 2 and its 16 KV tiles of 512 the static
        # range of 8: ranked, flagged with both rule ids
        assert row["q_tile"] == 2048 and row["kv_tile"] == 512 and row["form_rules"] == ["SK-01-P1", "SK-01-P2"]
        assert len(row["qk_tile"]) == 2 and row["pv_tile"] == [row["cube_tiles"]["C2"]["m"][1],
                                                                row["cube_tiles"]["C2"]["k"][1]]
    assert data["chosen"]["form_rules"] == [] and data["form_breaking"] == 72923
    assert all(r["rejected_reason"].startswith("C-TILE-") and r["rejected_rules"] for r in data["rejected"])


def test_cli_rank_text_shows_the_plan_rank() -> None:
    proc = run_cli("rank", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--top", "2", "--show-rejected")
    assert proc.returncode == 0, proc.stderr
    assert "plan's tiles: rank 6678 of 14474" in proc.stdout  # the committed calibration.yaml ranks
    assert " 6678*     64     128  64x128  64x128   16x64      1  1  1" in proc.stdout
    assert "not a wall-clock prediction" in proc.stdout
    assert "C-TILE-03: UB" in proc.stdout
    bad = run_cli("rank", "--spec", str(EXAMPLES / "sk16_backward_lm.yaml"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: invalid_input: rank: ranking covers SK-01 only")
    sk02 = run_cli("rank", "--spec", str(EXAMPLES / "sparse_topk_2048.yaml"))
    assert (sk02.returncode == 2
            and "covers SK-01 only; sparse_topk_2048 is a valid SPEC planned with SK-02" in sk02.stderr)
    assert "spec_invalid" not in sk02.stderr and sk02.stdout == ""


def test_quiet_rank_prints_the_table_without_its_trailer() -> None:
    loud = run_cli("rank", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--top", "2")
    for argv in (("-q", "rank"), ("rank", "-q")):
        quiet = run_cli(*argv, "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--top", "2")
        assert quiet.returncode == 0 and quiet.stderr == ""
        assert "stages: cycles per task" in loud.stdout and "note: " in loud.stdout
        assert "stages: cycles" not in quiet.stdout and "note: " not in quiet.stdout
        # the same table: the loud output is the quiet one plus its two trailer lines
        assert loud.stdout.splitlines()[:-2] == quiet.stdout.splitlines()


def test_new_ranks_a_plan_once(monkeypatch, tmp_path) -> None:
    import opdesign.tuning as costmodel
    from opdesign.tuning.model.calibration import load_params
    from opdesign.workflows.new import new_design

    calls = []
    real = costmodel.rank_candidates
    monkeypatch.setattr(costmodel, "rank_candidates", lambda *a, **k: calls.append(a[0].op_name) or real(*a, **k))
    result = new_design(EXAMPLES / "causal_gqa_tail.yaml", tmp_path / "out")
    assert calls == ["causal_gqa_tail"]
    params = load_params()  # new ranks with the committed calibration, the library calls default to the raw figures
    assert result.plan.tuning == tuning_candidates(CAUSAL, estimate(CAUSAL), n=3, params=params)
    assert result.plan.cost_rank == rank_candidates(CAUSAL, estimate(CAUSAL), top=1, params=params).chosen_rank


@pytest.mark.parametrize("include_rejected", [False, True])
def test_chunked_scoring_and_rule_checks_give_the_same_ranking(monkeypatch, include_rejected) -> None:
    import opdesign.tuning.rank as rank_module

    plan = estimate(CAUSAL)
    whole = rank_candidates(CAUSAL, plan, top=30, include_rejected=include_rejected)
    monkeypatch.setattr(rank_module, "SCORE_CHUNK", 97)  # many chunks, the last one short
    chunked = rank_candidates(CAUSAL, plan, top=30, include_rejected=include_rejected)
    assert chunked.model_dump() == whole.model_dump()
    assert whole.enumerated > 97 * 10 and whole.legal < whole.enumerated


@pytest.mark.parametrize("name", ["causal_gqa_tail", "causal_gqa_fai", "dense_fa_8192",
                                  "sliding_window_512"])
@pytest.mark.parametrize("within_form", [False, True])
def test_ranking_without_rejected_rows_equals_the_full_ranking(name, within_form) -> None:
    """The legal-only ranking checks the rules per tile geometry and never builds an illegal candidate; its
    rows, counts and chosen rank are those of ranking the whole space."""
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    plan = estimate(spec)
    full = rank_candidates(spec, plan, top=25, include_rejected=True, within_form=within_form)
    legal_only = rank_candidates(spec, plan, top=25, within_form=within_form)
    assert legal_only.model_dump(exclude={"rejected"}) == full.model_dump(exclude={"rejected"})
    assert full.rejected and len(legal_only.rows) == min(25, full.legal)
    assert sum(full.rejected_by_rule.values()) >= full.enumerated - full.legal > 0
