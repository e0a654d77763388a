"""Agent tools: schemas, `opdesign tool list|call`, JSON errors, the root jail, size limits."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import EXAMPLES, REPO, run_cli
from jsonschema.validators import validator_for

from opdesign.agent.base import MAX_FILE_BYTES, MAX_REQUEST_BYTES, MAX_TEXT_CHARS, Root, Tool, error_schema
from opdesign.agent.tools import TOOLS, call_tool, tool_definitions
from opdesign.render.phrases import SAY
from opdesign.workflows.new import plan_from_spec_file

TOOL_NAMES = {
    "spec_schema", "estimate_design", "new_design", "validate_design", "rank_candidates",
    "list_patterns", "get_pattern", "list_rules", "explain_rule", "estimate_golden", "verify_design",
}  # fmt: skip
DENSE = "examples/specs/dense_fa_8192.yaml"
ERROR_SCHEMA = error_schema()


def _check_output(name, payload):
    schema = TOOLS[name].output_schema()
    validator_for(schema)(schema).validate(payload)


def _call(name, args, root=REPO):
    payload, ok = call_tool(name, args, root)
    assert ok, payload
    _check_output(name, payload)
    return payload


def _error(name, args, root=REPO):
    payload, ok = call_tool(name, args, root)
    assert not ok, payload
    validator_for(ERROR_SCHEMA)(ERROR_SCHEMA).validate(payload)
    return payload["error"]


@pytest.fixture
def root(tmp_path):
    """A tool root holding a copy of the example SPECs and goldens."""
    shutil.copytree(EXAMPLES, tmp_path / "specs")
    shutil.copytree(REPO / "tests" / "goldens", tmp_path / "goldens")
    return tmp_path


# --- definitions and schemas ---


def test_every_tool_has_a_description_and_valid_object_schemas():
    definitions = tool_definitions()
    assert {d["name"] for d in definitions} == TOOL_NAMES
    for d in definitions:
        assert set(d) == {"name", "description", "inputSchema", "outputSchema"}
        assert len(d["description"]) > 120 and "\n" not in d["description"], d["name"]
        for key in ("inputSchema", "outputSchema"):
            schema = d[key]
            validator_for(schema).check_schema(schema)
            assert schema["type"] == "object", (d["name"], key)
            assert "unavailable" not in schema.get("description", ""), (d["name"], key, schema)
        assert d["inputSchema"]["additionalProperties"] is False, d["name"]


def test_file_inputs_use_the_documented_names():
    props = {name: set(t.input_schema()["properties"]) for name, t in TOOLS.items()}
    assert props["estimate_design"] == {"spec_path"}
    assert props["new_design"] == {"spec_path", "out_dir", "lang", "force", "candidate", "tiles"}
    assert props["validate_design"] == {"design_path", "text", "interfaces_text", "target_pypto"}
    assert props["estimate_golden"] == {"golden_path", "function", "state_groups", "cross_tile_reduce"}
    assert props["spec_schema"] == set()
    text = TOOLS["validate_design"].input_schema()["properties"]["text"]
    assert {"type": "string", "maxLength": MAX_TEXT_CHARS} in text["anyOf"]


def test_tool_list_prints_the_definitions_as_a_json_array():
    res = run_cli("tool", "list", cwd=REPO)
    assert res.returncode == 0, res.stderr
    listed = json.loads(res.stdout)
    assert listed == tool_definitions()


# --- results ---


def test_estimate_design_returns_the_plan_of_the_library():
    plan = _call("estimate_design", {"spec_path": DENSE})
    assert plan == plan_from_spec_file(REPO / DENSE).model_dump(mode="json", context=SAY)
    assert plan["op_name"] == "dense_fa_8192" and plan["skeleton"]["id"] == "SK-01"
    assert plan["head_dim"] == 128 and plan["num_heads"] == 8


def test_tool_call_estimate_design_on_stdin_is_clean():
    # its speed is a benchmark figure (benchmarks/bench_mcp.py), never a test assertion
    res = run_cli("tool", "call", "estimate_design", cwd=REPO, input=json.dumps({"spec_path": DENSE}))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["op_name"] == "dense_fa_8192"
    assert res.stdout.count("\n") == 1


def test_a_call_loads_only_what_it_needs():
    """Library modules are imported inside each tool: catalog, schema and golden calls load no numpy / jinja2."""
    import subprocess
    import sys

    calls = [("spec_schema", {}), ("list_patterns", {}), ("get_pattern", {"id": "SK-01"}),
             ("list_rules", {}), ("explain_rule", {"id": "C-TILE-02"}),
             ("estimate_golden", {"golden_path": "tests/goldens/dense_forward_golden.py"})]
    code = ("import sys, json; from opdesign.agent.tools import call_tool; "
            f"oks = [call_tool(n, a)[1] for n, a in {calls!r}]; "
            "print(json.dumps([all(oks), sorted(m for m in ('numpy', 'jinja2') if m in sys.modules)]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [True, []]


def test_spec_schema_is_the_spec_json_schema():
    from opdesign.spec import spec_json_schema

    assert _call("spec_schema", {})["json_schema"] == spec_json_schema()


def test_new_design_writes_into_the_root_and_refuses_to_overwrite(root):
    args = {"spec_path": "specs/causal_gqa_tail.yaml", "out_dir": "ops/causal"}
    result = _call("new_design", args, root)
    assert result["out_dir"] == "ops/causal"
    assert sorted(result["files"]) == ["ops/causal/DESIGN.md", "ops/causal/causal_gqa_tail_kernel.py",
                                       "ops/causal/causal_gqa_tail_scaffold.py",
                                       "ops/causal/eval/module_interfaces.yaml"]
    plan = plan_from_spec_file(root / "specs/causal_gqa_tail.yaml")
    assert (result["q_tile"], result["kv_tile"], result["root_count"]) == (plan.q_tile, plan.kv_tile, plan.root_count)
    assert result["skeleton"] == "SK-01" and result["ub_bytes"] == plan.ub_budget.total_bytes
    design = root / "ops/causal/DESIGN.md"
    design.write_text("hand edits\n")
    refused = _error("new_design", args, root)
    assert refused["code"] == "output_exists" and "ops/causal/DESIGN.md" in refused["details"]
    # the tool's own way to say force, not the CLI flag an agent cannot pass
    assert refused["message"].endswith('(set "force": true)') and "--force" not in refused["message"]
    assert design.read_text() == "hand edits\n"
    _call("new_design", {**args, "force": True}, root)
    assert design.read_text().startswith("---\n")


def test_new_design_writes_a_ranked_or_pinned_candidate_as_the_cli_does(root):
    """An agent ranks with rank_candidates and writes row N with new_design (it had no way to: the CLI's
    --candidate / --tiles were missing from the tool); the files are the CLI's bytes."""
    shutil.copy(REPO / "tests" / "fixtures" / "sk01" / "simrank_tiny.yaml", root / "specs")
    spec = "specs/simrank_tiny.yaml"
    rows = _call("rank_candidates", {"spec_path": spec, "top": 3}, root)["rows"]
    result = _call("new_design", {"spec_path": spec, "out_dir": "c3", "candidate": 3}, root)
    assert (result["q_tile"], result["kv_tile"]) == (rows[2]["q_tile"], rows[2]["kv_tile"])
    cli = run_cli("new", "--spec", str(root / spec), "--candidate", "3", "--out", str(root / "cli3"), "-q")
    assert cli.returncode == 0, cli.stderr
    for rel in result["files"]:
        assert (root / rel).read_bytes() == (root / "cli3" / rel.removeprefix("c3/")).read_bytes(), rel
    assert "candidate rank 3 of" in (root / "c3" / "DESIGN.md").read_text()
    pinned = _call("new_design", {"spec_path": spec, "out_dir": "t", "tiles": f"kv_tile={rows[0]['kv_tile']}"}, root)
    assert pinned["kv_tile"] == rows[0]["kv_tile"]
    both = _error("new_design", {"spec_path": spec, "out_dir": "x", "candidate": 1, "tiles": "q_tile=64"}, root)
    assert both["code"] == "invalid_input" and "mutually exclusive" in both["message"]
    broken = _error("new_design", {"spec_path": spec, "out_dir": "x", "tiles": "unroll_factor=3"}, root)
    assert broken["code"] == "invalid_input" and "unroll_factor=3" in broken["message"]
    other = _error("new_design", {"spec_path": "specs/sk16_backward_lm.yaml", "out_dir": "x", "candidate": 1}, root)
    assert other["code"] == "invalid_input" and "SK-16" in other["message"]
    assert not (root / "x").exists()


def test_new_design_defaults_out_dir_to_op_name_under_the_root(root):
    result = _call("new_design", {"spec_path": "specs/dense_fa_8192.yaml", "lang": "zh"}, root)
    assert result["out_dir"] == "dense_fa_8192"
    assert "算子契约" in (root / "dense_fa_8192" / "DESIGN.md").read_text(encoding="utf-8")


def test_estimate_golden_matches_the_library(root):
    from opdesign.golden import estimate_golden

    result = _call("estimate_golden", {"golden_path": "goldens/dense_forward_golden.py"}, root)
    assert result == estimate_golden(root / "goldens/dense_forward_golden.py").model_dump(mode="json")
    assert result["function"] == "dense_attention_fwd_golden" and result["module_count"] == 1
    forced = _call("estimate_golden", {"golden_path": "goldens/dense_forward_golden.py", "state_groups": 4}, root)
    assert forced["design_params"]["S"] == 4 and forced["design_params"]["state_source"] == "option"
    missing = _error("estimate_golden", {"golden_path": "goldens/dense_forward_golden.py", "function": "nope"}, root)
    assert missing["code"] == "not_found"


def test_catalog_tools():
    skeletons = _call("list_patterns", {"type": "skeleton"})["patterns"]
    assert [p["id"] for p in skeletons] == ["SK-01", "SK-02", "SK-16"]
    card = _call("get_pattern", {"id": "sk-01"})
    assert card["id"] == "SK-01" and card["flow_pattern"] == "C1 -> V1 -> C2"
    assert _error("get_pattern", {"id": "SK-99"})["code"] == "not_found"
    tile_rules = _call("list_rules", {"prefix": "c-tile"})["rules"]
    assert [r["id"] for r in tile_rules if r["kind"] == "constraint"] == [f"C-TILE-{i:02d}" for i in range(1, 9)]
    by_id = {r["id"]: r for r in tile_rules}
    assert by_id["C-TILE-03"]["family"] == "numbers" and by_id["C-TILE-03"]["checked_by_validator"] is True
    assert by_id["C-TILE-01"]["family"] is None and by_id["C-TILE-01"]["checked_by_validator"] is False
    rows = _call("list_rules", {})["rules"]
    kinds = {r["id"]: r["kind"] for r in rows}
    assert len(kinds) == len(rows)  # one row per id: a check of a card rule is that card rule's row
    assert (kinds["C-API-06"], kinds["SK-01-R1"], kinds["OD-DOC-05"], kinds["SK-01-PERF-1"]) == (
        "constraint", "card", "check", "condition")
    rule = _call("explain_rule", {"id": "c-tile-02"})
    assert rule["kind"] == "constraint" and rule["owner"] == "constraints/tiling.yaml"
    assert rule["parameters"]["align_bytes"] == 32
    assert rule["check"]["family"] == "numbers" and rule["check"]["bad"] and rule["check"]["good"]
    card_rule = _call("explain_rule", {"id": "SK-01-R1"})
    assert card_rule["kind"] == "card" and card_rule["owner"] == "SK-01" and card_rule["level"] == "must"
    assert card_rule["check"]["family"] == "pseudocode"
    check = _call("explain_rule", {"id": "od-doc-05"})
    assert (check["kind"], check["level"], check["owner"]) == ("check", "error", None)
    assert check["text"] == check["check"]["message"] and "TODO" in check["check"]["bad"]
    assert _error("explain_rule", {"id": "C-TILE-99"})["code"] == "not_found"


# --- errors ---


@pytest.mark.parametrize(
    ("stdin", "code", "field"),
    [
        ("{bad json", "invalid_input", None),
        ("[1, 2]", "invalid_input", None),
        ('{"spec_path": 3}', "invalid_input", "spec_path"),
        ('{"spec_path": "x.yaml", "extra": 1}', "invalid_input", "(arguments)"),
        ("{}", "invalid_input", "(arguments)"),
        ('{"spec_path": "../outside.yaml"}', "path_outside_root", "spec_path"),
        ('{"spec_path": "/etc/passwd"}', "path_outside_root", "spec_path"),
        ('{"spec_path": "missing.yaml"}', "not_found", "spec_path"),
    ],
)
def test_tool_call_errors_are_json_on_stdout_with_exit_2(stdin, code, field):
    res = run_cli("tool", "call", "estimate_design", cwd=REPO, input=stdin)
    assert res.returncode == 2
    lines = res.stdout.splitlines()
    assert len(lines) == 1, res.stdout
    error = json.loads(lines[0])["error"]
    assert error["code"] == code and error["message"]
    if field is not None:
        assert error["details"]["field"] == field
    assert "Traceback" not in res.stdout + res.stderr


def test_unknown_tool_and_input_file(tmp_path):
    res = run_cli("tool", "call", "no_such_tool", cwd=REPO, input="{}")
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["code"] == "not_found"
    request = tmp_path / "req.json"
    request.write_text(json.dumps({"id": "SK-16"}))
    res = run_cli("tool", "call", "get_pattern", "--input", str(request), cwd=REPO)
    assert res.returncode == 0 and json.loads(res.stdout)["id"] == "SK-16"
    res = run_cli("tool", "call", "get_pattern", "--input", str(tmp_path / "nope.json"), cwd=REPO)
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["code"] == "io_error"


def test_empty_stdin_means_no_arguments():
    res = run_cli("tool", "call", "list_patterns", cwd=REPO, input="")
    assert res.returncode == 0 and len(json.loads(res.stdout)["patterns"]) >= 14


def test_spec_errors_name_the_field_and_use_relative_paths(root):
    bad = (root / "specs/dense_fa_8192.yaml").read_text().replace("head_dim: 128", "head_dim: 100")
    (root / "bad.yaml").write_text(bad)
    res = run_cli("tool", "call", "estimate_design", "--root", str(root), input='{"spec_path": "bad.yaml"}')
    error = json.loads(res.stdout)["error"]
    assert res.returncode == 2 and error["code"] == "spec_invalid"
    assert "shape.head_dim" in error["message"] and error["message"].startswith("bad.yaml:")
    assert str(root) not in res.stdout


def test_spec_error_details_name_the_same_field_as_the_message(root):
    """A cross-field failure (a shape outside its dynamic range) is reported under the field it names, in the
    message and in ``details`` alike, so an agent can act on ``details`` without parsing the message."""
    spec = (root / "specs/dense_fa_8192.yaml").read_text()
    axis = "{name: batch, range: [1, 4], uniform: true}"
    assert axis in spec
    (root / "bad.yaml").write_text(spec.replace(axis, "{name: batch, range: [2, 3], uniform: true}"))
    error = _error("estimate_design", {"spec_path": "bad.yaml"}, root)
    assert error["code"] == "spec_invalid"
    assert error["message"].startswith("bad.yaml: shape.batch: ")
    loc, msg = error["details"][0]["loc"], error["details"][0]["msg"]
    assert loc == "shape.batch" and msg.endswith("range [2, 3]") and not msg.startswith("Value error")


def test_symlinks_leaving_the_root_are_refused(root, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    shutil.copy(EXAMPLES / "dense_fa_8192.yaml", outside / "spec.yaml")
    os.symlink(outside / "spec.yaml", root / "link.yaml")
    os.symlink(outside, root / "linked_dir")
    assert _error("estimate_design", {"spec_path": "link.yaml"}, root)["code"] == "path_outside_root"
    assert _error("new_design", {"spec_path": "specs/dense_fa_8192.yaml", "out_dir": "linked_dir"},
                  root)["code"] == "path_outside_root"
    # a symlink below the output folder (eval/ -> outside) is refused before anything is written
    (root / "op").mkdir()
    os.symlink(outside, root / "op" / "eval")
    error = _error("new_design", {"spec_path": "specs/dense_fa_8192.yaml", "out_dir": "op"}, root)
    assert error["code"] == "path_outside_root" and error["details"]["path"] == "op/eval"
    assert sorted(p.name for p in outside.iterdir()) == ["spec.yaml"]
    # a symlink that stays inside the root is fine
    os.symlink(root / "specs" / "dense_fa_8192.yaml", root / "inside.yaml")
    assert _call("estimate_design", {"spec_path": "inside.yaml"}, root)["op_name"] == "dense_fa_8192"


def test_spec_golden_outside_the_root_is_refused(root, tmp_path_factory):
    outside = tmp_path_factory.mktemp("golden_outside")
    shutil.copy(REPO / "tests/goldens/dense_forward_golden.py", outside / "g.py")
    spec = (root / "specs/dense_fa_8192.yaml").read_text() + f"golden: {outside / 'g.py'}\n"
    (root / "specs/with_golden.yaml").write_text(spec)
    error = _error("estimate_design", {"spec_path": "specs/with_golden.yaml"}, root)
    assert error["code"] == "path_outside_root" and error["details"]["field"] == "golden"


def test_size_limits(root):
    (root / "big.yaml").write_text("# " + "x" * MAX_FILE_BYTES)
    error = _error("estimate_design", {"spec_path": "big.yaml"}, root)
    assert error["code"] == "too_large" and error["details"]["limit"] == MAX_FILE_BYTES
    error = _error("validate_design", {"text": "x" * (MAX_TEXT_CHARS + 1)})
    assert error["code"] == "too_large" and error["details"] == {
        "field": "text", "schema_rule": "maxLength", "limit": MAX_TEXT_CHARS}
    res = run_cli("tool", "call", "list_rules", cwd=REPO, input=" " * (MAX_REQUEST_BYTES + 1))
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["code"] == "too_large"


@pytest.mark.parametrize("args", [{}, {"design_path": "a", "text": "b"}, {"design_path": "a", "interfaces_text": "b"}])
def test_validate_design_needs_exactly_one_source(args):
    assert _error("validate_design", args)["code"] == "invalid_input"


def test_missing_root_is_not_found():
    res = run_cli("tool", "call", "list_rules", "--root", "/no/such/folder", cwd=REPO, input="{}")
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["code"] == "not_found"


def _fake_tool(monkeypatch, run):
    from opdesign.agent.catalog import ListRulesInput, ListRulesResult

    monkeypatch.setitem(TOOLS, "fake", Tool("fake", "test tool", ListRulesInput, lambda: ListRulesResult, run))


def test_library_output_goes_to_stderr_and_bugs_become_internal_error(monkeypatch, capsys):
    from opdesign.agent.catalog import ListRulesResult

    def chatty(args, root):
        print("progress line")
        return ListRulesResult(rules=[])

    _fake_tool(monkeypatch, chatty)
    assert call_tool("fake", {}, REPO) == ({"rules": []}, True)
    captured = capsys.readouterr()
    assert captured.out == "" and "progress line" in captured.err

    def broken(args, root):
        raise KeyError("boom")

    _fake_tool(monkeypatch, broken)
    payload, ok = call_tool("fake", {}, REPO)
    assert not ok and payload["error"]["code"] == "internal_error" and "KeyError" in payload["error"]["message"]
    assert "Traceback" not in capsys.readouterr().err  # no traceback for users ...
    monkeypatch.setenv("OPDESIGN_DEBUG", "1")
    call_tool("fake", {}, REPO)
    assert "Traceback" in capsys.readouterr().err  # ... unless asked for


def test_root_resolves_and_scrubs(tmp_path):
    jail = Root(tmp_path)
    (tmp_path / "a").mkdir()  # resolved on descriptors: "a/.." needs an "a"
    assert jail.resolve("a/../b", "f") == tmp_path.resolve() / "b"
    assert jail.scrub({"x": [f"{jail.path}/a.md: bad", str(jail.path)]}) == {"x": ["a.md: bad", "."]}


def test_validate_design_on_a_generated_folder_a_file_and_inline_text(root):
    from opdesign.validate import validate_paths

    _call("new_design", {"spec_path": "specs/causal_gqa_tail.yaml", "out_dir": "op"}, root)
    report = _call("validate_design", {"design_path": "op"}, root)
    assert report["summary"]["error"] == 0, report["findings"]
    assert report["files"] == ["op/DESIGN.md", "op/causal_gqa_tail_kernel.py"]  # a folder: design and kernel
    direct = validate_paths([root / "op"]).model_dump(mode="json")
    assert report == Root(root).scrub(direct)
    assert _call("validate_design", {"design_path": "op/DESIGN.md"}, root)["summary"]["error"] == 0
    kernel = root / "op/causal_gqa_tail_kernel.py"
    assert _call("validate_design", {"design_path": "op/causal_gqa_tail_kernel.py"}, root)["files"] == [
        "op/causal_gqa_tail_kernel.py"]
    source = kernel.read_text(encoding="utf-8")
    kernel.write_text(source.replace("(q_len - q_off).min(Q_TILE)", "min(q_len - q_off, Q_TILE)"), encoding="utf-8")
    mutated = _call("validate_design", {"design_path": "op/causal_gqa_tail_kernel.py"}, root)
    line = source.splitlines().index("                q_valid = (q_len - q_off).min(Q_TILE)") + 1
    assert [(f["rule"], f["file"], f["line"]) for f in mutated["findings"] if f["level"] == "error"] == [
        ("OD-KN-04", "op/causal_gqa_tail_kernel.py", line)]
    kernel.write_text(source, encoding="utf-8")

    text = (root / "op/DESIGN.md").read_text(encoding="utf-8")
    interfaces = (root / "op/eval/module_interfaces.yaml").read_text(encoding="utf-8")
    inline = _call("validate_design", {"text": text, "interfaces_text": interfaces})
    assert inline["summary"]["error"] == 0 and inline["files"] == ["DESIGN.md"]
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("| q_tile"))
    lines[row] = "| q_tile | <Q_TILE> | TODO | - |"
    broken = _call("validate_design", {"text": "\n".join(lines) + "\n", "interfaces_text": interfaces})
    placeholders = [f for f in broken["findings"] if f["rule"] == "OD-DOC-05"]
    assert placeholders and {f["line"] for f in placeholders} == {row + 1}
    assert all(f["level"] == "error" and f["file"] == "DESIGN.md" for f in placeholders)


def test_rank_candidates_matches_the_cli_library_call(root):
    from opdesign.spec import load_spec
    from opdesign.tuning import rank_candidates

    spec_file = root / "specs/dense_fa_8192.yaml"
    ranking = _call("rank_candidates", {"spec_path": "specs/dense_fa_8192.yaml"}, root)
    from opdesign.tuning.model.calibration import load_params

    # the tool ranks as `opdesign rank` does: with the committed calibration
    direct = rank_candidates(load_spec(spec_file), plan_from_spec_file(spec_file), top=10, params=load_params())
    assert ranking == direct.model_dump(mode="json")
    assert len(ranking["rows"]) == 10 and ranking["rejected"] == []
    assert [r["rank"] for r in ranking["rows"]] == list(range(1, 11))
    assert ranking["chosen_rank"] == 10757 and ranking["chosen"]["q_tile"] == 4096
    assert ranking["rows"][0]["form_rules"] == ["SK-01-P1", "SK-01-P2"] and ranking["chosen"]["form_rules"] == []
    in_form = _call("rank_candidates", {"spec_path": "specs/dense_fa_8192.yaml", "top": 3, "within_form": True}, root)
    assert in_form == rank_candidates(load_spec(spec_file), plan_from_spec_file(spec_file), top=3,
                                      within_form=True, params=load_params()).model_dump(mode="json")
    assert in_form["chosen_rank"] == 7 and all(r["q_tile"] == 4096 and r["kv_tile"] >= 1024 for r in in_form["rows"])
    with_rejected = _call("rank_candidates", {"spec_path": "specs/dense_fa_8192.yaml", "top": 2,
                                              "include_rejected": True}, root)
    assert len(with_rejected["rows"]) == 2 and len(with_rejected["rejected"]) == 2
    assert all(r["rejected_rules"] for r in with_rejected["rejected"])
    refused = _error("rank_candidates", {"spec_path": "specs/sparse_topk_2048.yaml"}, root)
    assert refused["code"] == "invalid_input" and "ranking covers SK-01 only" in refused["message"]
    assert refused["details"]["skeleton"] == "SK-02"


def test_a_missing_component_degrades_its_tool_not_the_list(monkeypatch, capsys):
    from opdesign.agent.base import InternalError

    def missing():
        raise InternalError("opdesign.tuning does not provide Ranking")

    monkeypatch.setitem(TOOLS, "rank_candidates", Tool("rank_candidates", "d", TOOLS["rank_candidates"].input_model,
                                                       missing, TOOLS["rank_candidates"].run))
    listed = {d["name"]: d for d in tool_definitions()}
    assert listed["rank_candidates"]["outputSchema"]["type"] == "object"
    assert "unavailable" in listed["rank_candidates"]["outputSchema"]["description"]
    assert len(listed) == len(TOOL_NAMES)
    assert "warning: tool rank_candidates" in capsys.readouterr().err
