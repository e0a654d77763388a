"""`opdesign rank --sim 2` on a tiny SPEC through the real PyPTO SIM (marked `pypto`; skips without the extra)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import REPO, run_cli

MISSING = [m for m in ("pypto", "torch") if importlib.util.find_spec(m) is None]
if MISSING:
    pytest.skip(f"the opdesign[pypto] extra is not installed ({', '.join(MISSING)} missing): "
                "pip install '.[pypto]'", allow_module_level=True)

pytestmark = pytest.mark.pypto

TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"


def test_rank_sim_2_simulates_four_candidates_and_compares():
    res = run_cli("rank", "--spec", str(TINY), "--sim", "2", "--top", "2", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    simulated = [r for r in data["rows"] if r["simulated"]]
    assert [r["rank"] for r in simulated][:2] == [1, 2] and len(simulated) == 4
    assert simulated[-1]["rank"] == max(r["rank"] for r in data["rows"])  # the spread reaches the last legal rank
    assert all(r["sim_us"] > 0 and r["sim_error"] is None for r in simulated), simulated
    assert all(r["sim_us"] is None for r in data["rows"] if not r["simulated"])
    a = data["agreement"]
    assert a["n"] == 4 and 1 <= a["top1_sim_rank"] <= 4 and -1 <= a["spearman"] <= 1 and -1 <= a["kendall"] <= 1
    assert data["sim"]["shape"]["seq_q"] == 256 and "[1/4] rank 1" in res.stderr
