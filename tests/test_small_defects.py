"""Issue 30 item 8: the smaller defects a new user met, one test each."""

from __future__ import annotations

from conftest import EXAMPLES


def test_bottleneck_is_the_largest_stage_of_the_busier_pool_v1_on_the_cube_included():
    """stages.py compared only C1 with C2 on the AIC: a V1 that runs on the cube core (vector tile wider
    than the QK tile's n) and is the largest stage was never named."""
    from opdesign.pipeline import plan_from_spec_file, rank_spec
    from opdesign.spec import load_spec

    path = EXAMPLES / "causal_gqa_tail.yaml"
    ranking = rank_spec(load_spec(path), plan_from_spec_file(path))
    named_v1_on_cube = 0
    for row in ranking.rows:
        if row.bottleneck not in ("C1", "V1", "C2", "V2"):
            continue
        on_aic = row.vec_tile[1] > row.cube_tiles["C1"]["n"][0]
        cube_pool = ["C1", "C2"] + (["V1"] if on_aic else [])
        vec_pool = ["V2"] + ([] if on_aic else ["V1"])
        pool = cube_pool if row.bottleneck in cube_pool else vec_pool
        assert row.bottleneck in pool
        assert row.stages[row.bottleneck] == max(row.stages[k] for k in pool), row
        named_v1_on_cube += row.bottleneck == "V1" and on_aic
    assert named_v1_on_cube > 0
