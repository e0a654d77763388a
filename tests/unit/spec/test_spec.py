"""SPEC model: every rejection names its field path, exits 2 and writes nothing."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from conftest import EXAMPLES, run_cli

from opdesign.errors import InputError, NotFoundError, SpecError
from opdesign.spec import load_spec, parse_spec, spec_json_schema

BASE = yaml.safe_load((EXAMPLES / "causal_gqa_tail.yaml").read_text())


def _mutate(path, value):
    data = copy.deepcopy(BASE)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


BAD = [
    (("dtype",), KeyError, "dtype: Field required"),
    (("dynamic_axes",), [], "dynamic_axes: the CANNBot contract needs at least one real dynamic axis"),
    (("dynamic_axes", 0, "range"), [4096, 1], "dynamic_axes.0.range: range lo (4096) must not exceed hi (1)"),
    (("shape", "num_kv_heads"), 3, "shape: num_heads (8) must be a multiple of num_kv_heads (3)"),
    (("shape", "head_dim"), 72, "shape.head_dim: head_dim 72 is not a multiple of 16 for bf16"),
    (("device",), "a9", "device: unknown device 'a9'"),
    (("op_name",), "my op", "op_name: 'my op' is not a Python identifier"),
    (("op_name",), "a'b", "op_name: \"a'b\" is not a Python identifier"),
    (("op_name",), "../etc/x", "op_name: '../etc/x' is not a Python identifier"),
    (("op_name",), "9lives", "op_name: '9lives' is not a Python identifier"),
    (("op_name",), "class", "op_name: 'class' is a Python keyword"),  # issue 30 item 8: say keyword
    (("colour",), "red", "colour: unknown key"),
    (("shape", "colour"), 1, "shape.colour: unknown key"),
    (("shape", ":"), 1, 'shape[":"]: unknown key'),  # a key that is not a name is quoted, not run into the path
    (("shape", ""), 1, 'shape[""]: unknown key'),
    (("typical_configs", 0, "shape"), {"head_dim": 40},
     "typical_configs.0.shape.head_dim: head_dim 40 is not a multiple of 16"),
    (("typical_configs", 0, "shape"), {"seq_q": 5000},
     "typical_configs.0.shape.seq_q: 5000 is outside dynamic_axes.0.range [1, 4096]"),
    (("shape", "seq_kv"), 8000, "shape.seq_kv: 8000 is outside dynamic_axes.1.range [1, 4096]"),
    (("dynamic_axes",), [{"name": "batch", "range": [1, 8], "uniform": False}],
     "dynamic_axes.0.uniform: uniform: false (varlen per batch) applies to seq_q / seq_kv, not batch"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=[".".join(map(str, b[0])) + f"={b[1]!r}" for b in BAD])
def test_bad_spec_is_rejected_with_field_path(path, value, message):
    with pytest.raises(SpecError) as err:
        parse_spec(_mutate(path, value))
    assert message in err.value.message


@pytest.mark.parametrize("path,value,message", BAD[:9], ids=[str(i) for i in range(9)])
def test_cli_new_on_bad_spec_exits_2_and_writes_nothing(tmp_path, path, value, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_mutate(path, value)))
    out = tmp_path / "out"
    res = run_cli("new", "--spec", str(spec), "--out", str(out))
    assert res.returncode == 2
    assert message in res.stderr
    assert res.stdout == ""
    assert not out.exists()


def test_unreadable_and_non_mapping_specs(tmp_path):
    with pytest.raises(NotFoundError, match="SPEC file not found"):
        load_spec(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="cannot read SPEC: is a folder"):
        load_spec(tmp_path)  # a directory: invalid_input, refused before any read
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(SpecError, match="must be a YAML mapping, got list"):
        load_spec(bad)
    for text in ("", "# only a comment\n", "null\n"):  # said "got NoneType"
        bad.write_text(text)
        with pytest.raises(SpecError, match=r"list.yaml: the SPEC is empty: expected a YAML mapping"):
            load_spec(bad)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00op")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(binary)
    broken = tmp_path / "broken.yaml"
    broken.write_text("op_name: [unclosed\n")
    with pytest.raises(SpecError, match="line 2: invalid YAML"):
        load_spec(broken)
    tagged = tmp_path / "tag.yaml"
    tagged.write_text("op_name: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(SpecError, match="invalid YAML"):
        load_spec(tagged)


def test_examples_load_and_defaults():
    spec = load_spec(EXAMPLES / "causal_gqa_tail.yaml")
    assert spec.tolerance == (2e-2, 2e-2)
    assert spec.shape.num_heads // spec.shape.num_kv_heads == 4
    dense = load_spec(EXAMPLES / "dense_fa_8192.yaml")
    assert dense.performance.ratio == pytest.approx(1760489 / 16948)


def test_schema_command_prints_the_model_schema():
    res = run_cli("schema", "spec")
    assert res.returncode == 0
    schema = json.loads(res.stdout)
    assert schema == json.loads(json.dumps(spec_json_schema(), sort_keys=True))
    assert set(schema["required"]) >= {"schema_version", "op_name", "device", "dtype", "shape", "dynamic_axes"}
    assert schema["properties"]["dynamic_axes"]["minItems"] == 1


@pytest.mark.parametrize("note,message", [
    ("TODO: check", "remove ['TODO']"), ("see <placeholder>", "remove ['<...>']"), ("{x}", "remove ['{', '}']"),
    ("Decision: module_count = 7", "remove ['module_count']"), ("a\nb", "one line of printable characters"),
    ("a\ud800b", "one line of printable characters"),
])
def test_notes_that_would_break_design_md_are_refused(note, message):
    data = _mutate(("typical_configs", 0, "note"), note)
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert "typical_configs.0.note" in err.value.message and message in err.value.message


@pytest.mark.parametrize("path,value,message", [
    (("shape", "batch"), True, "shape.batch: Input should be a valid integer"),
    (("shape", "batch"), "2", "shape.batch: Input should be a valid integer"),
    (("shape", "seq_q"), 2 ** 31, "shape.seq_q: Input should be less than or equal to 1048576"),
    (("shape", "block_size"), 4096, "shape.block_size: Input should be less than or equal to 1024"),
    (("typical_configs", 0, "seed"), -1, "typical_configs.0.seed: Input should be greater than or equal to 0"),
    (("schema_version",), True, "schema_version is the integer 1, not a boolean"),
    (("golden",), "../x\x00.py", "golden: String should match pattern"),
])
def test_loose_types_and_planning_limits(path, value, message):
    with pytest.raises(SpecError) as err:
        parse_spec(_mutate(path, value))
    assert message in err.value.message


def test_deeply_nested_yaml_is_refused(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text((EXAMPLES / "causal_gqa_tail.yaml").read_text() + "x: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SpecError, match="nested too deeply|invalid YAML"):
        load_spec(deep)


@pytest.mark.parametrize("device", ["a2", "a3"])
def test_fp8_on_a2_a3_is_refused_naming_quant_and_device(tmp_path, device):
    data = yaml.safe_load((EXAMPLES / "paged_fp8_decode.yaml").read_text())
    assert data["device"] == "a5" and data["quant"] == "fp8"  # the example moved to the Ascend 950
    data["device"] = device
    path = tmp_path / "fp8.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=rf"quant: quant 'fp8' needs FP8 E4M3 matmul, which device '{device}'"):
        load_spec(path)
    res = run_cli("new", "--spec", str(path), "--out", str(tmp_path / "out"))
    assert (res.returncode == 2 and "quant" in res.stderr and f"'{device}'" in res.stderr
            and "use device a5" in res.stderr)
    assert not (tmp_path / "out").exists()
    data["quant"] = "none"
    path.write_text(yaml.safe_dump(data))
    assert load_spec(path).device == device  # the same SPEC without FP8 is fine there
