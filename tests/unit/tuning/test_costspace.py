"""Cost-model candidate space (issue 11 item 3): the plan fields a ranked row pins, rectangular cube
tiles in the kernel."""

from __future__ import annotations

import ast
import json

import pytest
from conftest import EXAMPLES, REPO, run_cli

from opdesign.render.design import render_all
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec
from opdesign.tuning import CostParams, plan_fields, rank_candidates, with_cube_tiles
from opdesign.tuning.model.calibration import load_params
from opdesign.tuning.model.stages import core_loads, useful_streams
from opdesign.tuning.space import STREAM_COUNTS, check_rules, context, enumerate_candidates
from opdesign.validate.analysis.api_surface import check_source

DENSE = load_spec(EXAMPLES / "dense_fa_8192.yaml")


def test_plan_fields_of_a_row_and_of_its_json_dict_agree() -> None:
    ranking = rank_candidates(DENSE, estimate(DENSE), top=3, params=load_params())  # as `opdesign rank` ranks
    row = ranking.rows[0]
    fields = plan_fields(row)
    assert list(fields) == ["q_tile", "kv_tile", "qk_tile", "pv_tile", "streams", "head_group", "unroll_factor",
                            "vec_tile", "cube_tiles"]
    assert fields["qk_tile"] == [row.cube_tiles["C1"]["m"][1], row.cube_tiles["C1"]["n"][1]]
    assert fields["pv_tile"] == [row.cube_tiles["C2"]["m"][1], row.cube_tiles["C2"]["k"][1]]
    assert (fields["q_tile"], fields["kv_tile"], fields["streams"]) == (row.q_tile, row.kv_tile, row.streams)
    proc = run_cli("rank", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"), "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [plan_fields(r) for r in json.loads(proc.stdout)["rows"]] == [plan_fields(r) for r in ranking.rows]


def test_with_cube_tiles_renders_rectangular_qk_and_pv_tiles() -> None:
    plan = estimate(DENSE)
    fields = plan_fields(rank_candidates(DENSE, plan, top=1).chosen)
    fields["cube_tiles"] = {"C1": {"m": [128, 128], "k": [128, 128], "n": [64, 256]},
                            "C2": {"m": [64, 64], "k": [128, 512], "n": [128, 128]}}
    ranked = with_cube_tiles(plan, fields)
    kernel = render_all(ranked, "en")[f"{plan.op_name}_kernel.py"]
    ast.parse(kernel)
    assert check_source(kernel) == []
    assert "pypto.set_cube_tile_shapes([128, 128], [128, 128], [64, 256])" in kernel
    assert "pypto.set_cube_tile_shapes([64, 64], [128, 512], [128, 128])" in kernel
    with pytest.raises(ValueError, match="plan the SPEC with them first"):
        with_cube_tiles(plan, {**fields, "q_tile": plan.q_tile // 2})


# --- overlap: streams and AT-23 head groups (the article's shape) -----------------------------

ARTICLE = load_spec(REPO / "tests" / "fixtures" / "sk01" / "article_dense_8192_h32.yaml")


@pytest.fixture(scope="module")
def article_form():
    return rank_candidates(ARTICLE, estimate(ARTICLE), within_form=True)


def _score_by_streams(ranking, kv_tile: int) -> dict[int, tuple[int, str]]:
    """Streams -> (score, bottleneck) of the plan's tiles at ``kv_tile`` (G 1, unroll 1)."""
    ch = ranking.chosen
    return {r.streams: (r.score_cycles, r.bottleneck) for r in ranking.rows
            if (r.kv_tile, r.qk_tile, r.pv_tile, r.vec_tile, r.head_group, r.unroll_factor)
            == (kv_tile, ch.qk_tile, ch.pv_tile, ch.vec_tile, 1, 1)}


def test_streams_take_every_count_on_legal_rows() -> None:
    ctx = context(ARTICLE, estimate(ARTICLE))
    c = enumerate_candidates(ctx)
    keep = useful_streams(c["s"], core_loads(ctx, c)["units"], STREAM_COUNTS)
    legal = check_rules(ctx, c).legal & keep
    assert sorted(set(c["s"][legal].tolist())) == [1, 2, 4, 8]


def test_a_stream_row_ranks_above_every_single_stream_row() -> None:
    ranking = rank_candidates(ARTICLE, estimate(ARTICLE), top=12)
    # kv_tile 8192: one KV step per unit; a LOOP_h body of S chains dispatches S units at once
    # (on a3's 24 AIC, 910PR_9363.ini, the best row is S 4 x G 2; on the old 20 AIC it was S 8)
    assert all(r.streams > 1 for r in ranking.rows)
    assert (ranking.rows[0].streams, ranking.rows[0].head_group) == (4, 2)
    assert ranking.rows[0].form_rules == ["SK-01-P1"] and ranking.rows[0].bottleneck == "C1"


def test_streams_save_loop_bodies(article_form) -> None:
    """Within the form (q_tile 4096: 2 q blocks x 32 heads = 64 units, each one static-range body): a LOOP_h
    body of S chains (templates/sk01/kernel_chains.j2) dispatches S units, so S streams dispatch 64 / S
    bodies; with the switch cost set to 0 that is all they change."""
    ranking = rank_candidates(ARTICLE, estimate(ARTICLE), within_form=True,
                              params=CostParams(stream_switch_cycles=0))
    for kv in (1024, 2048):
        by = _score_by_streams(ranking, kv)
        assert set(by) == {1, 2, 4} and {b for _, b in by.values()} == {"V1"}
        assert by[1][0] - by[2][0] == 1850 * 64 // 2 and by[2][0] - by[4][0] == 1850 * 64 // 4
    # 64 units on a3's 24 AIC (3 on the busiest core; 4 on the old 20, score 32866330)
    assert article_form.chosen.score_cycles == _score_by_streams(article_form, 1024)[1][0] == 27387349


def test_head_groups_hide_fills_like_streams(article_form) -> None:
    """AT-23: 64 roots on a3's 24 AIC (the busiest core runs 3 units of G 1). G 4 makes 16 units, one per core,
    each 4 heads in one chain (one fill): better than G 1's 3 units (three fills) although it runs one head
    more. G 2 makes 32 units, 2 on the busiest core (4 heads, two fills): worse than G 1 on 24 cores (on the
    old 20 AIC, where G 1 put 4 units on a core, G 2 was better). Two streams of G 1 hide the fills of its
    3 heads and beat G 4's 4 heads."""
    ch = article_form.chosen
    by_g = {(r.head_group, r.streams): r.score_cycles for r in article_form.rows
            if (r.kv_tile, r.qk_tile, r.pv_tile, r.vec_tile, r.unroll_factor)
            == (ch.kv_tile, ch.qk_tile, ch.pv_tile, ch.vec_tile, 1)}
    assert by_g[(4, 1)] < by_g[(1, 1)] < by_g[(2, 1)]
    assert (by_g[(4, 1)], by_g[(1, 1)], by_g[(2, 1)]) == (27361525, 27387349, 27391125)
    assert by_g[(1, 2)] < by_g[(4, 1)]


def test_stream_switches_cost_every_stage(article_form) -> None:
    """Each stream beyond the first adds stream_switch_cycles (54) to every stage of every task, up to the units
    a core runs: 64 units on a3's 24 AIC put at most 3 on a core, so 4 streams switch like 3 (2 x 54)."""
    ch = article_form.chosen
    rows = {r.streams: r for r in article_form.rows
            if (r.kv_tile, r.qk_tile, r.pv_tile, r.vec_tile, r.head_group, r.unroll_factor)
            == (ch.kv_tile, ch.qk_tile, ch.pv_tile, ch.vec_tile, 1, 1)}
    for k in ("C1", "V1", "C2", "V2"):
        assert rows[2].stages[k] - rows[1].stages[k] == 54 and rows[4].stages[k] - rows[1].stages[k] == 2 * 54


@pytest.mark.parametrize("mask,window", [("none", None), ("causal", None), ("sliding_window", 512)])
@pytest.mark.parametrize("seq_q,seq_kv", [(8192, 8192), (1000, 700), (300, 700), (7, 4096), (1, 1)])
def test_most_blocks_is_the_largest_valid_block_count(mask, window, seq_q, seq_kv) -> None:
    """The KV loop length each tile pair's unroll choices read, in closed form where the counts are flat
    or non-decreasing, equals the largest per-q-block count."""
    from dataclasses import replace

    from opdesign.tuning.space import most_blocks, valid_blocks

    plan = estimate(DENSE)
    spec = DENSE.model_copy(update={"mask": mask, "shape": DENSE.shape.model_copy(
        update={"seq_q": seq_q, "seq_kv": seq_kv, "window": window})})
    ctx = replace(context(DENSE, plan), spec=spec)
    counts = {(q, kv): most_blocks(ctx, q, kv) for q in (8, 64, 100, 128, 4096) for kv in (8, 128, 1000, 4096)}
    assert counts == {(q, kv): int(valid_blocks(ctx, q, kv).max()) for q, kv in counts}
    assert len(set(counts.values())) > 1 or seq_kv == 1
