"""Layout TND (packed varlen) for SK-02 (sparse top-k) and SK-16 (backward): the plans, the artifacts
(new -> validate -> scaffold, quick and full) and, marked `pypto`, the real kernels in PyPTO's SIM.

Contract: q [T_q, N, D], k / v [T_kv, N_kv, D]; batch b owns rows [cum[b-1], cum[b]) (cum[-1] = 0) of
the cumulative int32 [batch] end offsets actual_seq_q / actual_seq_kv; SK-02's top-k row of a packed
token indexes its own batch's KV.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, run_cli, spec_variant

from opdesign.errors import SpecError
from opdesign.render.design import render_kernel, render_scaffold
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

SK02_TND = REPO / "tests/fixtures/sk02/sparse_topk_tnd.yaml"
SK16_TND = REPO / "tests/fixtures/sk16/backward_tnd.yaml"
SPECS = {"sk02": SK02_TND, "sk16": SK16_TND}
CUMULATIVE = ["actual_seq_q", "actual_seq_kv"]


def _inputs(plan):
    return {t.name: t.shape for t in plan.primary_inputs}


# --- plans ------------------------------------------------------------------------------------------


def test_sk02_plans_tnd_with_per_token_indices_and_both_cumulative_offsets():
    plan = estimate(load_spec(SK02_TND))
    assert (plan.skeleton.id, plan.layout, plan.fallback_from) == ("SK-02", "TND", None)
    assert list(_inputs(plan)) == ["q", "k", "v", *CUMULATIVE, "topk_indices"]
    assert _inputs(plan)["q"] == ["batch * seq_q", "num_heads", "head_dim"]
    assert _inputs(plan)["k"] == ["batch * seq_kv", "num_kv_heads", "head_dim"]
    assert _inputs(plan)["topk_indices"] == ["batch * seq_q", "topk"]  # one row per packed query token
    assert _inputs(plan)["actual_seq_q"] == _inputs(plan)["actual_seq_kv"] == ["batch"]
    assert "kv_act_seqs" not in _inputs(plan)  # TND reads the KV length from the cumulative offsets
    assert plan.config["runtime_options"]["ready_on_host_tensors"] == CUMULATIVE
    assert plan.batch_lengths == {"seq_q": "actual_seq_q", "seq_kv": "actual_seq_kv"}
    assert [row.bound for row in plan.loops][:2] == ["batch", "q_len = actual_seq_q[b] - q_start"]


def test_sk02_bsnd_example_keeps_kv_act_seqs():
    plan = estimate(load_spec(REPO / "examples/specs/sparse_topk_2048.yaml"))
    assert list(_inputs(plan)) == ["q", "k", "v", "topk_indices", "kv_act_seqs"]
    assert plan.config["runtime_options"]["ready_on_host_tensors"] == ["kv_act_seqs"] and plan.batch_lengths == {}


def test_sk16_plans_tnd_with_packed_gradients_and_stats():
    plan = estimate(load_spec(SK16_TND))
    assert (plan.skeleton.id, plan.layout) == ("SK-16", "TND")
    inputs = _inputs(plan)
    assert list(inputs) == ["q", "k", "v", "o", "do", "l", "m", *CUMULATIVE]
    assert inputs["q"] == inputs["o"] == inputs["do"] == ["batch * seq_q", "num_heads", "head_dim"]
    assert inputs["k"] == inputs["v"] == ["batch * seq_kv", "num_kv_heads", "head_dim"]
    assert inputs["l"] == inputs["m"] == ["batch * seq_q", "num_heads", "1"]
    assert {t.name: t.shape for t in plan.final_outputs} == {
        "dq": inputs["q"], "dk": inputs["k"], "dv": inputs["v"]}
    assert plan.config["runtime_options"]["ready_on_host_tensors"] == CUMULATIVE
    entry = next(e for e in plan.config_entries if e.key == "runtime_options.ready_on_host_tensors")
    assert entry.status == "required" and "SK-16-R10" in entry.source
    bounds = {row.name: row.bound for row in plan.loops}
    assert (bounds["q_idx (pass 1)"] == "ceildiv(q_len, Q_TILE)"
            and bounds["kv_idx (pass 2)"] == "ceildiv(kv_len, KV_TILE)")


@pytest.mark.parametrize("layout", ["BNSD", "BSND"])
def test_sk16_padded_varlen_is_refused_naming_the_packed_layout(layout):
    spec = spec_variant(load_spec(SK16_TND), layout=layout)
    with pytest.raises(SpecError, match=r"^dynamic_axes\.1\.uniform: a varlen backward on layout "
                                        rf"{layout} is not planned .*SK-16-R10.*declare `layout: TND`$"):
        estimate(spec)


def test_sk16_tnd_with_uniform_axes_still_reads_the_cumulative_offsets():
    data = load_spec(SK16_TND).model_dump(mode="json", exclude_none=True)
    axes = [dict(a, uniform=True) for a in data["dynamic_axes"]]
    plan = estimate(spec_variant(load_spec(SK16_TND), dynamic_axes=axes))
    assert [t.name for t in plan.primary_inputs][-2:] == CUMULATIVE


# --- kernels: the cum[b-1] offsets --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SPECS))
def test_tnd_kernel_reads_cum_b_minus_1_offsets(name):
    text = render_kernel(estimate(load_spec(SPECS[name])))
    ast.parse(text)
    for line in ("prev, not_first = (b_idx - 1).max(0), b_idx.min(1)",
                 "q_start = actual_seq_q[prev] * not_first", "kv_start = actual_seq_kv[prev] * not_first",
                 "q_len = actual_seq_q[b_idx] - q_start", "kv_len = actual_seq_kv[b_idx] - kv_start"):
        assert text.count(line) == (1 if name == "sk02" else 2), line  # SK-16: once per pass
    assert "actual_q" not in text.replace("actual_seq_q", "")  # TND has no per-batch seq_q tensor
    if name == "sk02":
        assert "idx = pypto.view(topk_indices, [TOPK], [(q_start + s_idx) * TOPK])" in text
        assert "kv_row, kv_col = kv_start, kv_h * HEAD_DIM" in text
    else:
        assert text.count("kv_row, kv_col = kv_start + kv_off, kv_h * HEAD_DIM") == 2
        assert text.count("q_row, q_col, lm_col = q_start + q_off, h_idx * HEAD_DIM, h_idx") == 2


# --- artifacts: new -> validate -> scaffold (quick and full) -------------------------------------------


@pytest.fixture(scope="module", params=sorted(SPECS))
def generated(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "op"
    res = run_cli("new", "--spec", str(SPECS[request.param]), "--out", str(out))
    assert res.returncode == 0, res.stderr
    return request.param, out


def test_tnd_design_validates_clean(generated):
    _, out = generated
    res = run_cli("validate", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip().endswith("0 errors, 0 warnings, 0 infos"), res.stdout
    design = (out / "DESIGN.md").read_text(encoding="utf-8")
    assert "CUMULATIVE end offsets" in design and "cum[-1] = 0" in design


def test_tnd_new_is_deterministic(generated, tmp_path):
    name, out = generated
    again = tmp_path / "again"
    assert run_cli("new", "--spec", str(SPECS[name]), "--out", str(again)).returncode == 0
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((out / f).read_bytes() == (again / f).read_bytes() for f in files)


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_tnd_scaffold_passes(generated, quick):
    _, out = generated
    script = next(out.glob("*_scaffold.py"))
    res = subprocess.run([sys.executable, str(script), *(["--quick"] if quick else [])],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "self-check: 2 of 2 configs within tolerance"


def test_sk02_tnd_scaffold_has_skipped_tokens_and_a_short_batch(tmp_path):
    """Batch 0 holds more query tokens than KV rows (seq_kv at its low end 2): its early tokens see no KV."""
    path = tmp_path / "s.py"
    path.write_text(render_scaffold(estimate(load_spec(SK02_TND))), encoding="utf-8")
    res = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)
    lines = res.stdout.splitlines()
    assert res.returncode == 0, res.stdout + res.stderr
    # func_packed_b3: q_lens [6, x, 1], kv_lens [2, y, 320]: tokens 0..3 of batch 0 have cur_seq == 0
    assert "skipped tokens (cur_seq == 0)=4 effective topk in [0, 128]" in lines[0], lines[0]
    assert "skipped tokens (cur_seq == 0)=2 effective topk in [0, 100]" in lines[1], lines[1]


def test_sk16_tnd_causal_scaffold_passes(tmp_path):
    """The causal mask of a packed backward is bottom-right aligned per batch (kv_len - q_len)."""
    path = tmp_path / "s.py"
    path.write_text(render_scaffold(estimate(spec_variant(load_spec(SK16_TND), mask="causal"))), encoding="utf-8")
    res = subprocess.run([sys.executable, str(path), "--quick"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count(" model_err=") == 6


# --- the real kernels (PyPTO 0.2.0 SIM + pass verification) ------------------------------------------

MISSING = [m for m in ("pypto", "torch") if importlib.util.find_spec(m) is None]
needs_pypto = pytest.mark.skipif(bool(MISSING), reason=f"the opdesign[pypto] extra is not installed "
                                 f"({', '.join(MISSING)} missing): pip install '.[pypto]'")


def _verify(out, **kw):
    from opdesign.pypto_run.design import verify_dir

    return verify_dir(out, quick=True, **kw)


@pytest.mark.pypto
@needs_pypto
@pytest.mark.parametrize("name, changes", [("sk02", {}), ("sk16", {}), ("sk16", {"mask": "causal"})],
                         ids=["sk02", "sk16", "sk16_causal"])
def test_tnd_kernel_verifies_against_the_torch_golden(tmp_path, name, changes):
    spec = SPECS[name]
    if changes:  # the causal mask is bottom-right aligned per batch: kv_len - q_len
        spec = tmp_path / "spec.yaml"
        data = load_spec(SPECS[name]).model_dump(mode="json", exclude_none=True) | changes
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / name
    assert run_cli("new", "--spec", str(spec), "--out", str(out)).returncode == 0
    report = _verify(out)
    assert report.errors == [], report.errors
    assert [c.name for c in report.configs] == [c.name for c in load_spec(spec).typical_configs]
    for config in report.configs:
        assert config.compiled and config.sim_us > 0
        assert config.verify.status == "PASS" and config.verify.failed_passes == [], config
        assert config.verify.max_abs_diff is not None and config.verify.max_abs_diff <= 0.05
    assert report.passed


@pytest.mark.pypto
@needs_pypto
@pytest.mark.parametrize("name, old, new", [
    ("sk02", "kv_row, kv_col = kv_start, kv_h * HEAD_DIM", "kv_row, kv_col = 0, kv_h * HEAD_DIM"),
    ("sk16", "kv_row, kv_col = kv_start + kv_off, kv_h * HEAD_DIM", "kv_row, kv_col = kv_off, kv_h * HEAD_DIM"),
], ids=["sk02_kv_offset_dropped", "sk16_kv_offset_dropped"])
def test_tnd_kernel_with_a_wrong_batch_offset_fails(tmp_path, name, old, new):
    out = tmp_path / name
    assert run_cli("new", "--spec", str(SPECS[name]), "--out", str(out)).returncode == 0
    kernel = next(out.glob("*_kernel.py"))
    text = kernel.read_text()
    assert old in text
    kernel.write_text(text.replace(old, new))
    report = _verify(out, configs=["func_packed_b3"])
    assert report.compiled and not report.passed
    assert report.configs[0].verify.status == "FAILED" and report.configs[0].verify.max_abs_diff > 0.05, report
