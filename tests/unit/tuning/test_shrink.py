"""The self-check's shapes (issue 32 deliver 0, :mod:`opdesign.pypto_run.shrink`): without --quick every config
runs at its own shape; --quick shrinks every candidate of one SPEC to the same shape, and no tile is larger
than the shrunk axis. Plain tests (no PyPTO); the SIM run is in test_tune_pypto.py."""

from __future__ import annotations

import pytest
from conftest import REPO

from opdesign.errors import InputError
from opdesign.pypto_run.selfcheck import long_run_note
from opdesign.pypto_run.shrink import (
    estimate_seconds,
    harness_configs,
    perf_factor,
    quick_heads,
    tile_pairs,
)
from opdesign.spec import load_spec
from opdesign.tuning import rank_candidates
from opdesign.workflows.new import plan_from_spec
from opdesign.workflows.pin import pins_from_row, plan_for_pins

EXAMPLES = REPO / "examples" / "specs"
SK01 = REPO / "tests" / "fixtures" / "sk01"
SPECS = [EXAMPLES / "dense_fa_8192.yaml", EXAMPLES / "causal_gqa_tail.yaml", EXAMPLES / "sliding_window_512.yaml",
         SK01 / "streams_h32_s256.yaml", SK01 / "simrank_tiny.yaml", SK01 / "cross_attention_77.yaml"]


def _candidates(path, n=12):
    """Plans of ``n`` rows spread over the ranking (within the form), as `new --candidate` builds them."""
    spec = load_spec(path)
    default = plan_from_spec(spec, path)
    rows = rank_candidates(spec, default, within_form=True).rows
    picks = sorted({rows[round(i * (len(rows) - 1) / (n - 1))].rank for i in range(n)})
    plans = []
    for row in (r for r in rows if r.rank in picks):
        try:
            plans.append(plan_for_pins(spec, path, default, pins_from_row(row), validate=False))
        except InputError:  # e.g. chains over two KV tiles: refused by construction
            continue
    return default, plans


def _out_rows(plan):
    r = plan.q_tile
    while r * plan.head_dim * 2 > 131072 and r % 2 == 0:
        r //= 2
    return r if plan.form == "performance" else None


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_candidate_gets_the_same_shapes_and_no_tile_exceeds_the_quick_axis(path):
    default, plans = _candidates(path)
    assert len(plans) >= 3, "the sample must hold several candidates"
    ref = harness_configs(default, _out_rows(default))
    tiles_seen = set()
    for plan in plans:
        configs = harness_configs(plan, _out_rows(plan))
        assert [c["name"] for c in configs] == [c["name"] for c in ref]
        for cfg, want, typical in zip(configs, ref, plan.typical_configs, strict=True):
            assert cfg["shape"] == typical["shape"] and cfg["shrunk"] is None  # never shrunk without --quick
            assert cfg["quick"] == want["quick"], (plan.q_tile, plan.kv_tile)  # the SPEC fixes the quick shape
            consts = cfg.get("quick_constants", {})
            q_tile, kv_tile = consts.get("Q_TILE", plan.q_tile), consts.get("KV_TILE", plan.kv_tile)
            tiles_seen.add((plan.q_tile, plan.kv_tile))
            if plan.kv_cache != "paged" and plan.mask != "topk":
                # a shrunk axis never has a tile larger than it (a tile over the SPEC's own axis, e.g. q_tile 128 on
                # seq_q 77, is the ranking's business: issue 32 deliver 1)
                for tile, axis in ((q_tile, "seq_q"), (kv_tile, "seq_kv")):
                    if cfg["quick"][axis] < cfg["shape"][axis]:
                        assert tile <= cfg["quick"][axis], (plan.q_tile, plan.kv_tile, cfg)
            if "SEQ_Q" in consts:  # performance form: the copy's lengths are the quick shape's
                assert (consts["SEQ_Q"], consts["SEQ_KV"]) == (cfg["quick"]["seq_q"], cfg["quick"]["seq_kv"])
                assert consts.get("Q_TILES", plan.q_tiles) == -(-consts["SEQ_Q"] // q_tile)
                assert consts.get("KV_TILES", plan.kv_tiles) == -(-consts["SEQ_KV"] // kv_tile)
            assert cfg["quick_tile_pairs"] == tile_pairs(cfg["quick"], q_tile, kv_tile)
    assert len(tiles_seen) >= 2, "candidates with different tiles"


def test_a_kv_tile_beyond_the_shrunk_axis_is_cut_to_it():
    """The issue's case: a 2048-column KV tile on the baseline's 384-token quick shape runs as 256 columns."""
    path = EXAMPLES / "causal_gqa_tail.yaml"
    spec = load_spec(path)
    default = plan_from_spec(spec, path)
    assert default.form == "baseline"
    plan = default.model_copy(update={"kv_tile": 1024, "q_tile": 512})
    (cfg, *_) = harness_configs(plan)
    assert cfg["quick"]["seq_kv"] == 384 + 1000 % 128 == 488 and cfg["quick"]["seq_q"] == 488
    assert cfg["quick_constants"] == {"Q_TILE": 256, "KV_TILE": 256}
    assert "Q_TILE 512 -> 256, KV_TILE 1024 -> 256" in cfg["quick_shrunk"]
    assert cfg["shape"]["seq_kv"] == 1000 and cfg["tile_pairs"] == tile_pairs(cfg["shape"], 512, 1024)


def test_dense_performance_form_quick_shape():
    path = EXAMPLES / "dense_fa_8192.yaml"
    spec = load_spec(path)
    default = plan_from_spec(spec, path)
    perf = next(c for c in harness_configs(default, 512) if c["name"] == "perf_s8192")
    assert perf["quick"] == {"batch": 1, "num_heads": 8, "num_kv_heads": 8, "seq_q": 1024, "seq_kv": 1024,
                             "head_dim": 128}  # 8 heads: every G x S dividing 8 (up to 8) still divides them
    assert perf["shape"]["seq_q"] == 8192 and perf["tile_pairs"] == 1 * 8 * 2 * 8


def test_rules():
    assert tile_pairs({"batch": 2, "num_heads": 8, "seq_q": 1000, "seq_kv": 1000}, 128, 256) == 2 * 8 * 8 * 4
    assert estimate_seconds(48) == 10.0 and estimate_seconds(480) == 100.0 and estimate_seconds(10, 2.5) == 25.0
    assert perf_factor(8192, 8192, 4096) == 8 and perf_factor(256, 256, 128) == 2 and perf_factor(200, 200, 112) == 1
    assert quick_heads(32, 32, 1) == 32 and quick_heads(8, 2, 4) == 2 and quick_heads(12, 12, 1) == 4
    assert quick_heads(6, 3, 2) == 1  # gcd(6, 32) = 2: one KV head of 2 query heads


def test_a_long_run_says_so_first():
    cfg = {"name": "perf", "tile_pairs": 480, "quick_tile_pairs": 16,
           "shape": {"batch": 1, "seq_q": 8192}, "quick": {"batch": 1, "seq_q": 1024}}
    note = long_run_note(cfg, quick=False)
    assert note == ("perf: 480 tile pairs at batch 1, seq_q 8192: expect about 100 s of compile + SIM "
                    "(~48 pairs per 10 s); --quick runs a shrunk shape")
    assert long_run_note(cfg, quick=True) is None
