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
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from opdesign import __version__
from opdesign.errors import OpdesignError
from opdesign.agent.tools import Root, call_tool, tool_definitions

SERVER_NAME = "opdesign"
INSTRUCTIONS = (
    "Design and lint PyPTO attention operators for Ascend NPUs. Workflow: spec_schema -> write a SPEC -> "
    "estimate_design -> new_design -> validate_design -> fix findings (explain_rule, get_pattern) -> run the "
    "scaffold self-check. Paths are relative to the server's root folder."
)


class McpUnavailableError(OpdesignError):
    """The optional ``mcp`` SDK is not installed."""

    code = "mcp_unavailable"


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


def _tool_result(types: Any, root: Root, name: str, arguments: dict[str, Any] | None) -> Any:
    payload, ok = call_tool(name, arguments if arguments is not None else {}, root)
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "structuredContent": payload, "isError": not ok}
    )


def build_server(root: Root) -> Any:
    """An SDK ``Server`` listing and calling the opdesign tools inside ``root``."""
    Server, _, types = _sdk()
    tools = [types.Tool.model_validate(d) for d in tool_definitions()]

    if "on_call_tool" in inspect.signature(Server.__init__).parameters:  # mcp 2.x
        async def on_list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tools)

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            return _tool_result(types, root, params.name, params.arguments)

        return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                      on_list_tools=on_list_tools, on_call_tool=on_call_tool)

    server = Server(SERVER_NAME)  # mcp 1.x
    server.version = __version__
    server.instructions = INSTRUCTIONS

    async def list_tools(request: Any) -> Any:
        return types.ServerResult(types.ListToolsResult(tools=tools))

    async def call(request: Any) -> Any:
        return types.ServerResult(_tool_result(types, root, request.params.name, request.params.arguments))

    server.request_handlers[types.ListToolsRequest] = list_tools
    server.request_handlers[types.CallToolRequest] = call
    return server


def serve(root: str | Path = ".") -> None:
    """Serve the tools over stdio until the client closes the connection.

    Raises:
        McpUnavailableError: the ``mcp`` extra is not installed (exit code 2).
        NotFoundError: ``root`` is not a folder.
    """
    _, stdio_server, _ = _sdk()
    server = build_server(Root(root))

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    import anyio

    anyio.run(run)
