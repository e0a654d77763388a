"""Issue 30 item 8: the smaller defects a new user met, one test each."""

from __future__ import annotations

from conftest import EXAMPLES


def test_bottleneck_is_the_largest_stage_of_the_busier_pool_v1_on_the_cube_included():
    """stages.py compared only C1 with C2 on the AIC: a V1 that runs on the cube core (vector tile wider
    than the QK tile's n) and is the largest stage was never named."""
    from opdesign.spec import load_spec
    from opdesign.workflows.new import plan_from_spec_file, rank_spec

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


def _spec_error(**changes):
    import pytest
    from conftest import spec_variant

    from opdesign.errors import SpecError
    from opdesign.spec import load_spec

    base = load_spec(EXAMPLES / "paged_fp8_decode.yaml")
    with pytest.raises(SpecError) as err:
        spec_variant(base, **changes)
    return err.value.message


def test_op_name_keyword_is_called_a_keyword():
    msg = _spec_error(op_name="class")
    assert "op_name: 'class' is a Python keyword" in msg, msg
    assert "not a Python identifier" not in msg


def test_rtol_nan_is_not_a_number_not_a_range():
    msg = _spec_error(precision={"rtol": float("nan")})
    assert msg.endswith("precision.rtol: is not a number (.nan); give a tolerance in (0, 1], e.g. 0.02"), msg


def test_block_size_must_keep_the_cube_alignment():
    """block_size 100 made KV_TILE 200 (two pages), not a multiple of the bf16 cube alignment 16 (C-TILE-05)."""
    msg = _spec_error(shape__block_size=100)
    assert "shape.block_size: block_size 100 is not a multiple of 16 for bf16" in msg, msg
    assert "(C-TILE-05)" in msg
    from conftest import spec_variant

    from opdesign.spec import load_spec

    spec_variant(load_spec(EXAMPLES / "paged_fp8_decode.yaml"), shape__block_size=16)  # vLLM's default page: fine


def test_performance_form_scaffold_quick_divides_the_tiles_with_the_lengths(tmp_path):
    """The scaffold's --quick shrank seq 8192 to 384 but kept Q_TILE 4096 (one tile x one tile); it now
    divides lengths and tiles by the plan's quick_factor, as the kernel's --quick does (the same 2 x 8 loop)."""
    import subprocess
    import sys

    from opdesign.render.design import render_kernel, render_scaffold
    from opdesign.skeletons.registry import estimate
    from opdesign.spec import load_spec

    plan = estimate(load_spec(EXAMPLES / "dense_fa_8192.yaml"))
    assert (plan.form, plan.quick_factor, plan.q_tiles, plan.kv_tiles) == ("performance", 8, 2, 8)
    assert "'Q_TILE': 512, 'KV_TILE': 128" in render_kernel(plan)  # the kernel's quick_constants
    script = tmp_path / "s.py"
    script.write_text(render_scaffold(plan), encoding="utf-8")
    res = subprocess.run([sys.executable, str(script), "--quick", "--config", "func_b2_s8192"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("[quick: seq_q 8192 -> 1024, seq_kv 8192 -> 1024, Q_TILE 4096 -> 512, KV_TILE 1024 -> 128] PASS"
            in res.stdout), res.stdout


def test_scaffold_progress_is_paced_by_time_not_by_step_count(tmp_path):
    """Progress came every 2048 KV steps (minutes apart on a large config); now a line is due PROGRESS_SECONDS
    after the last one. With the pace set to 0 every KV step prints one (no timing is asserted)."""
    import subprocess
    import sys

    from opdesign.render.design import render_scaffold
    from opdesign.skeletons.registry import estimate
    from opdesign.spec import load_spec

    script = render_scaffold(estimate(load_spec(EXAMPLES / "causal_gqa_tail.yaml")))
    assert "PROGRESS_SECONDS = 5.0" in script and "PROGRESS_STEPS" not in script
    path = tmp_path / "s.py"
    path.write_text(script.replace("PROGRESS_SECONDS = 5.0", "PROGRESS_SECONDS = 0.0"), encoding="utf-8")
    res = subprocess.run([sys.executable, str(path), "--quick", "--config", "func_s300_kv700"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    steps = [ln for ln in res.stderr.splitlines() if ln.startswith("  kernel: ")]
    assert steps and steps[0].startswith("  kernel: 1 KV steps (batch 1/"), steps[:2]


def test_tnd_causal_balance_says_it_counts_full_lengths():
    """The banded split counts every batch at the full lengths; for packed (TND) batches DESIGN.md now says so."""
    from conftest import REPO

    from opdesign.render.design import render_design
    from opdesign.skeletons.registry import estimate
    from opdesign.spec import load_spec

    plan = estimate(load_spec(REPO / "tests/fixtures/sk01/causal_gqa_tnd.yaml"))
    assert plan.balance is not None and plan.balance.assumption is not None
    line = next(ln for ln in render_design(plan, "en").splitlines() if ln.startswith("Scheduling ("))
    assert "the split counts every packed (TND) batch at the full seq_q 4096 and seq_kv 4096" in line
    dense = estimate(load_spec(EXAMPLES / "causal_gqa_tail.yaml"))  # fixed lengths: nothing assumed
    assert dense.balance.assumption is None


def test_an_unlocated_framework_error_gets_the_kernel_line_and_the_reason():
    """Issue 30 item 6: a dense config at seq 2048 on the performance kernel (SEQ_Q = 8192) failed with a bare
    `VIEWOpError ... func: TENSOR_default`; verify now names the constant's line and the mismatch."""
    from opdesign.pypto_run.selfcheck import explain_unlocated
    from opdesign.render.design import render_kernel
    from opdesign.skeletons.registry import estimate
    from opdesign.spec import load_spec

    kernel = render_kernel(estimate(load_spec(EXAMPLES / "dense_fa_8192.yaml")))
    seq_line = next(i for i, ln in enumerate(kernel.splitlines(), 1) if ln.startswith("SEQ_Q = 8192"))
    shape = {"batch": 1, "num_heads": 1, "num_kv_heads": 1, "seq_q": 2048, "seq_kv": 2048, "head_dim": 128}
    line, reason = explain_unlocated(kernel, shape)
    assert (line, reason) == (seq_line, "the config has seq_q 2048 but the kernel fixes SEQ_Q = 8192 at compile time")
    # --quick replaces the constants: the quick shape agrees with them
    quick = dict(shape, seq_q=1024, seq_kv=1024)
    line, reason = explain_unlocated(kernel, quick, {"SEQ_Q": 1024, "SEQ_KV": 1024, "Q_TILE": 512, "KV_TILE": 128})
    assert line is None and reason.startswith("the framework's error names no kernel line, "
                                              "and the config's shape agrees")
