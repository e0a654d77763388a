"""`opdesign mcp` stays responsive: tool work runs off the event loop, with a cap and a time limit;
a line that is not a JSON-RPC message gets a JSON-RPC error."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading

import pytest
from conftest import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="needs the optional 'mcp' SDK")

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def _request(types, rid, method, params=None):
    from mcp.shared.message import SessionMessage

    body = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(body))


def _notification(types, method):
    from mcp.shared.message import SessionMessage

    return SessionMessage(types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", "method": method}))


async def _scenario(tmp_path, calls_factory, steps):
    """Run the server in-process on memory streams; ``steps(send, receive)`` drives it."""
    import anyio

    from opdesign.agent.mcp_server import _sdk, answer_malformed, build_server
    from opdesign.agent.tools import Root

    types = _sdk()[2]
    root = Root(tmp_path)
    server = build_server(root, calls_factory(types, root))
    to_server, server_in = anyio.create_memory_object_stream(16)
    server_out, from_server = anyio.create_memory_object_stream(16)
    relay_send, relay_receive = anyio.create_memory_object_stream(0)

    async def receive():
        message = (await from_server.receive()).message
        return message.model_dump(by_alias=True, exclude_none=True)

    async with anyio.create_task_group() as group:
        group.start_soon(answer_malformed, types, server_in, server_out, relay_send)
        group.start_soon(server.run, relay_receive, server_out, server.create_initialization_options())
        await to_server.send(_request(types, 1, "initialize", INIT))
        assert (await receive())["id"] == 1
        await to_server.send(_notification(types, "notifications/initialized"))
        result = await steps(types, to_server.send, receive)
        group.cancel_scope.cancel()
    return result


def test_ping_and_tools_list_answer_while_a_long_call_runs(tmp_path):
    import anyio

    from opdesign.agent.mcp_server import Calls

    started, release = threading.Event(), threading.Event()

    def slow(name, args, root):  # a tool call that lasts until the test lets it finish
        started.set()
        release.wait(600)
        return {"rules": []}, True

    async def steps(types, send, receive):
        order = []
        await send(_request(types, 2, "tools/call", {"name": "list_rules", "arguments": {}}))
        await anyio.to_thread.run_sync(started.wait, 600)
        await send(_request(types, 3, "ping"))
        await send(_request(types, 4, "tools/list"))
        while len(order) < 2:
            order.append((await receive())["id"])
        release.set()  # only now may the long call complete
        order.append((await receive())["id"])
        return order

    order = anyio.run(_scenario, tmp_path, lambda types, root: Calls(types, root, call=slow), steps)
    assert order[:2] in ([3, 4], [4, 3]) and order[2] == 2


def test_worker_processes_answer_ping_before_the_long_call_and_time_out_for_real(tmp_path):
    import anyio
    from mcp_slow_worker import wait_for_flag

    from opdesign.agent.mcp_server import Calls

    made = []

    def calls(types, root):
        made.append(Calls(types, root, worker=wait_for_flag))
        return made[-1]

    async def steps(types, send, receive):
        await send(_request(types, 2, "tools/call", {"name": "list_rules", "arguments": {}}))
        while not (tmp_path / "started").exists():  # the worker process is running the call
            await anyio.sleep(0.05)
        await send(_request(types, 3, "ping"))
        order = [(await receive())["id"]]
        (tmp_path / "release").touch()  # only now may the long call complete
        order.append((await receive())["id"])
        return order

    try:
        assert anyio.run(_scenario, tmp_path, calls, steps) == [3, 2]
    finally:
        made[0].close()

    def timing_out(types, root):  # the default worker (the real tools), limit 0 s: killed, then respawned
        made.append(Calls(types, root, timeout=0))
        return made[-1]

    async def two_calls(types, send, receive):
        await send(_request(types, 2, "tools/call", {"name": "list_rules", "arguments": {}}))
        first = await receive()
        made[-1].timeout = 600
        await send(_request(types, 3, "tools/call", {"name": "get_pattern", "arguments": {"id": "SK-01"}}))
        return first, await receive()

    try:
        first, second = anyio.run(_scenario, tmp_path, timing_out, two_calls)
    finally:
        made[-1].close()
    assert first["result"]["structuredContent"]["error"]["code"] == "timeout"
    assert second["result"]["structuredContent"]["id"] == "SK-01"


def test_calls_over_the_cap_are_busy_and_late_calls_time_out(tmp_path):
    import anyio

    from opdesign.agent.mcp_server import Calls

    release = threading.Event()

    def stuck(name, args, root):
        release.wait(600)
        return {"rules": []}, True

    async def steps(types, send, receive):
        await send(_request(types, 2, "tools/call", {"name": "list_rules", "arguments": {}}))
        first = await receive()  # the time limit (0 s) answers first
        await send(_request(types, 3, "tools/call", {"name": "list_rules", "arguments": {}}))
        second = await receive()  # the stuck thread still holds the only slot
        release.set()
        return first, second

    first, second = anyio.run(_scenario, tmp_path,
                              lambda types, root: Calls(types, root, max_calls=1, timeout=0, call=stuck), steps)
    assert first["result"]["isError"] and first["result"]["structuredContent"]["error"]["code"] == "timeout"
    assert second["result"]["structuredContent"]["error"]["code"] == "busy"


def test_malformed_lines_and_lone_surrogates_get_json_rpc_errors(tmp_path):
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_pattern", '
        '"arguments": {"id": "\\ud800"}}}',
        "this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 4}),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    ]
    proc = subprocess.Popen([sys.executable, "-m", "opdesign", "mcp", "--root", str(tmp_path)], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    answers = {}

    def read():  # until the last request is answered; stdin stays open so the server does not stop first
        for line in proc.stdout:
            answer = json.loads(line)
            answers[answer.get("id")] = answer
            if {1, 2, None, 4, 5} <= set(answers):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    reader.join(600)
    proc.stdin.close()
    proc.wait(600)
    assert answers[2]["error"]["code"] == -32600 and answers[2]["error"]["message"].startswith("Invalid Request")
    assert answers[None]["error"]["code"] == -32700
    assert answers[4]["error"]["code"] == -32600
    assert answers[5]["result"] == {}
