"""Catalog: cards, constraint tables, device profiles, indexes and the cards/rules CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from opdesign.catalog import (
    ALIGN_KEYS,
    CONSTRAINT_FILES,
    DEVICE_FIGURES,
    index_mismatches,
    load_catalog,
    load_catalog_from,
    rule_rows,
)
from opdesign.cli.entry import app
from opdesign.errors import CatalogError, NotFoundError
from opdesign.io.paths import data_dir

CARD_IDS = [
    "AT-01", "AT-02", "AT-05", "AT-06", "AT-08", "AT-12", "AT-13",
    "AT-17", "AT-20", "AT-21", "AT-23", "SK-01", "SK-02", "SK-16",
]  # fmt: skip
CONSTRAINT_RANGES = {"TILE": 8, "LOOP": 6, "SYM": 7, "DATA": 4, "API": 6}
KIB = 1024
# domain.md section 1 (CANNBot device facts; Ascend C alignment table; PTO cost model).
# a2: PyPTO 0.2.0 lib/configs/A2A3.ini (Ascend910B1); a3: hicann/pypto 910PR_9363.ini (Ascend910C4); a5:
# hicann/pypto 950PR_958x.ini (Ascend950PR_9589, ub_size 253952); tests/unit/catalog/test_devices_platform.py
# pins them to the files
DEVICES = {
    "a2": dict(aic_cores=24, aiv_per_aic=2, ub_bytes=192 * KIB, l1_bytes=512 * KIB,
               l0a_bytes=64 * KIB, l0b_bytes=64 * KIB, l0c_bytes=128 * KIB),
    "a3": dict(aic_cores=24, aiv_per_aic=2, ub_bytes=192 * KIB, l1_bytes=512 * KIB,
               l0a_bytes=64 * KIB, l0b_bytes=64 * KIB, l0c_bytes=128 * KIB),
    "a5": dict(aic_cores=32, aiv_per_aic=2, ub_bytes=253952, l1_bytes=512 * KIB,
               l0a_bytes=64 * KIB, l0b_bytes=64 * KIB, l0c_bytes=256 * KIB),
}  # fmt: skip
ALIGN = {"ub": 32, "l1": 32, "l0a": 512, "l0b": 512, "l0c": 64, "gm_burst": 512}
AT08 = "patterns/atoms/AT-08-fp8-per-token-quant.md"


@pytest.fixture
def data_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A writable copy of the shipped patterns/ and constraints/ folders."""
    patterns = shutil.copytree(data_dir("patterns"), tmp_path / "patterns")
    constraints = shutil.copytree(data_dir("constraints"), tmp_path / "constraints")
    return patterns, constraints


def _edit(file: Path, old: str, new: str) -> None:
    text = file.read_text(encoding="utf-8")
    assert old in text, f"fixture text {old!r} not in {file.name}"
    file.write_text(text.replace(old, new, 1), encoding="utf-8")


# --- cards -----------------------------------------------------------------


def test_all_cards_load_sorted_with_bodies() -> None:
    cat = load_catalog()
    assert list(cat.cards) == CARD_IDS
    assert load_catalog() is cat  # cached
    for card in cat.cards.values():
        assert card.body.strip().startswith(f"# {card.id}")
        assert card.path.startswith(f"patterns/{card.type}s/{card.id}-")
        assert card.rules and card.source


def test_sk01_rules_unroll_and_parameters() -> None:
    sk01 = load_catalog().card("SK-01")
    assert [r.id for r in sk01.rules] == [f"SK-01-R{i}" for i in range(1, 9)]
    assert {r.level for r in sk01.rules} == {"must"}
    assert sk01.unroll_candidates == {
        "FA MHA": [1], "FA Score": [4, 2, 1], "PageAttn FP8": [8, 4, 2, 1], "default": [8, 4, 2, 1],
    }  # fmt: skip
    expected = {
        "perf_head_dims": [64, 128], "perf_root_range": [16, 256], "perf_ratio_min": 5,
        "static_kv_max_tiles": 8, "safe_cube_tile": 128, "safe_vec_range": [16, 64],
        "perf_q_tiles_per_head": 2, "perf_scope": 6,
    }  # fmt: skip
    assert {k: sk01.param(k) for k in expected} == expected
    variants = sk01.param("variants")
    assert [v["name"] for v in variants] == ["FA MHA", "FA Score", "BSA", "PageAttn FP8", "Sparse Attn"]
    assert all(set(v) == {"name", "kv_loop", "mask", "kv_source", "quant"} for v in variants)
    config = {rec.key: rec for rec in sk01.config}
    assert config["pass_options.cube_l1_reuse_setting"].value == {-1: 2}
    # recommended, not required: PyPTO's docs (pypto-set_pass_options.md, r0.2.0) give {} (automatic merge) as the
    # default, so the kernel compiles without it; 128 is the documented default of stitch_function_max_num
    assert config["pass_options.cube_l1_reuse_setting"].status == "recommended"
    assert config["runtime_options.stitch_function_max_num"].value == 128
    assert config["runtime_options.stitch_function_max_num"].status == "recommended"
    assert sk01.flow_pattern == "C1 -> V1 -> C2"


def test_other_card_parameters() -> None:
    cat = load_catalog()
    assert cat.card("SK-02").param("scope") == 2
    assert len(cat.card("SK-02").param("conditions")) == 3
    sk16 = cat.card("SK-16")
    assert sk16.param("min_matmul_count") == 5
    assert len(sk16.param("two_pass_reasons")) == 3
    sk16_config = {rec.key: rec.value for rec in sk16.config}
    assert sk16_config["runtime_options.stitch_function_max_num"] == 512
    assert sk16_config["runtime_options.device_sched_mode"] == 3
    assert cat.card("AT-08").param("fp8_max") == 448
    assert cat.card("AT-05").param("int8_max") == 127
    assert cat.card("AT-23").param("group_sizes") == [2, 4]
    assert cat.card("AT-23").param("wait_share_min") == 0.5
    at21 = cat.card("at-21")  # lookup is case-insensitive
    assert (at21.param("softmax_scope"), at21.param("state_scope"), at21.param("reset_scope")) == (2, 1, -1)
    assert cat.card("AT-01").param("mask_fill") == {"fp16": -65504.0, "fp32": -3.4e38}
    assert cat.card("AT-17").rule("AT-17-R4").level == "must_not"


def test_missing_parameter_and_unknown_ids() -> None:
    cat = load_catalog()
    with pytest.raises(CatalogError, match=r"SK-01 \(patterns/skeletons/.*\) has no parameter 'nope'"):
        cat.card("SK-01").param("nope")
    with pytest.raises(CatalogError, match="C-TILE-02.*no parameter 'nope'"):
        cat.constraint("C-TILE-02").param("nope")
    with pytest.raises(NotFoundError, match="unknown card 'SK-99'; known: AT-01, "):
        cat.card("SK-99")
    with pytest.raises(NotFoundError, match="C-TILE-01"):
        cat.constraint("C-TILE-99")
    with pytest.raises(NotFoundError, match="a2, a3, a5"):
        cat.device("a9")


# --- broken data in a temp copy ---------------------------------------------


def test_bad_rule_level_names_file_and_field(data_copy: tuple[Path, Path]) -> None:
    patterns, constraints = data_copy
    _edit(patterns / "atoms/AT-08-fp8-per-token-quant.md", "level: must\n", "level: always\n")
    with pytest.raises(CatalogError) as info:
        load_catalog_from(patterns, constraints)
    assert f"{AT08}: rules.0.level: Input should be 'must', 'must_not' or 'should'" in info.value.message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("  fp8_dtype: FP8E4M3\n", "", None),  # the edit helper itself leaves a valid card
        ('source: "pypto-op-design', 'origin: "pypto-op-design', "source: Field required"),
        ("    consequence: \"amax in low", "    effect: \"amax in low", "rules.0.consequence: Field required"),
        ("type: atom", "type: skeleton", "type: Value error"),
        ("id: AT-08-R2", "id: AT-09-R2", "rules: Value error, rule ids must look like AT-08-R<n>"),
        ("flow_pattern: \"V\"", "flow_pattern: \"V\"\nowner: me", "owner: Extra inputs are not permitted"),
        ("examples:\n  - \"PageAttn FP8\"", "examples: PageAttn FP8", "examples: Input should be a valid list"),
        ("---\nid: AT-08", "id: AT-08", "(front matter): the file must start with a '---' line"),
    ],
)
def test_malformed_card_raises_catalog_error(
    data_copy: tuple[Path, Path], old: str, new: str, expected: str | None
) -> None:
    patterns, constraints = data_copy
    _edit(patterns / "atoms/AT-08-fp8-per-token-quant.md", old, new)
    if expected is None:
        load_catalog_from(patterns, constraints)
        return
    with pytest.raises(CatalogError) as info:
        load_catalog_from(patterns, constraints)
    assert info.value.message.startswith(f"{AT08}: ")
    assert expected in info.value.message


def test_malformed_constraint_and_device_name_file(data_copy: tuple[Path, Path]) -> None:
    patterns, constraints = data_copy
    _edit(constraints / "loop.yaml", "id: C-LOOP-04\n    level: must", "id: C-LOOP-04\n    level: maybe")
    with pytest.raises(CatalogError, match=r"^constraints/loop\.yaml: constraints\.3\.level: Input should be"):
        load_catalog_from(patterns, constraints)


def test_device_figure_without_source_is_rejected(data_copy: tuple[Path, Path]) -> None:
    patterns, constraints = data_copy
    _edit(constraints / "devices.yaml",
          "      l0c_bytes: \"hicann/pypto framework/src/platform/parser/simulation_platform/"
          "platform_config/950PR_958x.ini", "      x: \"")
    with pytest.raises(CatalogError) as info:
        load_catalog_from(patterns, constraints)
    message = info.value.message
    assert message.startswith("constraints/devices.yaml: devices.a5.sources: Value error")
    assert "missing ['l0c_bytes']" in message and "not a figure ['x']" in message


# --- constraints -------------------------------------------------------------


def test_every_constraint_id_exists_exactly_once() -> None:
    raw_ids: list[str] = []
    for name in CONSTRAINT_FILES.values():
        table = yaml.safe_load((data_dir("constraints") / name).read_text(encoding="utf-8"))
        raw_ids += [entry["id"] for entry in table["constraints"]]
    expected = [f"C-{area}-{n:02d}" for area, count in CONSTRAINT_RANGES.items() for n in range(1, count + 1)]
    assert Counter(raw_ids) == Counter(expected)
    cat = load_catalog()
    assert sorted(cat.constraints) == sorted(expected)
    for constraint in cat.constraints.values():
        assert constraint.id.startswith(f"C-{constraint.area}-")
        assert constraint.path == f"constraints/{CONSTRAINT_FILES[constraint.area]}"
        assert constraint.source and constraint.consequence


def test_constraint_parameters() -> None:
    cat = load_catalog()
    assert cat.constraint("C-TILE-02").param("align_bytes") == 32
    assert cat.constraint("C-TILE-03").param("tensor_count") == {"unary": 2, "binary": 3, "reduce": 4, "expand": 4}
    assert cat.constraint("C-TILE-04").param("expansion_limit") == 18000
    assert cat.constraint("C-TILE-05").param("cube_align_elems") == {"bf16": 16, "fp16": 16}
    assert cat.constraint("C-TILE-05").param("matmul_last_dim_max") == 65535
    assert cat.constraint("C-TILE-01").param("max_rank") == 4
    assert cat.constraint("C-LOOP-05").param("default_unroll_list") == [1]
    assert cat.constraint("c-sym-04").level == "must_not"
    rows = rule_rows()
    assert [row["id"] for row in rows] == list(cat.constraints)
    assert set(rows[0]) == {"id", "level", "text", "source", "kind"}


# --- devices -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_device_figures_match_domain(name: str) -> None:
    device = load_catalog().device(name)
    assert device.name == name
    assert device.model_dump(include=set(DEVICES[name])) == DEVICES[name]
    assert {k: device.align_bytes[k] for k in ALIGN} == ALIGN
    assert device.cube_macs_per_cycle == 4096
    assert device.aiv_cores == DEVICES[name]["aic_cores"] * 2


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_every_device_figure_has_a_source(name: str) -> None:
    device = load_catalog().device(name)
    figures = set(DEVICE_FIGURES) | {f"align_bytes.{k}" for k in device.align_bytes}
    figures |= {f"bandwidth.{k}" for k in device.bandwidth}
    assert set(device.sources) == figures
    assert set(ALIGN_KEYS) <= set(device.align_bytes)
    assert all(text.strip() for text in device.sources.values())
    assert load_catalog().device("A5").ub_bytes == 253952  # 950PR_958x.ini [AICoreSpec] ub_size


# --- indexes -----------------------------------------------------------------


def test_indexes_agree_with_cards() -> None:
    assert index_mismatches() == []


def test_edited_index_is_reported(data_copy: tuple[Path, Path]) -> None:
    patterns, _ = data_copy
    atoms_index = patterns / "atoms/index.md"
    _edit(atoms_index, "| AT-02 | Standard softmax |", "| AT-02 | Plain softmax |")
    lines = atoms_index.read_text(encoding="utf-8").splitlines(keepends=True)
    atoms_index.write_text("".join(line for line in lines if not line.startswith("| AT-23 ")), encoding="utf-8")
    _edit(patterns / "skeletons/index.md", "| C1 -> V1 -> C2 -> V2 |", "| C1 -> V1 |")
    problems = index_mismatches(patterns)
    assert "patterns/atoms/index.md: card AT-23 is not listed" in problems
    assert any(p.startswith("patterns/atoms/index.md: AT-02 title is 'Plain softmax'") for p in problems)
    assert any(p.startswith("patterns/skeletons/index.md: SK-16 flow is 'C1 -> V1'") for p in problems)
    assert len(problems) == 3


# --- CLI ---------------------------------------------------------------------

runner = CliRunner()


def test_cli_cards_list_and_show() -> None:
    listed = runner.invoke(app, ["cards", "list"])
    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.output.splitlines()] == CARD_IDS
    as_json = json.loads(runner.invoke(app, ["cards", "list", "--json"]).output)
    assert [item["id"] for item in as_json] == CARD_IDS
    shown = runner.invoke(app, ["cards", "show", "SK-01"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("SK-01  Online flash attention  (skeleton)")
    assert "SK-01-R8" in shown.output and "PageAttn FP8: [8, 4, 2, 1]" in shown.output
    assert "# SK-01 Online flash attention" in shown.output  # the body follows the fields
    card = json.loads(runner.invoke(app, ["cards", "show", "SK-01", "--json"]).output)
    assert card["id"] == "SK-01" and len(card["rules"]) == 8


def test_cli_rules() -> None:
    from opdesign.validate.engine.collect import all_rules

    listed = runner.invoke(app, ["rules"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()[:-1]  # the last line explains the * mark
    ids = [line.split()[0] for line in lines]
    assert len(ids) == len(set(ids))  # one row per id: constraints, card rules, conditions, validator-only checks
    constraint_count = sum(CONSTRAINT_RANGES.values())
    assert all(i.startswith("C-") for i in ids[:constraint_count])
    card_rules = {r.id for card in load_catalog().cards.values() for r in card.rules}
    assert set(all_rules()) | card_rules <= set(ids)
    assert next(line for line in lines if line.startswith("C-TILE-02 ")).split()[1] == "*"
    shown = runner.invoke(app, ["rules", "C-TILE-02"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("C-TILE-02  (must, area TILE)")
    assert "align_bytes: 32" in shown.output
    data = json.loads(runner.invoke(app, ["rules", "C-TILE-02", "--json"]).output)
    assert data["parameters"]["align_bytes"] == 32
    assert len(json.loads(runner.invoke(app, ["rules", "--json"]).output)) == len(ids)


@pytest.mark.parametrize("args", [["cards", "show", "SK-99"], ["rules", "C-TILE-99"]])
def test_cli_unknown_id_exits_2(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "opdesign", *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: not_found: unknown ")
    assert proc.stdout == ""
