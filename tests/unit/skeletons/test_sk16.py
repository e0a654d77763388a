"""SK-16 attention backward (issue 4): plan, two-pass decision, artifacts, scaffold, validator rules."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest
import yaml
from conftest import EXAMPLES, run_cli

from opdesign.catalog import load_catalog
from opdesign.errors import SpecError
from opdesign.render.design import render_all, render_design
from opdesign.skeletons.registry import estimate
from opdesign.spec import Spec, TwoPassReason, load_spec, parse_spec
from opdesign.validate.engine import validate_text

EXAMPLE = EXAMPLES / "sk16_backward_lm.yaml"


def _data(**changes) -> dict:
    data = yaml.safe_load(EXAMPLE.read_text())
    for key, value in changes.items():
        if key == "shape":
            data["shape"].update(value)
        else:
            data[key] = value
    return data


def _plan(**changes):
    return estimate(parse_spec(_data(**changes)))


def _run(path, timeout=120):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout)


# --- SPEC --------------------------------------------------------------------


def test_two_pass_reasons_are_the_cards_keys():
    card = load_catalog().card("SK-16").param("two_pass_reasons")
    assert set(typing.get_args(TwoPassReason)) == set(card) == {
        "no_atomic_add", "deterministic_reduction", "no_prezero_output"}


def test_unknown_two_pass_reason_names_the_field():
    with pytest.raises(SpecError, match="two_pass_reason"):
        parse_spec(_data(two_pass_reason="faster"))
    assert Spec.model_json_schema()["properties"]["two_pass_reason"]["anyOf"][0]["enum"] == [
        "no_atomic_add", "deterministic_reduction", "no_prezero_output"]


# --- plan ----------------------------------------------------------------------


@pytest.fixture
def atomic_add_release(monkeypatch):
    """A PyPTO release with ``pypto.atomic_add``: SK-16 keeps the card's single pass (SK-16-R1)."""
    import dataclasses

    from opdesign.skeletons.sk16 import plan as sk16_plan

    real = sk16_plan.load_api_surface()
    modules = {**real.modules, "pypto": {**real.modules["pypto"], "atomic_add": {"kind": "function"}}}
    monkeypatch.setattr(sk16_plan, "load_api_surface", lambda: dataclasses.replace(real, modules=modules))


def test_without_atomic_add_the_plan_is_two_pass_and_says_why():
    """PyPTO 0.2.0 has no atomic_add (the manifest says so): the framework wins over the card's default."""
    from opdesign.catalog.pypto_api import load_api_surface

    assert not load_api_surface().has("pypto.atomic_add")
    plan = estimate(load_spec(EXAMPLE))
    wording = load_catalog().card("SK-16").param("two_pass_reasons")["no_atomic_add"]
    assert plan.passes == 2 and plan.variant == "two pass"
    assert plan.two_pass_reason == (f"{wording}: PyPTO 0.2.0 has no pypto.atomic_add (constraints/pypto_api.yaml), "
                                    "so the single pass cannot add dQ, dK and dV into zeroed outputs")
    assert plan.task_count == 2 * 8 * 4 * 5 * 2 == 640
    assert {i.name: i.bytes for i in plan.ub_budget.items}["acc_resident"] == 2 * 32 * 64 * 4
    assert plan.ub_budget.total_bytes == 93184 + 16384
    assert _plan(mask="causal").task_count == 2 * 272  # causal: visible block pairs, once per pass
    assert f"Structure: **two pass**, passes = 2: {wording}: PyPTO 0.2.0" in render_design(plan)


def test_example_plan_single_pass_numbers(atomic_add_release):
    plan = estimate(load_spec(EXAMPLE))
    assert plan.skeleton.id == "SK-16" and plan.passes == 1 and plan.two_pass_reason is None
    assert [(c.id, c.passed) for c in plan.skeleton_checks] == [
        ("SK-16-WHEN-1", True), ("SK-16-WHEN-2", True), ("SK-16-WHEN-3", True)]
    assert plan.skeleton_checks[2].observed == "C1 2 (S, dP) + C2 3 (dV, dQ, dK) = 5"
    # a2 UB: 128 x 128 tiles need 251904 B > 196608 B, so the safe tile halves to 64
    assert (plan.q_tile, plan.kv_tile, plan.q_tiles, plan.kv_tiles) == (64, 64, 4, 5)
    assert plan.root_count == 2 * 8 * 4 == 64
    assert plan.task_count == 2 * 8 * 4 * 5 * 1 == 320
    counts = {d.name: d.value for d in plan.counts}
    assert counts["qk_per_block_pair"] == 1 and counts["passes"] == 1
    assert counts["work_per_root_macs"] == 5 * 64 * 300 * 64
    ub = {i.name: i.bytes for i in plan.ub_budget.items}
    assert ub == {"stats_rows": 3 * 32 * 32, "MM1_RESULTS": 2 * 32 * 64 * 4 * 2, "P_DS_CAST": 2 * 32 * 64 * 2,
                  "MM2_RESULTS": 2 * 32 * 64 * 4 * 2, "vector_op_peak": 16 * 64 * 4 * 4}
    assert plan.ub_budget.total_bytes == 93184 and plan.l1_budget.total_bytes == 81920
    assert plan.config == {"pass_options": {"cube_l1_reuse_setting": {-1: 1, 0: 4}},
                           "runtime_options": {"stitch_function_max_num": 128, "device_sched_mode": 3}}
    stitch = next(e for e in plan.config_entries if e.key == "runtime_options.stitch_function_max_num")
    assert "Card value 512, capped at 128: PyPTO 0.2.0's SIM runtime segfaults" in stitch.purpose  # framework wins
    assert [t.name for t in plan.primary_inputs] == ["q", "k", "v", "o", "do", "l", "m"]
    assert [(t.name, t.dtype) for t in plan.final_outputs] == [("dq", "float32"), ("dk", "float32"), ("dv", "float32")]
    assert plan.design_block()["passes"] == 1


def test_tile_128_when_the_budget_allows_it(atomic_add_release):
    # head_dim 64 on a5 (UB 253952 B, 950PR_958x.ini ub_size): 128 x 128 needs 6144 + 131072 + 32768 + 65536 + 16384 B
    # and fits
    plan = _plan(device="a5")
    assert plan.q_tile == 128 and plan.ub_budget.total_bytes == 251904 and plan.ub_budget.capacity_bytes == 253952


def test_a3_records_the_measured_workspace_but_the_release_has_no_such_option():
    # PyPTO 0.2.0's set_options raises map::at for max_workspace_kb: the kernel must not pass it
    plan = _plan(device="a3")
    assert "max_workspace_kb" not in plan.config["runtime_options"]
    assert plan.config["runtime_options"]["stitch_function_max_num"] == 128
    entry = next(e for e in plan.config_entries if e.key == "runtime_options.max_workspace_kb")
    assert entry.value == 25170624 and entry.status == "not passed"
    assert "PyPTO 0.2.0 has no runtime option max_workspace_kb" in str(entry.purpose)
    kernel = render_all(plan, "en")[f"{plan.op_name}_kernel.py"]
    assert "max_workspace_kb" not in kernel and "'stitch_function_max_num': 128" in kernel


@pytest.mark.parametrize("reason", ["no_atomic_add", "deterministic_reduction", "no_prezero_output"])
def test_two_pass_only_with_a_stated_reason_recorded_in_design(reason):
    plan = _plan(two_pass_reason=reason)
    wording = load_catalog().card("SK-16").param("two_pass_reasons")[reason]
    assert plan.passes == 2 and plan.two_pass_reason == wording and plan.variant == "two pass"
    assert plan.task_count == 2 * 8 * 4 * 5 * 2 == 640
    assert {d.name: d.value for d in plan.counts}["qk_per_block_pair"] == 2
    assert {i.name: i.bytes for i in plan.ub_budget.items}["acc_resident"] == 2 * 32 * 64 * 4
    design = render_design(plan)
    assert f"Structure: **two pass**, passes = 2: {wording}." in design
    assert f"| yes: {wording} |" in design


def test_backward_without_stats_names_the_failed_condition():
    with pytest.raises(SpecError, match=r"softmax_stats_input: SK-16 does not apply: SK-16-WHEN-2 failed"):
        _plan(softmax_stats_input=False)


def test_causal_counts_only_visible_block_pairs(atomic_add_release):
    plan = _plan(mask="causal")
    # offset seq_kv - seq_q = 100; last rows 63, 127, 191, 199 see 164, 228, 292, 300 columns
    assert plan.task_count == 2 * 8 * (3 + 4 + 5 + 5) == 272


@pytest.mark.parametrize("changes, field", [
    ({"dynamic_axes": [{"name": "seq_q", "range": [1, 4096], "uniform": False}]}, "dynamic_axes.0.uniform"),
    ({"mask": "sliding_window", "shape": {"window": 128}}, "mask"),
])
def test_unplanned_backward_variants_are_named(changes, field):
    with pytest.raises(SpecError, match=rf"^{field}: "):
        _plan(**changes)


# --- artifacts: new -> validate -> scaffold --------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("sk16") / "sk16_backward_lm"
    res = run_cli("new", "--spec", str(EXAMPLE), "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out


def test_generated_design_validates_clean(generated):
    res = run_cli("validate", str(generated), "--format", "json")
    assert res.returncode == 0, res.stdout
    report = yaml.safe_load(res.stdout)
    assert (report["summary"]["error"], report["summary"]["warning"]) == (0, 0)


def test_zh_design_validates_clean(tmp_path):
    out = tmp_path / "zh"
    assert run_cli("new", "--spec", str(EXAMPLE), "--out", str(out), "--lang", "zh").returncode == 0
    res = run_cli("validate", str(out))
    assert res.returncode == 0 and "0 errors, 0 warnings" in res.stdout, res.stdout


@pytest.mark.slow
def test_scaffold_self_check_passes_with_tails(generated):
    res = _run(generated / "sk16_backward_lm_scaffold.py")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "self-check: 3 of 3 configs within tolerance"
    assert all(line.endswith("PASS") for line in lines[:-1]) and len(lines) == 4
    assert "dq: max_abs_err=" in lines[0] and "dk: max_abs_err=" in lines[0] and "dv: max_abs_err=" in lines[0]


@pytest.mark.slow
def test_scaffold_without_the_dk_scale_fails_its_self_check(generated, tmp_path):
    text = (generated / "sk16_backward_lm_scaffold.py").read_text()
    scaled = "(dk_acc * scale)[:kv_valid]  # V2: scale dK, assemble"  # pass 2 of the two-pass plan
    assert text.count(scaled) == 1
    broken = tmp_path / "broken_scaffold.py"
    broken.write_text(text.replace(scaled, "dk_acc[:kv_valid]  # V2: scale dK (deliberately dropped)"))
    res = _run(broken)
    assert res.returncode == 1
    for line in res.stdout.splitlines()[:-1]:
        assert line.endswith("FAIL")
        dk_rel = float(line.split("dk: max_abs_err=")[1].split("max_rel_err=")[1].split()[0])
        assert dk_rel > 5  # off by 1/scale = sqrt(64) = 8 relative to the largest dK
    assert "self-check: 0 of 3 configs within tolerance" in res.stdout


@pytest.mark.parametrize("changes", [{"two_pass_reason": "deterministic_reduction"}, {"mask": "causal"},
                                     {"layout": "BSND"}])
@pytest.mark.slow
def test_variant_scaffolds_pass(tmp_path, changes):
    spec = tmp_path / "variant.yaml"
    spec.write_text(yaml.safe_dump(_data(op_name="variant", **changes)))
    out = tmp_path / "variant"
    assert run_cli("new", "--spec", str(spec), "--out", str(out)).returncode == 0
    assert run_cli("validate", str(out)).returncode == 0
    res = _run(out / "variant_scaffold.py")
    assert res.returncode == 0 and "3 of 3 configs within tolerance" in res.stdout, res.stdout + res.stderr


# --- validator rules -------------------------------------------------------------

# Each SK-16 rule's failing case lives in tests/fixtures/validate/SK-16-R*/ (mutations.yaml, base sk16_en).


def test_sk16_rules_skip_sk01_designs(tmp_path):
    out = tmp_path / "fwd"
    assert run_cli("new", "--spec", str(EXAMPLES / "causal_gqa_tail.yaml"), "--out", str(out)).returncode == 0
    text = (out / "DESIGN.md").read_text().replace('for b_idx in pypto.loop(batch, name="batch")',
                                                   "for b_idx in pypto.loop(batch)")
    report = validate_text(text, "DESIGN.md", (out / "eval" / "module_interfaces.yaml").read_text())
    assert not [f for f in report.findings if f.rule.startswith("SK-16")]


def test_golden_module_count_reaches_the_plan(tmp_path):
    golden = EXAMPLES.parent.parent / "tests" / "goldens" / "backward_lm_golden.py"
    spec = tmp_path / "with_golden.yaml"
    spec.write_text(yaml.safe_dump(_data(golden=str(golden))))
    res = run_cli("estimate", "--spec", str(spec), "--json")
    assert res.returncode == 0, res.stderr
    plan = yaml.safe_load(res.stdout)
    assert plan["module_count"] == 1 and "meets SK-16" in plan["module_reason"]
