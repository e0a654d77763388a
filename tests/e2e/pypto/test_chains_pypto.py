"""A streams = 2 candidate's kernel (two online-softmax chains per LOOP_h step) compiles, simulates and
pass-verifies in PyPTO 0.2.0 (marked `pypto`; skips without the extra)."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import REPO, run_cli

MISSING = [m for m in ("pypto", "torch") if importlib.util.find_spec(m) is None]
if MISSING:
    pytest.skip(f"the opdesign[pypto] extra is not installed ({', '.join(MISSING)} missing): "
                "pip install '.[pypto]'", allow_module_level=True)

from opdesign.pypto_run.design import verify_dir  # noqa: E402

pytestmark = pytest.mark.pypto

STREAMS = REPO / "tests" / "fixtures" / "sk01" / "streams_h32_s256.yaml"


def test_streams_2_candidate_compiles_simulates_and_verifies(tmp_path):
    out = tmp_path / "s2"
    res = run_cli("new", "--spec", str(STREAMS), "--out", str(out), "--tiles",
                  "q_tile=128,kv_tile=256,qk_tile=128x128,pv_tile=128x256,vec_tile=16x256,head_group=1,streams=2")
    assert res.returncode == 0, res.stderr
    assert "\nCHAINS = 2  #" in next(out.glob("*_kernel.py")).read_text()
    report = verify_dir(out, quick=True, configs=["perf_h32_s256"])
    assert report.errors == [], report.errors
    (config,) = report.configs
    # the SPEC's quick shape keeps 32 heads (a multiple of every G x S the ranking tries) and halves the lengths
    assert config.shrunk == ("seq_q 256 -> 128, seq_kv 256 -> 128, Q_TILE 128 -> 64, KV_TILE 256 -> 128, "
                             "OUT_ROWS 128 -> 64")
    assert config.shape["num_heads"] == 32
    assert config.compiled and config.sim_us > 0
    assert config.verify.status == "PASS" and config.verify.max_abs_diff <= 0.05, config
    assert report.passed
