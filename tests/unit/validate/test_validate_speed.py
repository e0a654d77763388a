"""What `opdesign validate` loads and shares (issue 15): no numpy / Jinja / Typer / planner-only
modules on its path, the catalog read from its hash-keyed cache, one child list and one tree per
text for all kernel rules (opdesign.validate.analysis.astnodes). Figures: benchmarks/bench_validate.py."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO

from opdesign.validate import validate_paths
from opdesign.validate.analysis import astnodes
from opdesign.validate.engine import memo
from opdesign.workflows.new import new_design

HEAVY = ("numpy", "jinja2", "typer", "click", "opdesign.tuning", "opdesign.render.design", "opdesign.workflows.new",
         "opdesign.cli.app")
#: Planner-only modules: the validator re-derives budgets and expansions with opdesign.plan.core alone.
PLANNER_ONLY = ("opdesign.spec", "opdesign.plan.models", "opdesign.plan.pins", "opdesign.skeletons.sk01.plan",
                "opdesign.skeletons.sk01.parts", "opdesign.skeletons.sk02.plan", "opdesign.skeletons.sk16.plan",
                "numpy", "jinja2")

_PROBE = """
import contextlib, io, json, sys
sys.argv = ["opdesign", *json.loads(sys.argv[1])]
from opdesign.cli.entry import main
out = io.StringIO()
code = None
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "out": out.getvalue(), "loaded": [m for m in %r if m in sys.modules]}))
"""


@pytest.fixture(scope="module")
def design(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fv") / "dense"
    new_design(EXAMPLES / "dense_fa_8192.yaml", folder)
    return folder


def _probe(argv: list[str], cache: Path, modules: tuple[str, ...] = HEAVY) -> dict:
    env = {**os.environ, "OPDESIGN_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _PROBE % (modules,), json.dumps(argv)], capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(out.stdout)


def test_validate_loads_no_renderer_cost_model_typer_or_numpy(design: Path, tmp_path: Path) -> None:
    for argv in (["validate", str(design)], ["validate", "--format", "json", str(design)]):
        result = _probe(argv, tmp_path / "cache")
        assert result["code"] == 0
        assert result["loaded"] == []


def test_validate_loads_no_spec_plan_models_or_planner(design: Path, tmp_path: Path) -> None:
    sparse, backward = tmp_path / "sparse", tmp_path / "backward"
    new_design(EXAMPLES / "sparse_topk_2048.yaml", sparse)  # SK-02
    new_design(EXAMPLES / "sk16_backward_lm.yaml", backward)  # SK-16
    result = _probe(["validate", str(design), str(sparse), str(backward)], tmp_path / "cache", PLANNER_ONLY)
    assert result["loaded"] == []
    assert result["code"] == 0
    assert result["out"].splitlines()[-1] == "checked 6 files: 0 errors, 1 warning, 0 infos"
    assert "DESIGN.md:56: C-TILE-04 warning: stated expansion 237568 over the whole traced body" in result["out"]


def test_validate_rederives_a_budget_without_the_planner(tmp_path: Path) -> None:
    """A stated UB total the tiles do not give: the skeleton's budget is re-derived (OD-NUM-05), still with
    no planner module loaded."""
    bad = REPO / "tests" / "fixtures" / "validate" / "C-TILE-03" / "bad.md"
    result = _probe(["validate", "--format", "json", str(bad)], tmp_path / "cache", PLANNER_ONLY)
    assert result["loaded"] == []
    assert result["code"] == 1
    found = {(f["rule"], f["line"], f["message"]) for f in json.loads(result["out"])["findings"]}
    assert ("OD-NUM-05", 50, "UB total 200000 B, the tiles give 182528 B") in found
    assert ("C-TILE-03", 50, "UB total 200000 B exceeds the capacity 196608 B") in found


def test_a_second_process_reads_the_catalog_from_the_cache_with_the_same_findings(design: Path,
                                                                                 tmp_path: Path) -> None:
    cold = _probe(["validate", "--format", "json", str(design)], tmp_path / "cache")
    kept = sorted(p.name.split("-")[0] for p in (tmp_path / "cache" / "catalog").iterdir())
    warm = _probe(["validate", "--format", "json", str(design)], tmp_path / "cache")
    assert kept == ["catalog", "pypto_api"]
    assert warm == cold
    assert json.loads(warm["out"])["summary"] == {"error": 0, "warning": 1, "info": 0}


_SOURCE = """
import pypto

@pypto.frontend.jit()
def k(q, k_in):
    acc = [x * 2 for x in range(4) if x]
    for i in pypto.loop(4, name="LOOP"):
        acc = pypto.add(acc, q[i:i + 1, ...])
    return {"a": acc, **{}}, lambda y: y + 1
"""


def test_walk_and_children_follow_the_ast_order() -> None:
    tree = ast.parse(_SOURCE)
    expected = [type(n).__name__ for n in ast.walk(tree)]
    assert [type(n).__name__ for n in astnodes.walk(tree)] == expected
    assert [type(n).__name__ for n in astnodes.walk(tree)] == expected  # second walk: kept child lists
    for node in ast.walk(tree):
        assert list(astnodes.children(node)) == list(ast.iter_child_nodes(node))
    assert ast.dump(tree) == ast.dump(ast.parse(_SOURCE))  # the kept lists are not fields
    assert "Lambda" in expected and "ListComp" in expected and len(expected) > 60


def test_parse_shares_one_tree_per_text_and_forgets_on_clear() -> None:
    memo.clear()
    first = astnodes.parse(_SOURCE)
    assert astnodes.parse(_SOURCE) is first
    assert astnodes.parse(_SOURCE + "\n") is not first
    memo.clear()
    assert astnodes.parse(_SOURCE) is not first
    with pytest.raises(SyntaxError):
        astnodes.parse("def (:")


def test_first_sight_and_repeat_give_the_same_findings(design: Path) -> None:
    memo.clear()
    cold = validate_paths([design])
    again = validate_paths([design])  # memo and kept trees serve it
    memo.clear()
    fresh = validate_paths([design])
    assert cold.model_dump() == again.model_dump() == fresh.model_dump()
    assert [f.rule for f in cold.findings] == ["C-TILE-04"]
