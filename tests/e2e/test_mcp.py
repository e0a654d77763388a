"""`opdesign mcp`: the agent tools over MCP (stdio), driven by the official SDK client."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO

from opdesign.agent.tools import tool_definitions
from opdesign.render.phrases import SAY
from opdesign.workflows.new import plan_from_spec_file

DENSE = "specs/dense_fa_8192.yaml"
NO_MCP = "the optional 'mcp' SDK is not installed (pip install 'opdesign[mcp]'); CI installs it"

needs_mcp = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason=NO_MCP)


async def _session_round(root):
    """List the tools and call estimate_design, new_design and validate_design (plus one error) over stdio."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "opdesign", "mcp", "--root", str(root)],
                                   env=dict(os.environ))  # the SDK's default env drops PYTHONPATH: test this code
    out = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        out["server"] = init.serverInfo.name if hasattr(init, "serverInfo") else init.server_info.name
        listed = await session.list_tools()
        out["tools"] = [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools]
        for name, args in [
            ("estimate_design", {"spec_path": DENSE}),
            ("new_design", {"spec_path": DENSE, "out_dir": "op"}),
            ("validate_design", {"design_path": "op"}),
            ("estimate_design", {"spec_path": "../outside.yaml"}),
        ]:
            result = await session.call_tool(name, args)
            dumped = result.model_dump(by_alias=True)
            out.setdefault(name, []).append(
                (dumped["isError"], dumped["structuredContent"], json.loads(dumped["content"][0]["text"])))
    return out


@needs_mcp
def test_mcp_server_lists_and_calls_the_tools(tmp_path):
    import anyio

    shutil.copytree(EXAMPLES, tmp_path / "specs")
    out = anyio.run(_session_round, tmp_path)
    assert out["server"] == "opdesign"

    listed = {t["name"]: t for t in out["tools"]}
    for definition in tool_definitions():
        tool = listed[definition["name"]]
        assert tool["description"] == definition["description"]
        assert tool["inputSchema"] == definition["inputSchema"]
        assert tool["outputSchema"] == definition["outputSchema"]

    (is_error, plan, text), (bad_error, bad, bad_text) = out["estimate_design"]
    assert not is_error and plan == text
    assert plan == plan_from_spec_file(tmp_path / DENSE).model_dump(mode="json", context=SAY)
    assert plan["op_name"] == "dense_fa_8192" and plan["skeleton"]["id"] == "SK-01"
    assert bad_error and bad == bad_text and bad["error"]["code"] == "path_outside_root"

    [(new_error, new, _)] = out["new_design"]
    assert not new_error and new["out_dir"] == "op" and "op/DESIGN.md" in new["files"]

    [(val_error, report, _)] = out["validate_design"]
    assert not val_error
    assert report["summary"]["error"] == 0, report["findings"]
    assert any(f.endswith("DESIGN.md") for f in report["files"])


def test_mcp_without_the_extra_exits_2_with_a_clear_message():
    code = ("import sys; sys.modules['mcp'] = None; sys.argv = ['opdesign', 'mcp']; "
            "from opdesign.cli.entry import main; main()")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stdout == ""
    # the README's code for a missing extra (issue 30 item 8: it said mcp_unavailable)
    assert "error: extra_missing:" in res.stderr and "pip install 'opdesign[mcp]'" in res.stderr


@needs_mcp
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmRSS from /proc (Linux only)")
def test_100_sequential_mcp_calls_keep_the_server_memory_flat():
    spec = importlib.util.spec_from_file_location("bench_mcp", REPO / "benchmarks" / "bench_mcp.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = bench.run(calls=100)
    assert figures["calls"] == 100 and figures["failures"] == []
    assert figures["rss_growth_mb"] < 20, figures
