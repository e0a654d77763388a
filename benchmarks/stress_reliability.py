"""Reliability under stress (issue 16): path-swap races, concurrent writers, SIGKILLs of `new`, MCP ping latency.

    python benchmarks/stress_reliability.py [--swaps 1000] [--pairs 1000] [--kills 30] [--long-s 20]

1. Swaps: a separate process flips a path component between a real folder inside the tool root and a
   symlink to a folder outside it, as fast as it can, while the tools run; per path kind (spec_path,
   design_path, golden_path, out_dir, the golden named inside a SPEC) it counts calls that read or
   wrote outside (target 0). Planning and rendering are cached for out_dir (the race is in the
   path handling, not in the planner), so 1000 new_design calls take seconds, not minutes.
2. Writer pairs: two threads released by one barrier write different renders (en, zh) into one fresh
   folder (half the pairs with force); counts mixed or partial folders, unexpected outcomes and left
   staging folders (target 0).
3. Kills: `opdesign new --force` over an older output, SIGKILLed at a random time within one run's
   duration; counts mixed or partial outputs right after the kill (target 0) and staging folders
   that the next run did not remove.
4. Ping latency: the MCP server (in-process, memory streams) runs one tool call that burns CPU in
   Python for --long-s seconds; pings are sent every 0.25 s meanwhile (target: max <= 100 ms).
   ``ping_stdio``: the same over real stdio (tool work in worker processes) (``opdesign mcp`` subprocess)
   while it analyses a golden of --golden-lines matmul statements (about 1 MB, just under the limit: a
   real call of tens of seconds).

Prints the figures as JSON; exits 1 when a target is missed. Linux (renameat2, /proc-free).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
SPEC = REPO / "examples" / "specs" / "dense_fa_8192.yaml"
GOLDEN = REPO / "tests" / "goldens" / "dense_forward_golden.py"

FLIPPER = r"""
import os, sys
link, inside, outside = sys.argv[1:4]
n = 0
while True:
    n += 1
    tmp = link + f".flip{n % 2}"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    os.symlink(outside if n % 2 else inside, tmp)
    os.replace(tmp, link)
"""


def _swaps(n: int) -> dict:
    from opdesign.agent import design as tool_design
    from opdesign.agent.tools import call_tool
    from opdesign.render.design import render_all
    from opdesign.workflows.new import plan_from_spec_file

    base = Path(tempfile.mkdtemp(prefix="opd-stress-"))
    root, outside = base / "root", base / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    text = SPEC.read_text()
    (root / "real" / "s.yaml").write_text(text)
    (outside / "s.yaml").write_text(text.replace("op_name: dense_fa_8192", "op_name: escaped_op"))
    (root / "real" / "g.py").write_text(GOLDEN.read_text())
    (outside / "g.py").write_text("def escaped(:\n")
    (root / "sg.yaml").write_text(text + "golden: d/g.py\n")
    (root / "real" / "DESIGN.md").write_text("# inside\n")
    (outside / "DESIGN.md").write_bytes(b"# outside\x00\n")
    plan = plan_from_spec_file(SPEC, tuning=True)
    files = render_all(plan, "en")

    import opdesign.render.design as render_design

    saved = (tool_design._SpecSource.plan, render_design.render_all)

    def cache_planning() -> None:  # for out_dir only: its race is in the paths, not in the planner
        tool_design._SpecSource.plan = lambda self, tuning=False: plan
        render_design.render_all = lambda p, lang: files

    def escaped(kind: str, payload: dict, ok: bool) -> bool:
        if kind == "spec_path":
            return ok and payload.get("op_name") == "escaped_op"
        if kind in ("golden_path", "spec_golden"):
            return not ok and "escaped" in payload["error"]["message"] + str(payload["error"]["details"]) \
                or (not ok and "syntax error" in payload["error"]["message"])
        if kind == "design_path":
            return ok and "NUL" in json.dumps(payload)
        return False

    calls = {
        "spec_path": ("estimate_design", {"spec_path": "d/s.yaml"}),
        "design_path": ("validate_design", {"design_path": "d/DESIGN.md"}),
        "golden_path": ("estimate_golden", {"golden_path": "d/g.py"}),
        "spec_golden": ("estimate_design", {"spec_path": "sg.yaml"}),
        "out_dir": ("new_design", {"spec_path": "real/s.yaml", "out_dir": "d/op", "force": True}),
    }
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(root / "d"), "real", str(outside)])
    out: dict = {}
    try:
        time.sleep(0.2)
        for kind, (name, args) in calls.items():
            if kind == "out_dir":
                cache_planning()
            counts = {"attempts": n, "escapes": 0, "ok": 0, "refused": {}}
            start = time.perf_counter()
            for _ in range(n):
                payload, ok = call_tool(name, args, root)
                if ok:
                    counts["ok"] += 1
                else:
                    code = payload["error"]["code"]
                    counts["refused"][code] = counts["refused"].get(code, 0) + 1
                counts["escapes"] += escaped(kind, payload, ok)
            counts["seconds"] = round(time.perf_counter() - start, 1)
            out[kind] = counts
    finally:
        flipper.kill()
        flipper.wait()
        tool_design._SpecSource.plan, render_design.render_all = saved  # the later parts render for real
    written_outside = sorted(p.name for p in outside.iterdir() if p.name not in ("s.yaml", "g.py", "DESIGN.md"))
    out["out_dir"]["escapes"] = len(written_outside)
    shutil.rmtree(base, ignore_errors=True)
    return out


def _state(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _pairs(n: int) -> dict:
    from opdesign.errors import OpdesignError
    from opdesign.io.publish import write_artifacts
    from opdesign.render.design import render_all
    from opdesign.workflows.new import plan_from_spec_file

    plan = plan_from_spec_file(SPEC, tuning=True)
    renders = {lang: render_all(plan, lang) for lang in ("en", "zh")}
    base = Path(tempfile.mkdtemp(prefix="opd-pairs-"))
    counts = {"pairs": n, "mixed_or_partial": 0, "unexpected_outcomes": 0, "staging_left": 0,
              "outcomes": {}}
    for i in range(n):
        force = i % 2 == 1
        out = base / f"p{i}"
        barrier, outcomes = threading.Barrier(2), []

        def writer(lang: str, barrier=barrier, out=out, force=force, outcomes=outcomes) -> None:
            barrier.wait()
            try:
                write_artifacts(renders[lang], out, force=force)
                outcomes.append("ok")
            except OpdesignError as err:
                outcomes.append(err.code)

        threads = [threading.Thread(target=writer, args=(lang,)) for lang in renders]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        key = f"force={force}: {'+'.join(sorted(outcomes))}"
        counts["outcomes"][key] = counts["outcomes"].get(key, 0) + 1
        expected = ["ok", "ok"] if force else ["ok", "output_exists"]
        counts["unexpected_outcomes"] += sorted(outcomes) != expected
        counts["mixed_or_partial"] += _state(out) not in list(renders.values())
        counts["staging_left"] += sum(1 for p in base.iterdir() if p.name.startswith(".opdesign-staging-"))
        shutil.rmtree(out)
    shutil.rmtree(base, ignore_errors=True)
    return counts


def _kills(n: int, seed: int = 16) -> dict:
    from opdesign.render.design import render_all
    from opdesign.workflows.new import plan_from_spec_file

    plan = plan_from_spec_file(SPEC, tuning=True)
    renders = [render_all(plan, lang) for lang in ("en", "zh")]
    base = Path(tempfile.mkdtemp(prefix="opd-kills-"))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))

    def run(lang: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "opdesign", "new", "--spec", str(SPEC), "--out", "op",
                                 "--lang", lang, "--force"], cwd=base, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    start = time.perf_counter()
    run("en").wait()
    duration = time.perf_counter() - start
    rng = random.Random(seed)
    counts = {"kills": n, "run_s": round(duration, 2), "mixed_or_partial": 0, "killed_before_exit": 0,
              "staging_after_kill": 0, "staging_after_next_run": 0}
    for i in range(n):
        proc = run("zh" if i % 2 == 0 else "en")
        time.sleep(rng.uniform(0, duration * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        counts["killed_before_exit"] += proc.returncode == -signal.SIGKILL
        state = _state(base / "op")
        if state not in renders:
            counts["mixed_or_partial"] += 1
            counts.setdefault("bad_states", []).append(
                {rel: [lang for lang, r in zip(("en", "zh"), renders, strict=True) if r.get(rel) == text]
                 for rel, text in state.items()}
                | {"exit": proc.returncode, "entries": sorted(p.name for p in base.rglob("*"))})
        counts["staging_after_kill"] += sum(1 for p in base.rglob(".opdesign-staging-*"))
        run("en").wait()  # the next run removes what the killed one left
        counts["staging_after_next_run"] += sum(1 for p in base.rglob(".opdesign-staging-*"))
    shutil.rmtree(base, ignore_errors=True)
    return counts


def _ping(long_s: float) -> dict:
    import anyio

    from opdesign.agent.mcp_server import Calls, _sdk, answer_malformed, build_server
    from opdesign.agent.tools import Root

    types = _sdk()[2]
    from mcp.shared.message import SessionMessage

    def burn(name, args, root):  # pure Python: holds the GIL as a heavy tool does
        end, x = time.perf_counter() + long_s, 0
        while time.perf_counter() < end:
            x += sum(range(1000))
        return {"rules": []}, True

    def request(rid, method, params=None):
        body = {"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})}
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(body))

    async def main() -> dict:
        root = Root(tempfile.mkdtemp(prefix="opd-ping-"))
        server = build_server(root, Calls(types, root, call=burn))
        to_server, server_in = anyio.create_memory_object_stream(64)
        server_out, from_server = anyio.create_memory_object_stream(64)
        relay_send, relay_receive = anyio.create_memory_object_stream(0)
        sent: dict = {}
        latencies: list[float] = []
        long_done: list[float] = []
        async with anyio.create_task_group() as group:
            group.start_soon(answer_malformed, types, server_in, server_out, relay_send)
            group.start_soon(server.run, relay_receive, server_out, server.create_initialization_options())
            await to_server.send(request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                           "clientInfo": {"name": "s", "version": "0"}}))
            await from_server.receive()
            await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(
                {"jsonrpc": "2.0", "method": "notifications/initialized"})))

            async def reader():
                while True:
                    msg = (await from_server.receive()).message.model_dump(by_alias=True, exclude_none=True)
                    if msg["id"] == 2:
                        long_done.append(time.perf_counter())
                        return
                    latencies.append(time.perf_counter() - sent[msg["id"]])

            group.start_soon(reader)
            t0 = time.perf_counter()
            await to_server.send(request(2, "tools/call", {"name": "list_rules", "arguments": {}}))
            await anyio.sleep(1.0)
            rid = 100
            while not long_done:
                rid += 1
                sent[rid] = time.perf_counter()
                await to_server.send(request(rid, "ping"))
                await anyio.sleep(0.25)
            group.cancel_scope.cancel()
        answered_during = sum(1 for r, t in sent.items() if t < long_done[0])
        return {"long_call_s": round(long_done[0] - t0, 1), "pings": len(latencies),
                "pings_sent_during_call": answered_during,
                "max_ms": round(1000 * max(latencies), 1),
                "median_ms": round(1000 * sorted(latencies)[len(latencies) // 2], 2)}

    return anyio.run(main)


def _big_golden(folder: Path, lines: int) -> Path:
    """A golden whose one function holds ``lines`` matmul statements (under the 1 MiB limit)."""
    body = "".join(f"    s{i} = q @ k.T * {i}\n" for i in range(lines))
    path = folder / "big_golden.py"
    path.write_text(f"def big_golden(q, k):\n{body}    return q\n")
    return path


def _ping_stdio(lines: int) -> dict:
    """Ping latency over real stdio while the server analyses a large golden (a real long call)."""
    folder = Path(tempfile.mkdtemp(prefix="opd-pingio-"))
    golden = _big_golden(folder, lines)
    size = golden.stat().st_size
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "opdesign", "mcp", "--root", str(folder)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    arrived: dict = {}
    done = threading.Event()

    def reader():
        for line in proc.stdout:
            msg = json.loads(line)
            arrived[msg.get("id")] = (time.perf_counter(), msg)
            if msg.get("id") == 2:
                done.set()

    threading.Thread(target=reader, daemon=True).start()

    def send(body):
        proc.stdin.write(json.dumps(body) + "\n")
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "s", "version": "0"}}})
    while 1 not in arrived:
        time.sleep(0.01)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    t0 = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "estimate_golden", "arguments": {"golden_path": golden.name}}})
    time.sleep(1.0)
    sent, rid = {}, 100
    while not done.is_set():
        rid += 1
        sent[rid] = time.perf_counter()
        send({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        done.wait(0.25)
    end = arrived[2][0]
    proc.stdin.close()
    proc.wait()
    during = [arrived[r][0] - t for r, t in sent.items() if r in arrived and arrived[r][0] < end]
    shutil.rmtree(folder, ignore_errors=True)
    return {"golden_bytes": size, "long_call_s": round(end - t0, 1),
            "call_ok": not arrived[2][1]["result"].get("isError"), "pings_answered_during_call": len(during),
            "pings_sent": len(sent), "max_ms": round(1000 * max(during), 1) if during else None,
            "median_ms": round(1000 * sorted(during)[len(during) // 2], 2) if during else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swaps", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--long-s", type=float, default=20.0)
    parser.add_argument("--golden-lines", type=int, default=36000,
                        help="matmul lines of the golden analysed during the stdio ping part (36000: ~1 MB)")
    parser.add_argument("--only", choices=("swaps", "pairs", "kills", "ping", "ping_stdio"), action="append")
    args = parser.parse_args()
    parts = args.only or ["swaps", "pairs", "kills", "ping", "ping_stdio"]
    report = {}
    if "swaps" in parts:
        report["swaps"] = _swaps(args.swaps)
    if "pairs" in parts:
        report["pairs"] = _pairs(args.pairs)
    if "kills" in parts:
        report["kills"] = _kills(args.kills)
    if "ping" in parts:
        report["ping"] = _ping(args.long_s)
    if "ping_stdio" in parts:
        report["ping_stdio"] = _ping_stdio(args.golden_lines)
    print(json.dumps(report, indent=2))
    failed = (any(v["escapes"] for v in report.get("swaps", {}).values())
              or report.get("pairs", {}).get("mixed_or_partial") or report.get("pairs", {}).get("unexpected_outcomes")
              or report.get("kills", {}).get("mixed_or_partial")
              or report.get("kills", {}).get("staging_after_next_run")
              or report.get("ping", {}).get("max_ms", 0) > 100
              or (report.get("ping_stdio", {}).get("max_ms") or 0) > 100)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
