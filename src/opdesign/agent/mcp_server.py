"""``opdesign mcp``: the agent tools (:mod:`opdesign.agent.tools`) served over MCP on stdio.

Uses the official ``mcp`` Python SDK (optional extra: ``pip install 'opdesign[mcp]'``),
imported only when the server starts. Both SDK generations are supported:
mcp 2.x (handlers passed to ``Server(on_list_tools=..., on_call_tool=...)``) and
mcp 1.x (handlers registered in ``Server.request_handlers``).

Every tool call answers with a ``CallToolResult``: on success ``structuredContent``
is the tool's result (it matches the tool's ``outputSchema``) and ``content`` holds
the same JSON as text; on failure ``isError`` is true and both carry the
``{"error": {"code", "message", "details"}}`` object of ``opdesign tool call``.
stdout belongs to the protocol; logs and library output go to stderr.

Tool work runs in worker processes (:class:`Calls`), off the event loop, so ``ping``, ``tools/list``
and other calls are answered while a long call runs. At most :data:`MAX_CALLS` calls run at once (one
more is answered with ``busy``), each within :data:`CALL_TIMEOUT_S` seconds (then ``timeout``, and the
workers are restarted). Both are read from ``OPDESIGN_MCP_MAX_CALLS`` / ``OPDESIGN_MCP_CALL_TIMEOUT``.
An ``estimate_design`` of a SPEC whose bytes the server has answered before gets that answer at once
(:class:`Answers`), without a worker.
A line that is not a JSON-RPC message (bad JSON, a lone surrogate, a missing field) is answered with
a JSON-RPC error (-32700 parse error, -32600 invalid request) instead of being dropped.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from opdesign import __version__
from opdesign.agent.base import MAX_FILE_BYTES
from opdesign.agent.tools import Root, call_tool, tool_definitions
from opdesign.errors import BusyError, CallTimeoutError, ExtraMissingError, InternalError

SERVER_NAME = "opdesign"
INSTRUCTIONS = (
    "Design and lint PyPTO attention operators for Ascend NPUs. Workflow: spec_schema -> write a SPEC -> "
    "estimate_design -> new_design -> validate_design -> fix findings (explain_rule, get_pattern) -> run the "
    "scaffold self-check. Paths are relative to the server's root folder."
)


#: Tool calls running at once (worker threads); one more is answered with ``busy``.
MAX_CALLS = int(os.environ.get("OPDESIGN_MCP_MAX_CALLS", "4"))
#: Seconds one call may take before it is answered with ``timeout`` (verify_design runs PyPTO for minutes).
CALL_TIMEOUT_S = float(os.environ.get("OPDESIGN_MCP_CALL_TIMEOUT", "3600"))


class McpUnavailableError(ExtraMissingError):
    """The optional ``mcp`` SDK is not installed: ``extra_missing``, as for every missing extra (README)."""


def _sdk() -> tuple[Any, Any, Any]:
    """``(Server, stdio_server, types)`` of the installed SDK; McpUnavailableError without it."""
    try:
        import mcp.types as types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError as err:
        raise McpUnavailableError(
            f"the MCP server needs the optional 'mcp' package ({err}); install it with: pip install 'opdesign[mcp]'"
        ) from None
    return Server, stdio_server, types


def _result(types: Any, payload: dict[str, Any], ok: bool) -> Any:
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "structuredContent": payload, "isError": not ok}
    )


#: ``estimate_design`` answers the server keeps (least recently used out first): a few SPECs an agent iterates on
ANSWER_CACHE_SIZE = 64


def _spec_bytes(jail: Root, arguments: Any) -> bytes | None:
    """The bytes of ``estimate_design``'s SPEC, read as the tool reads it (inside the root), or None: not
    a plain call, a SPEC the tool refuses to read, or one that names a golden (a second file the plan reads)."""
    if (not isinstance(arguments, dict) or set(arguments) != {"spec_path"}
            or not isinstance(arguments["spec_path"], str)):
        return None
    try:
        raw, res = jail.read(arguments["spec_path"], "spec_path", MAX_FILE_BYTES)
        res.close()
    except Exception:  # noqa: BLE001 - the tool answers with the error itself
        return None
    return None if b"golden" in raw else raw


class Answers:
    """``estimate_design`` answers per (SPEC path, SPEC bytes), kept by the server for all its workers.

    The plan is a function of the SPEC's bytes (a SPEC that names a golden is never kept), so the
    same SPEC is answered again without a worker round trip or planning, and an edited SPEC (other
    bytes) is planned afresh. An answer is kept only when it succeeded and the SPEC still had the
    same bytes after it was planned; at most ``size`` answers, the least recently used out first.
    """

    def __init__(self, root: Root, size: int = ANSWER_CACHE_SIZE) -> None:
        self.root, self.size = root, size
        self._kept: OrderedDict[tuple[str, bytes], Any] = OrderedDict()

    def key(self, name: str, arguments: Any) -> tuple[str, bytes] | None:
        """The key of a call whose answer can be kept, else None."""
        if name != "estimate_design" or self.size <= 0:
            return None
        raw = _spec_bytes(self.root, arguments)
        return None if raw is None else (arguments["spec_path"], hashlib.sha256(raw).digest())

    def get(self, key: tuple[str, bytes] | None) -> Any:
        if key is None or key not in self._kept:
            return None
        self._kept.move_to_end(key)
        return self._kept[key]

    def keep(self, name: str, arguments: Any, key: tuple[str, bytes] | None, result: Any, ok: bool) -> None:
        if key is None or not ok or self.key(name, arguments) != key:  # failed, or the SPEC changed meanwhile
            return
        self._kept[key] = result
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def paths(self) -> list[str]:
        """The SPEC paths kept, oldest first."""
        return [path for path, _ in self._kept]


def _warm_worker() -> None:
    """Load what every design call needs (planner, renderer, cost model, catalog) in a fresh worker."""
    from opdesign._startup.npthreads import import_numpy

    import_numpy()
    import opdesign.tuning.rank  # noqa: F401
    import opdesign.workflows.new  # noqa: F401
    from opdesign.catalog import load_catalog

    load_catalog()


class Calls:
    """Runs tool calls off the event loop: at most ``max_calls`` at once, each within ``timeout`` seconds.

    By default in a pool of ``max_calls`` worker processes (spawned on the first call, reused): a tool
    that holds the GIL, even inside one long C call such as ``ast.parse`` of a 1 MB golden, cannot stall
    the loop, and a call past its time limit is stopped for real (the workers are killed and respawned;
    calls running with it answer ``internal_error``). With ``call`` given (tests, embedding), the call
    runs in a worker thread instead; a thread past its time limit still counts against ``max_calls``
    until it ends, so a stuck tool cannot pile up threads.
    """

    def __init__(self, types: Any, root: Root, max_calls: int = MAX_CALLS, timeout: float = CALL_TIMEOUT_S,
                 call: Any = None, worker: Any = None, answers: int = ANSWER_CACHE_SIZE) -> None:
        self.types, self.root, self.max_calls, self.timeout = types, root, max_calls, timeout
        self.call = call
        self.worker = worker or call_tool  # a module-level function: the pool imports it by name
        self.answers = Answers(root, answers)
        self.running = 0
        self._lock = threading.Lock()
        self._pool: Any = None

    def _release(self, *_: Any) -> None:
        with self._lock:
            self.running -= 1

    def _executor(self) -> Any:
        with self._lock:
            if self._pool is None:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                self._pool = ProcessPoolExecutor(self.max_calls, mp_context=multiprocessing.get_context("spawn"))
            return self._pool

    def _restart(self, pool: Any) -> None:
        """Kill the workers of ``pool`` (a call ran past its limit); the next call spawns new ones."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def warm(self) -> None:
        """Start one worker and load the design modules in it, so the first calls do not pay for imports."""
        if self.call is None:
            try:
                self._executor().submit(_warm_worker)
            except Exception:  # noqa: BLE001 - a call spawns the workers again when it needs them
                pass

    def close(self) -> None:
        """Stop the workers (the server is done; a call still running is not waited for)."""
        if self._pool is not None:
            self._restart(self._pool)

    async def __call__(self, name: str, arguments: dict[str, Any] | None) -> Any:
        args = arguments if arguments is not None else {}
        key = self.answers.key(name, args)
        kept = self.answers.get(key)
        if kept is not None:  # the same SPEC bytes: the answer it had, with no worker and no slot
            return kept
        result, ok = await self._run(name, args)
        self.answers.keep(name, args, key, result, ok)
        return result

    async def _run(self, name: str, args: dict[str, Any]) -> tuple[Any, bool]:
        """``(CallToolResult, ok)`` of one call in a worker."""
        import anyio

        with self._lock:
            if self.running >= self.max_calls:
                error = BusyError(f"{name}: the server is running {self.max_calls} calls; try again",
                                  {"max_calls": self.max_calls})
                return _result(self.types, error.to_json(), False), False
            self.running += 1
        timed_out = CallTimeoutError(f"{name}: no result within the per-call limit of {self.timeout:g} s",
                                     {"limit_s": self.timeout}).to_json()
        if self.call is not None:
            def work() -> tuple[dict[str, Any], bool]:
                try:
                    return self.call(name, args, self.root)
                finally:
                    self._release()

            with anyio.move_on_after(self.timeout) as scope:
                payload, ok = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
            if scope.cancelled_caught:
                payload, ok = timed_out, False
            return _result(self.types, payload, ok), ok
        try:
            pool = self._executor()
            future = pool.submit(self.worker, name, args, str(self.root.path))
        except Exception as err:  # noqa: BLE001 - e.g. a pool broken by a restart
            self._release()
            return _result(self.types, InternalError(f"{name}: worker unavailable: {err}").to_json(), False), False
        future.add_done_callback(self._release)
        with anyio.move_on_after(self.timeout) as scope:
            try:
                payload, ok = await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
            except Exception as err:  # noqa: BLE001 - the worker died (killed by another call's time limit)
                payload, ok = InternalError(f"{name}: worker stopped: {type(err).__name__}: {err}").to_json(), False
        if scope.cancelled_caught:
            self._restart(pool)
            payload, ok = timed_out, False
        return _result(self.types, payload, ok), ok


def rpc_error(types: Any, item: Exception) -> Any:
    """The JSON-RPC error answering a line the transport could not read as a message (its id when found)."""
    raw: Any = None
    detail = str(item).splitlines()[0][:200] if str(item) else type(item).__name__
    errors = getattr(item, "errors", None)
    if callable(errors):
        try:
            first = next(iter(errors()), {})
            raw, detail = first.get("input"), str(first.get("msg", detail))[:200]
        except Exception:  # noqa: BLE001 - any shape: answer with id null
            raw = None
    code, message = -32600, "Invalid Request"
    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw, code, message = None, -32700, "Parse error"
    rid = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        rid = None
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=f"{message}: {detail}"))


async def answer_malformed(types: Any, read_stream: Any, write_stream: Any, send: Any) -> None:
    """Relay the transport's messages to ``send``; answer each unreadable line with a JSON-RPC error."""
    from mcp.shared.message import SessionMessage

    async with send:
        async for item in read_stream:
            if isinstance(item, Exception):
                await write_stream.send(SessionMessage(rpc_error(types, item)))
            else:
                await send.send(item)


def build_server(root: Root, calls: Calls | None = None) -> Any:
    """An SDK ``Server`` listing and calling the opdesign tools inside ``root`` (tool work runs in ``calls``)."""
    Server, _, types = _sdk()
    tools = [types.Tool.model_validate(d) for d in tool_definitions()]
    calls = calls or Calls(types, root)

    if "on_call_tool" in inspect.signature(Server.__init__).parameters:  # mcp 2.x
        async def on_list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tools)

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            return await calls(params.name, params.arguments)

        return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                      on_list_tools=on_list_tools, on_call_tool=on_call_tool)

    server = Server(SERVER_NAME)  # mcp 1.x
    server.version = __version__
    server.instructions = INSTRUCTIONS

    async def list_tools(request: Any) -> Any:
        return types.ServerResult(types.ListToolsResult(tools=tools))

    async def call(request: Any) -> Any:
        return types.ServerResult(await calls(request.params.name, request.params.arguments))

    server.request_handlers[types.ListToolsRequest] = list_tools
    server.request_handlers[types.CallToolRequest] = call
    return server


def serve(root: str | Path = ".") -> None:
    """Serve the tools over stdio until the client closes the connection.

    Raises:
        McpUnavailableError: the ``mcp`` extra is not installed (exit code 2).
        NotFoundError: ``root`` is not a folder.
    """
    _, stdio_server, types = _sdk()
    jail = Root(root)
    calls = Calls(types, jail)
    server = build_server(jail, calls)
    calls.warm()
    import sys

    # The loop's own threads (stdin reads, the waits on worker results) hand the GIL over every switch
    # interval; 1 ms instead of 5 ms keeps answers (ping, tools/list) prompt while calls run.
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))

    import anyio

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream(0)
            async with anyio.create_task_group() as group:
                group.start_soon(answer_malformed, types, read_stream, write_stream, send)
                await server.run(receive, write_stream, server.create_initialization_options())
                group.cancel_scope.cancel()

    try:
        anyio.run(run)
    finally:
        calls.close()
