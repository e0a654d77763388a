"""Which opdesign packages and modules a SPEC crosses through a whole command, and whether it climbs back.

    python benchmarks/trace_flow.py [SPEC.yaml]      (default: examples/specs/causal_gqa_tail.yaml)

Runs ``opdesign new --spec SPEC --out <tmp>`` and then ``opdesign validate <tmp>`` in this process
(:func:`opdesign.cli.entry.main`, the console script's code) under ``sys.setprofile``, each once
untraced first (warm caches, loaded modules: the traced run shows the flow, not the imports; the
validator is warmed on another design, whose findings its memo does not hold for this one). Per
command it prints:

* packages: the opdesign packages (``cli``, ``workflows``, ``spec`` ...) whose Python functions run,
  in first-call order, with the modules of each;
* calls up: distinct (caller, callee) package pairs where the callee's level is higher than the
  caller's; a package's level is 0 when it imports no other opdesign package, else 1 + the highest
  level it imports (imports read with ``ast``, function-level imports included). A call up is a
  climb back (a callback the caller handed down shows as one and is named so).

Successor of ``trace_planning.py`` (which traces the planner alone, from the registry's entry point).
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PKG = "opdesign"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PKG).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
BY_FILE = {str(path.resolve()): name for name, path in MODULES.items()}


def package_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        own = package_of(name)
        graph.setdefault(own, set())
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")[: len(base.split(".")) - node.level + 1]
                    targets = [".".join(parts + ([node.module] if node.module else []))]
                else:
                    targets = [node.module or ""]
            for target in targets:
                if target.startswith(PKG + ".") and package_of(target) != own:
                    graph[own].add(package_of(target))
    return graph


GRAPH = _package_graph()
LEVEL: dict[str, int] = {}


def level(package: str, seen: tuple[str, ...] = ()) -> int:
    if package not in LEVEL:
        if package in seen:
            raise SystemExit(f"package loop: {' -> '.join(seen + (package,))}")
        LEVEL[package] = 1 + max((level(p, seen + (package,)) for p in GRAPH.get(package, ())), default=-1)
    return LEVEL[package]


def trace(argv: list[str], warm: list[str] | None = None) -> tuple[dict[str, list[str]], list[tuple[str, str, str]]]:
    """Run ``opdesign argv`` traced, after ``warm`` (default: ``argv``) untraced: (package -> modules in
    first-call order, calls up)."""
    from opdesign.cli.entry import main

    order: dict[str, list[str]] = {}
    up: dict[tuple[str, str], str] = {}

    def profile(frame, event, arg):  # noqa: ANN001, ANN202
        if event != "call":
            return
        callee = BY_FILE.get(frame.f_code.co_filename)
        if callee is None:
            return
        order.setdefault(package_of(callee), [])
        if callee not in order[package_of(callee)]:
            order[package_of(callee)].append(callee)
        back = frame.f_back
        while back is not None and BY_FILE.get(back.f_code.co_filename) is None:
            back = back.f_back  # through library frames (jinja2, pydantic) to the opdesign caller
        if back is None:
            return
        caller = BY_FILE[back.f_code.co_filename]
        a, b = package_of(caller), package_of(callee)
        if a != b and level(b) > level(a):
            up.setdefault((a, b), f"{caller}.{back.f_code.co_name} -> {callee}.{frame.f_code.co_name}")

    def run(traced: bool) -> None:
        sys.argv = ["opdesign", *(argv if traced or warm is None else warm)]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            if traced:
                sys.setprofile(profile)
            try:
                main()
            finally:
                sys.setprofile(None)

    run(False)
    run(True)
    return order, [(a, b, why) for (a, b), why in sorted(up.items())]


def report(title: str, argv: list[str], warm: list[str] | None = None) -> None:
    order, up = trace(argv, warm)
    print(f"== {title}: opdesign {' '.join(argv)}")
    print("packages: " + " -> ".join(order))
    for package, modules in order.items():
        print(f"  {package} (level {level(package)}): {', '.join(m.removeprefix(PKG + '.') for m in modules)}")
    print(f"calls up: {len(up)}")
    for a, b, why in up:
        print(f"  {a} -> {b}: {why}")


def main() -> None:
    spec = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "examples" / "specs" / "causal_gqa_tail.yaml")
    other = str(ROOT / "examples" / "specs" / "dense_fa_8192.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        out, warm = str(Path(tmp) / "design"), str(Path(tmp) / "warm")
        report("new", ["new", "--spec", spec, "--out", out, "--force"])
        report("new", ["new", "--spec", other, "--out", warm, "--force"])
        # warmed on another design: the validator's memo (findings by content) would skip the rules
        report("validate", ["validate", out], warm=["validate", warm])


if __name__ == "__main__":
    main()
