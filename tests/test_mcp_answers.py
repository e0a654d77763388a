"""The MCP worker keeps its estimate_design answers per (root, SPEC path, SPEC bytes) (issue 15): the same
SPEC is answered with the answer the tool gives, an edited SPEC is planned again, and a SPEC that names a
golden or fails is never kept."""

from __future__ import annotations

import shutil

import pytest
from conftest import EXAMPLES

from opdesign.agent import mcp_server
from opdesign.agent.tools import call_tool


@pytest.fixture()
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_server, "_ANSWERS", mcp_server.OrderedDict())
    shutil.copy(EXAMPLES / "causal_gqa_tail.yaml", tmp_path / "spec.yaml")
    return tmp_path


def test_the_same_spec_is_answered_as_the_tool_answers_and_an_edit_is_planned_again(root) -> None:
    args = {"spec_path": "spec.yaml"}
    first = mcp_server._worker_call("estimate_design", args, str(root))
    assert first == call_tool("estimate_design", args, root) and first[1] is True
    assert mcp_server._worker_call("estimate_design", args, str(root)) is first  # kept: no planning
    assert len(mcp_server._ANSWERS) == 1

    spec = root / "spec.yaml"
    text = spec.read_text(encoding="utf-8")
    assert "seq_kv: 1000, head_dim" in text
    spec.write_text(text.replace("seq_kv: 1000, head_dim", "seq_kv: 512, head_dim"), encoding="utf-8")
    edited = mcp_server._worker_call("estimate_design", args, str(root))
    assert edited == call_tool("estimate_design", args, root)
    assert edited[0] != first[0] and edited[0]["seq_kv"] == 512
    assert len(mcp_server._ANSWERS) == 2


def test_errors_goldens_and_other_tools_are_not_kept(root) -> None:
    bad = mcp_server._worker_call("estimate_design", {"spec_path": "../outside.yaml"}, str(root))
    assert bad[1] is False and bad[0]["error"]["code"] == "path_outside_root"
    spec = root / "spec.yaml"
    spec.write_text(spec.read_text(encoding="utf-8") + "golden: absent_golden.py\n", encoding="utf-8")
    named = mcp_server._worker_call("estimate_design", {"spec_path": "spec.yaml"}, str(root))
    assert named == call_tool("estimate_design", {"spec_path": "spec.yaml"}, root) and named[1] is False
    rules = mcp_server._worker_call("list_rules", {}, str(root))
    assert rules[1] is True and mcp_server._ANSWERS == {}


def test_the_oldest_answer_goes_first(root, monkeypatch) -> None:
    monkeypatch.setattr(mcp_server, "ANSWER_CACHE_SIZE", 2)
    text = (root / "spec.yaml").read_text(encoding="utf-8")
    for n in (1, 2, 3):
        (root / f"s{n}.yaml").write_text(text.replace("seq_kv: 1000, head_dim", f"seq_kv: {256 * n}, head_dim"), encoding="utf-8")
        assert mcp_server._worker_call("estimate_design", {"spec_path": f"s{n}.yaml"}, str(root))[1] is True
    assert [key[1] for key in mcp_server._ANSWERS] == ["s2.yaml", "s3.yaml"]
