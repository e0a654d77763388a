"""`opdesign rank --sim K`: picks, agreement maths (hand-computed, no scipy) and argument errors (issue 11 item 2)."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import EXAMPLES, REPO, run_cli

from opdesign.workflows.sim_rank import agreement, average_ranks, kendall, sim_picks, spearman

TINY = REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml"
HAVE_PYPTO = all(importlib.util.find_spec(m) is not None for m in ("pypto", "torch"))


def test_spearman_and_kendall_without_ties():
    # d = rank differences -1, 1, -1, 1, 0: rho = 1 - 6 * 4 / (5 * 24) = 0.8; 8 concordant, 2 discordant pairs
    x, y = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5]
    assert spearman(x, y) == pytest.approx(0.8)
    assert kendall(x, y) == pytest.approx(0.6)
    assert spearman(x, list(reversed(x))) == pytest.approx(-1.0) and kendall(x, [10, 20, 30, 40, 50]) == 1.0


def test_spearman_and_kendall_with_ties():
    # x ranks 1.5 1.5 3 4: rho = 4.5 / sqrt(4.5 * 5); tau-b = 5 / sqrt(6 * 5) (one pair tied in x only)
    x, y = [1, 1, 2, 3], [1, 2, 3, 4]
    assert average_ranks(x) == [1.5, 1.5, 3.0, 4.0]
    assert spearman(x, y) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert kendall(x, y) == pytest.approx(5 / 30 ** 0.5)
    assert spearman([1, 1], [1, 2]) is None and kendall([1], [2]) is None


def test_picks_are_the_top_k_and_k_evenly_spaced_ranks():
    assert sim_picks(100, 3) == [1, 2, 3, 4, 52, 100]
    assert sim_picks(4, 3) == [1, 2, 3, 4]
    assert sim_picks(2, 3) == [1, 2]
    assert sim_picks(21, 10) == [*range(1, 16), *range(17, 22)]  # 11 + round(i * 10 / 9): 16 falls between


def test_agreement_reports_the_sim_rank_of_the_best_scored_row():
    rows = [{"rank": 1, "score_cycles": 10, "sim_us": 30.0}, {"rank": 2, "score_cycles": 20, "sim_us": 20.0},
            {"rank": 7, "score_cycles": 70, "sim_us": 40.0}, {"rank": 9, "score_cycles": 90, "sim_us": None}]
    a = agreement(rows)
    assert a["n"] == 3 and a["top1_sim_rank"] == 2 and a["top1_regret_pct"] == 50.0
    assert a["spearman"] == pytest.approx(0.5) and a["kendall"] == pytest.approx(0.3333, abs=1e-4)


def test_rank_sim_refuses_other_skeletons_and_bad_k():
    res = run_cli("rank", "--spec", str(EXAMPLES / "sk16_backward_lm.yaml"), "--sim", "1")
    assert res.returncode == 2 and "SK-01" in res.stderr
    res = run_cli("rank", "--spec", str(TINY), "--sim", "0")
    assert res.returncode == 2 and "error: invalid_input:" in res.stderr


@pytest.mark.skipif(HAVE_PYPTO, reason="the extra is installed: the marked pypto test runs the real SIM")
def test_rank_sim_without_the_extra_is_extra_missing():
    res = run_cli("rank", "--spec", str(TINY), "--sim", "1")
    assert res.returncode == 2 and res.stderr.startswith("error: extra_missing:")
    assert "pip install 'opdesign[pypto]'" in res.stderr


def test_sim_text_prints_rectangular_tiles_as_m_x_n():
    """rank --sim's text table: qk / pv / vec tiles are [m, n] lists (the fidelity run of 19:35 crashed on them)."""
    from opdesign.workflows.sim_rank import format_sim_text

    row = {"rank": 3, "q_tile": 128, "kv_tile": 512, "qk_tile": [128, 64], "pv_tile": [64, 512], "vec_tile": [16, 128],
           "unroll_factor": 4, "head_group": 1, "streams": 2, "score_cycles": 123456, "sim_us": 71.25,
           "simulated": True, "sim_error": None, "same_kernel_as": None}
    report = {"op_name": "op", "legal": 40, "rows": [row, {**row, "rank": 9, "simulated": False}],
              "sim": {"pypto_version": "0.2.0", "shape": {"seq_q": 256}, "shape_note": "as specified"},
              "agreement": {"n": 1, "spearman": None, "kendall": None, "top1_sim_rank": 1, "top1_regret_pct": 0.0}}
    lines = format_sim_text(report).splitlines()
    assert lines[2].split() == ["3", "128", "512", "128x64", "64x512", "16x128", "4", "1", "2", "123456", "71.25"]
    assert len(lines) == 4 and "Spearman rho n/a" in lines[3] and "SIM rank 1 (regret 0.0 %" in lines[3]
