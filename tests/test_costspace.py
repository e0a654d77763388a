"""Cost-model candidate space (issue 11 item 3): the plan fields a ranked row pins, rectangular cube
tiles in the kernel."""

from __future__ import annotations

import ast
import json

import pytest

from conftest import EXAMPLES, run_cli
from opdesign.costmodel import plan_fields, rank_candidates, with_cube_tiles
from opdesign.render.design import render_all
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec
from opdesign.validate.api_surface import check_source

DENSE = load_spec(EXAMPLES / "dense_fa_8192.yaml")


def test_plan_fields_of_a_row_and_of_its_json_dict_agree() -> None:
    ranking = rank_candidates(DENSE, estimate(DENSE), top=3)
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
