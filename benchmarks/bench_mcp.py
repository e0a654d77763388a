"""Memory and latency of `opdesign mcp` over many sequential tool calls.

Starts the server as a subprocess with the official SDK's stdio client, warms it
up (one call of each tool in the mix), reads the server's resident set size
(VmRSS in /proc/<pid>/status), makes N sequential calls cycling through the mix,
and reads VmRSS again. Linux only (/proc).

    python benchmarks/bench_mcp.py [--calls 100] [--limit-mb 20]

`raw_rpc` repeats the mix over plain JSON-RPC lines on the server's stdin / stdout (no SDK client):
the server's own latency plus the pipe, without the client's checks. The SDK client's latency above
includes its jsonschema check of every `structuredContent` against the tool's `outputSchema`, which
`client_schema_check_cpu_ms` measures on its own.

Prints the figures as JSON; exits 1 when RSS grows by the limit or more, or a call fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIX = [
    ("estimate_design", {"spec_path": "specs/dense_fa_8192.yaml"}),
    ("validate_design", {"design_path": "op"}),
    ("estimate_design", {"spec_path": "specs/causal_gqa_tail.yaml"}),
    ("list_rules", {}),
    ("explain_rule", {"id": "C-TILE-02"}),
    ("get_pattern", {"id": "SK-01"}),
    ("estimate_golden", {"golden_path": "goldens/dense_forward_golden.py"}),
    ("estimate_design", {"spec_path": "../outside.yaml"}),  # an error answer
]
EXPECT_ERROR = {"../outside.yaml"}


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _server_pid() -> int:
    """The `opdesign mcp` child of this process (the SDK does not expose the pid)."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"mcp" in cmdline and b"opdesign" in cmdline:
            return int(entry.name)
    raise RuntimeError("the opdesign mcp server process was not found")


def _server_package(pid: int) -> str:
    """The PYTHONPATH the server runs with (which opdesign tree is measured)."""
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next((e.decode().split("=", 1)[1] for e in env if e.startswith(b"PYTHONPATH=")), "(installed package)")


def _prepare_root(root: Path) -> None:
    """A tool root with the example SPECs, the test goldens and one generated operator folder."""
    shutil.copytree(REPO / "examples" / "specs", root / "specs")
    shutil.copytree(REPO / "tests" / "goldens", root / "goldens")
    from opdesign.agent.tools import call_tool

    payload, ok = call_tool("new_design", {"spec_path": "specs/dense_fa_8192.yaml", "out_dir": "op"}, root)
    if not ok:
        raise RuntimeError(f"new_design failed: {payload}")


async def _bench(root: Path, calls: int) -> dict:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

    env = get_default_environment()  # the SDK passes on only a few variables: keep PYTHONPATH (the tree measured)
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "opdesign", "mcp", "--root", str(root)], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        pid = _server_pid()
        server_tree = _server_package(pid)
        for name, args in MIX:  # warm-up: imports, catalog and schema caches
            await session.call_tool(name, args)
        rss_start = _rss_kb(pid)
        latencies, failures, per_tool = [], [], {}
        for i in range(calls):
            name, args = MIX[i % len(MIX)]
            start = time.perf_counter()
            result = await session.call_tool(name, args)
            latencies.append(time.perf_counter() - start)
            per_tool.setdefault(f"{name} {json.dumps(args)}", []).append(latencies[-1] * 1000)
            if bool(result.isError if hasattr(result, "isError") else result.is_error) != (
                    args.get("spec_path") in EXPECT_ERROR):
                failures.append(name)
        rss_end = _rss_kb(pid)
    ms = sorted(x * 1000 for x in latencies)
    return {
        "calls": calls,
        "server_opdesign": server_tree,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "failures": failures,
        "rss_start_mb": round(rss_start / 1024, 2),
        "rss_end_mb": round(rss_end / 1024, 2),
        "rss_growth_mb": round((rss_end - rss_start) / 1024, 2),
        "total_s": round(sum(latencies), 3),
        "latency_ms": {"mean": round(statistics.mean(ms), 2), "p50": round(ms[len(ms) // 2], 2),
                       "p95": round(ms[int(len(ms) * 0.95) - 1], 2), "max": round(ms[-1], 2)},
        "mean_ms_per_call": {call: round(statistics.mean(v), 2) for call, v in per_tool.items()},
        "p50_ms_per_call": {call: round(statistics.median(v), 2) for call, v in per_tool.items()},
    }


def _raw_rpc(root: Path, calls: int) -> dict:
    """The mix over raw JSON-RPC lines (one request written, its answer read): ms per call, no SDK client."""
    import subprocess

    from mcp.types import LATEST_PROTOCOL_VERSION

    proc = subprocess.Popen([sys.executable, "-m", "opdesign", "mcp", "--root", str(root)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ))
    ids = iter(range(1, 10**9))

    def ask(method: str, params: dict) -> dict:
        rid = next(ids)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout during {method}")
            answer = json.loads(line)
            if answer.get("id") == rid:
                return answer

    try:
        ask("initialize", {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                           "clientInfo": {"name": "bench_mcp", "version": "0"}})
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for name, args in MIX:  # warm-up, as the SDK run
            ask("tools/call", {"name": name, "arguments": args})
        per_tool: dict[str, list[float]] = {}
        failures = []
        for i in range(calls):
            name, args = MIX[i % len(MIX)]
            start = time.perf_counter()
            answer = ask("tools/call", {"name": name, "arguments": args})
            per_tool.setdefault(f"{name} {json.dumps(args)}", []).append((time.perf_counter() - start) * 1000)
            if bool(answer.get("result", {}).get("isError")) != (args.get("spec_path") in EXPECT_ERROR):
                failures.append(name)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    ms = sorted(x for v in per_tool.values() for x in v)
    return {"calls": calls, "failures": failures, "p50_ms": round(ms[len(ms) // 2], 2),
            "p50_ms_per_call": {call: round(statistics.median(v), 2) for call, v in per_tool.items()}}


def _client_validation_ms(root: Path, rounds: int = 30) -> dict[str, float]:
    """CPU ms (median) the SDK client spends per answer checking ``structuredContent`` against the tool's
    ``outputSchema`` (jsonschema), part of every latency above: the client's share, not the server's."""
    import jsonschema

    from opdesign.agent.tools import call_tool, tool_definitions

    schemas = {d["name"]: d.get("outputSchema") for d in tool_definitions()}
    out = {}
    for name, args in MIX:
        payload, ok = call_tool(name, args, root)
        if not ok or not schemas.get(name) or f"{name} {json.dumps(args)}" in out:
            continue
        validator = jsonschema.validators.validator_for(schemas[name])(schemas[name])
        spent = []
        for _ in range(rounds):
            start = time.process_time()
            validator.validate(payload)
            spent.append((time.process_time() - start) * 1000)
        out[f"{name} {json.dumps(args)}"] = round(statistics.median(spent), 2)
    return out


def run(calls: int = 100) -> dict:
    """Run the benchmark in a temporary root and return the figures."""
    import anyio

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _prepare_root(root)
        figures = anyio.run(_bench, root, calls)
        figures["client_schema_check_cpu_ms"] = _client_validation_ms(root)
        figures["raw_rpc"] = _raw_rpc(root, calls)
        return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--limit-mb", type=float, default=20.0)
    options = parser.parse_args()
    figures = run(options.calls)
    figures["limit_mb"] = options.limit_mb
    print(json.dumps(figures, indent=2))
    failed = figures["failures"] or figures["raw_rpc"]["failures"]
    return 0 if figures["rss_growth_mb"] < options.limit_mb and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
