"""The performance-form SK-01 kernel writes a pinned row's head group G and streams S: G x S heads per
``LOOP_h`` step as independent online-softmax chains (templates/sk01/kernel_chains.j2, AT-23), and
``opdesign rank --sim`` picks such rows (issue 11). Structure only; SIM runs are in test_chains_pypto.py."""

from __future__ import annotations

import ast

import pytest
from conftest import REPO

from opdesign.errors import InputError
from opdesign.plan.pins import TilePins
from opdesign.render.design import render_kernel
from opdesign.spec import load_spec
from opdesign.tuning import rank_candidates
from opdesign.workflows.new import plan_from_spec
from opdesign.workflows.pin import pinned_plan, plan_for_pins
from opdesign.workflows.sim_rank import eligible_ranks

STREAMS = REPO / "tests" / "fixtures" / "sk01" / "streams_h32_s256.yaml"
TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"
TILES = "q_tile=128,kv_tile=256,qk_tile=128x128,pv_tile=128x256,vec_tile=16x256"


def _kernel(head_group: int, streams: int) -> str:
    plan = pinned_plan(load_spec(STREAMS), STREAMS, tiles=f"{TILES},head_group={head_group},streams={streams}")
    return render_kernel(plan)


def _jit_function(text: str) -> ast.FunctionDef:
    tree = ast.parse(text)
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.endswith("_kernel"))


def _loops(node: ast.AST) -> list[ast.For]:
    return [n for n in ast.walk(node) if isinstance(n, ast.For)]


def test_streams_2_kernel_runs_two_chains_per_head_step():
    text = _kernel(1, 2)
    assert "\nCHAINS = 2  #" in text
    fn = _jit_function(text)
    heads = next(f for f in _loops(fn) if "LOOP_h" in ast.unparse(f.iter))
    assert ast.unparse(heads.target) == "hc" and ast.unparse(heads.iter).startswith("pypto.loop(num_heads // CHAINS")
    kv = next(f for f in _loops(heads) if ast.unparse(f.iter) == "range(KV_TILES)")
    chain = next(f for f in kv.body if isinstance(f, ast.For))
    assert ast.unparse(chain.target) == "c" and ast.unparse(chain.iter) == "range(CHAINS)"
    body = ast.unparse(chain)
    # every chain reads its own head's Q / K / V and updates its own state
    assert "h = hc * CHAINS + c" in body and "kv_h = h // GROUP" in body
    assert body.count("pypto.matmul(") == 2 and "m_run[c] = m_new" in body and "o_run[c] = pypto.add(" in body
    # one output write per chain, at its head
    store = [f for f in heads.body[0].body if isinstance(f, ast.For) and ast.unparse(f.iter) == "range(CHAINS)"]
    assert len(store) == 1
    assert "pypto.assemble(o_4d, [b, h, q_off + r * OUT_ROWS, 0], attn_out)" in ast.unparse(store[0])


def test_chains_are_head_group_times_streams_and_one_kernel_per_product():
    assert "\nCHAINS = 4  #" in _kernel(1, 4)
    assert _kernel(2, 1) == _kernel(1, 2)  # the same two chains: simrank simulates them once


def test_one_chain_kernel_has_no_chain_loop():
    text = _kernel(1, 1)
    assert "CHAINS" not in text and 'for h in pypto.loop(num_heads, name="LOOP_h"):' in text
    assert "m_run = m_blk" in text


def test_quick_and_shrunk_configs_keep_a_multiple_of_the_chains():
    text = _kernel(1, 4)
    harness = text.split("CONFIGS = ", 1)[1]
    config = ast.literal_eval(harness[: harness.index("\n]\n") + 3])[0]
    for key in ("shape", "quick"):
        assert config[key]["num_heads"] % 4 == 0 and config[key]["num_heads"] >= 4, config


def test_chains_that_do_not_divide_the_heads_are_refused(tmp_path):
    spec_text = STREAMS.read_text().replace("num_heads: 32, num_kv_heads: 32", "num_heads: 12, num_kv_heads: 12")
    path = tmp_path / "h12.yaml"
    path.write_text(spec_text)
    spec = load_spec(path)
    default = plan_from_spec(spec, path)
    with pytest.raises(InputError) as err:
        plan_for_pins(spec, path, default, TilePins(q_tile=128, kv_tile=256, streams=8), validate=False)
    assert err.value.details["rules"] == ["AT-23"] and "num_heads 12" in err.value.message


def test_chains_over_two_kv_tiles_are_refused():
    with pytest.raises(InputError) as err:
        pinned_plan(load_spec(STREAMS), STREAMS, tiles="q_tile=128,kv_tile=128,streams=2,head_group=1")
    assert err.value.details["rules"] == ["AT-23"] and "kv_tile 128 gives 2" in err.value.message


def test_simrank_picks_streams_rows_in_the_performance_form():
    spec = load_spec(STREAMS)
    plan = plan_from_spec(spec, STREAMS)
    ranking = rank_candidates(spec, plan)
    eligible = eligible_ranks(plan, ranking)
    by_rank = {r.rank: r for r in ranking.rows}
    chained = [r for r in eligible if by_rank[r].streams > 1 or by_rank[r].head_group > 1]
    assert plan.form == "performance" and any(by_rank[r].streams > 1 for r in chained)
    assert any(by_rank[r].head_group > 1 for r in chained)
    assert all(by_rank[r].kv_tile >= spec.shape.seq_kv for r in chained)  # the chained kernel has one KV tile
    left_out = set(by_rank) - set(eligible)
    assert left_out and all(by_rank[r].kv_tile < spec.shape.seq_kv and by_rank[r].streams * by_rank[r].head_group > 1
                            for r in left_out)


def test_simrank_keeps_one_chain_rows_in_the_baseline_form():
    spec = load_spec(TINY)
    plan = plan_from_spec(spec, TINY)
    ranking = rank_candidates(spec, plan)
    eligible = eligible_ranks(plan, ranking)
    by_rank = {r.rank: r for r in ranking.rows}
    assert plan.form == "baseline" and 0 < len(eligible) < len(ranking.rows)
    assert all(by_rank[r].streams == 1 and by_rank[r].head_group == 1 for r in eligible)


def test_design_says_the_kernel_runs_the_chains():
    from opdesign.render.design import render_all

    plan = pinned_plan(load_spec(STREAMS), STREAMS, tiles=f"{TILES},head_group=1,streams=2")
    design = render_all(plan)["DESIGN.md"]
    assert "the generated kernel runs G x S = 2 heads per LOOP_h step as independent online-softmax chains" in design
    assert "does not write" not in design
