"""Issue 31: one hardware truth. devices.yaml against PyPTO's platform files, the SKU a SPEC names, the
statement of what the release verifies, options by their documented meaning, the schedule (waves, not a
per-core table) and the latency target of a performance config."""

from __future__ import annotations

import configparser
import importlib.util
from pathlib import Path

import pytest
from conftest import EXAMPLES, spec_variant

from opdesign.catalog import load_catalog
from opdesign.errors import SpecError
from opdesign.render.design import render_design
from opdesign.skeletons.registry import estimate
from opdesign.spec import load_spec

#: Figures of the public hicann/pypto platform files (not shipped by 0.2.0), recorded from
#: framework/src/platform/parser/simulation_platform/platform_config/ at commit 883e7dfb0
#: (910PR_9363.ini added in b880577ed, the 950 files in c06986d19): file -> key -> value.
PUBLIC = {
    "910PR_9363.ini": {"SoC_version": "Ascend910C4", "NpuArch": "2201", "cube_core_cnt": 24, "vector_core_cnt": 48,
                       "ub_size": 196608, "l1_size": 524288, "l0_a_size": 65536, "l0_b_size": 65536,
                       "l0_c_size": 131072},
    "950PR_958x.ini": {"SoC_version": "Ascend950PR_9589", "NpuArch": "3510", "cube_core_cnt": 32,
                       "vector_core_cnt": 64, "ub_size": 253952, "l1_size": 524288, "l0_a_size": 65536,
                       "l0_b_size": 65536, "l0_c_size": 262144},
    "950PR_957x.ini": {"SoC_version": "Ascend950PR_9579", "NpuArch": "3510", "cube_core_cnt": 28,
                       "vector_core_cnt": 56},
}
# PyPTO 0.2.0's lib/configs/A2A3.ini (byte-identical to the file at tag r0.2.0, d1c290f36), as recorded; the
# pypto-marked test below reads the installed file itself.
PUBLIC["A2A3.ini"] = {"SoC_version": "Ascend910B1", "NpuArch": "2201", "cube_core_cnt": 24, "vector_core_cnt": 48,
                      "ub_size": 196608, "l1_size": 524288, "l0_a_size": 65536, "l0_b_size": 65536,
                      "l0_c_size": 131072}
#: devices.yaml profile -> the platform file it cites.
PROFILE_FILE = {"a2": "A2A3.ini", "a3": "910PR_9363.ini", "a5": "950PR_958x.ini", "a5/950PR_957x": "950PR_957x.ini"}


def _expected(figures: dict) -> dict:
    """Profile fields from platform-file keys (the keys a file gives)."""
    out = {}
    if "cube_core_cnt" in figures:
        out["aic_cores"] = figures["cube_core_cnt"]
        out["aiv_per_aic"] = figures["vector_core_cnt"] // figures["cube_core_cnt"]
    for key, field in (("ub_size", "ub_bytes"), ("l1_size", "l1_bytes"), ("l0_a_size", "l0a_bytes"),
                       ("l0_b_size", "l0b_bytes"), ("l0_c_size", "l0c_bytes"), ("SoC_version", "soc_version")):
        if key in figures:
            out[field] = figures[key]
    if "NpuArch" in figures:
        out["npu_arch"] = f"DAV_{figures['NpuArch']}"
    return out


@pytest.mark.parametrize("name", sorted(PROFILE_FILE))
def test_public_source_figures_are_the_recorded_ones(name: str) -> None:
    """a2 (A2A3.ini), a3 (910PR_9363.ini) and a5 (950PR_958x.ini / 950PR_957x.ini): each figure equals the
    recorded value of the file it cites, and its source names that file and key=value."""
    device = load_catalog().device(name)
    figures = PUBLIC[PROFILE_FILE[name]]
    expected = _expected(figures)
    assert device.model_dump(include=set(expected)) == expected
    for field, key in (("aic_cores", "cube_core_cnt"), ("ub_bytes", "ub_size"), ("l0c_bytes", "l0_c_size")):
        if key in figures:
            assert PROFILE_FILE[name] in device.sources[field]
            assert f"{key}={figures[key]}" in device.sources[field]
    assert PROFILE_FILE[name] in device.platform


def test_a5_ub_is_the_950_files_not_256_kib() -> None:
    """The issue's finding: a5 was given 262144 B; 950PR_958x.ini [AICoreSpec] ub_size is 253952."""
    cat = load_catalog()
    assert cat.device("a5").ub_bytes == 253952 != 256 * 1024
    assert (cat.device("a5").aic_cores, cat.device("a5/950PR_957x").aic_cores) == (32, 28)
    assert cat.device("a5/950pr_957x").ub_bytes == 253952  # inherited from the family's default SKU
    assert cat.device("a5/950PR_957x").ref("aic_cores") == "a5.skus.950PR_957x.aic_cores"
    assert cat.device("a5/950PR_957x").ref("ub_bytes") == "a5.ub_bytes"


def _installed_ini() -> Path:
    spec = importlib.util.find_spec("pypto")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the opdesign[pypto] extra is not installed (pypto missing): pip install '.[pypto]'")
    return Path(next(iter(spec.submodule_search_locations))) / "lib" / "configs" / "A2A3.ini"


@pytest.mark.pypto
def test_a2_and_the_sim_platform_match_the_installed_a2a3_ini() -> None:
    """PyPTO 0.2.0's only platform file (lib/configs/A2A3.ini) against devices.yaml a2 and sim_platform."""
    ini = configparser.ConfigParser()
    assert ini.read(_installed_ini(), encoding="utf-8"), "lib/configs/A2A3.ini not found in the installed pypto"
    figures = {"SoC_version": ini["version"]["SoC_version"], "NpuArch": ini["version"]["NpuArch"],
               **{k: int(ini["SoCInfo"][k]) for k in ("cube_core_cnt", "vector_core_cnt")},
               **{k: int(ini["AICoreSpec"][k]) for k in ("ub_size", "l1_size", "l0_a_size", "l0_b_size", "l0_c_size",
                                                       "cube_m_size", "cube_n_size", "cube_k_size")}}
    cat = load_catalog()
    a2, sim = cat.device("a2"), cat.sim_platform
    assert a2.model_dump(include=set(_expected(figures))) == _expected(figures)
    assert a2.cube_macs_per_cycle == figures["cube_m_size"] * figures["cube_n_size"] * figures["cube_k_size"]
    assert (sim.soc_version, sim.npu_arch) == (figures["SoC_version"], f"DAV_{figures['NpuArch']}")
    assert (sim.aic_cores, sim.aiv_cores, sim.ub_bytes, sim.l1_bytes, sim.l0c_bytes) == (
        figures["cube_core_cnt"], figures["vector_core_cnt"], figures["ub_size"], figures["l1_size"],
        figures["l0_c_size"])
    assert f"cube_core_cnt={figures['cube_core_cnt']}" in a2.sources["aic_cores"]
    assert a2.sku == "910B1" and figures["SoC_version"] == "Ascend910B1"


def test_the_spec_names_a_sku_or_its_family_default(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLES / "causal_gqa_tail.yaml")  # device a2
    named = spec_variant(spec, device="a2/910B1")
    assert estimate(named).hardware.sku == estimate(spec).hardware.sku == "910B1"
    with pytest.raises(SpecError, match="unknown device 'a2/910B3'.*a2/910B1"):
        spec_variant(spec, device="a2/910B3")  # no PyPTO file gives a 910B3 its own figures
    a5 = estimate(spec_variant(spec, device="a5/950PR_957x"))
    assert (a5.hardware.aic_cores, a5.schedule.cores, a5.hardware.ub_bytes) == (28, 28, 253952)


def test_plan_and_ranking_split_over_one_core_figure() -> None:
    """The calibrated ranking used 24 AIC (a CostParams override) while the plan said 20; now both read
    devices.yaml aic_cores (24, A2A3.ini cube_core_cnt)."""
    from opdesign.tuning.model.calibration import load_params
    from opdesign.tuning.space import context

    assert "cube_cores" not in load_params().model_dump()
    spec = load_spec(EXAMPLES / "causal_gqa_tail.yaml")
    plan = estimate(spec)
    cores = {d.name: d.value for d in plan.counts}
    assert context(spec, plan).cube_cores == plan.schedule.cores == cores["cores_busy"] == 24


def _design(name: str, **changes) -> str:
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    return render_design(estimate(spec_variant(spec, **changes) if changes else spec), lang="en")


def test_what_the_release_verifies_is_stated_only_when_it_holds() -> None:
    a2 = _design("causal_gqa_tail")
    assert "SKU Ascend910B1 (`a2/910B1`, the family's default SKU), DAV_2201; 24 AIC and 48 AIV" in a2
    assert "its figures equal this SKU's" in a2 and "What PyPTO 0.2.0 verifies" not in a2
    assert "the platform file PyPTO 0.2.0 ships" in a2
    a3 = _design("dense_fa_8192")  # a3: 910PR_9363.ini, after 0.2.0
    assert "SKU Ascend910C4" in a3 and "a file PyPTO 0.2.0 does not ship" in a3 and "What PyPTO" not in a3
    a5 = _design("causal_gqa_fai")  # a5, bf16
    assert "What PyPTO 0.2.0 verifies for this design: compile, SIM and verify run on DAV_2201" in a5
    assert "aic_cores 32 (SIM 24); aiv_cores 64 (SIM 48); ub_bytes 253952 (SIM 196608)" in a5
    assert "FC3000" not in a5
    fp8 = _design("paged_fp8_decode")  # a5, quant fp8
    assert "FP8 E4M3 matmul is refused on DAV_2201 at graph build (FC3000" in fp8
    assert "the scaffold's rounding model" in fp8


def test_option_rows_follow_the_docs_and_mark_defaults() -> None:
    design = _design("causal_gqa_tail")
    rows = {line.split(" | ")[0].strip("| `"): line for line in design.splitlines()
            if line.startswith("| `pass_options.") or line.startswith("| `runtime_options.")}
    assert set(rows) >= {"pass_options.cube_nbuffer_setting", "pass_options.vec_nbuffer_setting",
                         "runtime_options.stitch_function_max_num", "runtime_options.device_sched_mode"}
    for key, row in rows.items():
        assert "pypto-set_pass_options.md" in row or "pypto-jit.md#runtime_options_detail" in row, key
    assert "| `128` | recommended (framework default) |" in rows["runtime_options.stitch_function_max_num"]
    assert "merge count of structurally identical AIC" in rows["pass_options.cube_nbuffer_setting"]
    assert "1 L2-cache affinity" in rows["runtime_options.device_sched_mode"]
    assert "(framework default)" not in rows["runtime_options.device_sched_mode"]  # 1, the default is 0
    for wrong in ("ouble-buffer", "more vector buffers", "in parallel"):
        assert wrong not in design


def test_balance_is_waves_and_occupancy_not_a_per_core_table() -> None:
    """causal_gqa_tail: 256 roots on 24 AIC = 11 waves (10 full, tail 16), occupancy 256 / 264; 1152 steps,
    the longest chain 8 KV steps (the last q block sees all 8), so at least max(48, 8) = 48 step rounds."""
    plan = estimate(load_spec(EXAMPLES / "causal_gqa_tail.yaml"))
    s = plan.schedule
    assert (s.cores, s.roots, s.waves, s.full_waves, s.tail_roots) == (24, 256, 11, 10, 16)
    assert (s.occupancy, s.steps, s.longest_chain, s.step_rounds) == (0.9697, 1152, 8, 48)
    design = render_design(plan, lang="en")
    assert "| cores | q blocks each |" not in design and "core_imbalance" not in design
    assert "256 roots on 24 AIC make 11 wave(s), 10 full, and a tail wave of 16 roots" in design
    assert "AICPU scheduling threads" in design
    dense = estimate(load_spec(EXAMPLES / "dense_fa_8192.yaml"))  # 16 roots of 8 KV steps on 24 AIC
    assert (dense.schedule.waves, dense.schedule.tail_roots, dense.schedule.longest_chain) == (1, 16, 8)


def test_latency_target_comes_from_the_performance_block() -> None:
    plan = estimate(load_spec(EXAMPLES / "dense_fa_8192.yaml"))  # performance {baseline_us 16948, current 1760489}
    targets = {c["name"]: c.get("latency_target_us") for c in plan.typical_configs}
    assert targets == {"perf_s8192": 16948, "func_b2_s8192": None}
    assert "latency target 16948 us" in render_design(plan, lang="en")
    assert "latency target" not in _design("causal_gqa_tail")  # no performance block
