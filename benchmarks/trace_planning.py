"""Which opdesign modules planning a SPEC passes through, and how often it turns back.

    python benchmarks/trace_planning.py [--entry MODULE:FUNCTION] [SPEC.yaml ...]   (default: examples/specs/*.yaml)

``--entry`` traces another planning entry point taking ``(spec, golden_module_count)``, e.g.
``opdesign.estimate:estimate`` of a checkout before the skeleton packages (put that checkout's
``src`` first on ``PYTHONPATH``); the modules are read from wherever ``opdesign`` is imported.

Each SPEC is loaded and planned once untraced (so the cached catalog is warm), then planned again
under ``sys.setprofile`` from the registry's entry point
(:func:`opdesign.skeletons.registry.estimate`). Per SPEC it prints:

* modules: the opdesign modules whose Python functions run, in first-call order;
* calls up: distinct (caller, callee) module pairs where the callee is higher than the caller;
  a module's level is 0 for a module importing no other opdesign module, else 1 + the highest
  level it imports (imports read with ``ast``, function-level imports included);
* re-entries: distinct (caller, callee) module pairs where the callee module is still running
  further down the stack (A -> B -> A: the flow comes back into a module it had left);
* returns: distinct (from, to) module pairs of returns that land in another module.

The event totals (every call and return, not only distinct pairs) are printed in brackets.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "opdesign"
FILES: dict[str, Path] = {}


def _module_files(src: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((src / PKG).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str) -> set[str]:
    path = FILES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in FILES)
    return {m for m in found if m in FILES and m != name}


@cache
def level(name: str) -> int:
    """0 for a module importing no opdesign module, else 1 + the highest level it imports."""
    deps = _imports(name)
    level.guard = getattr(level, "guard", set())
    if name in level.guard:  # an import cycle: stop here
        return 0
    level.guard.add(name)
    try:
        return 1 + max((level(d) for d in deps), default=-1)
    finally:
        level.guard.discard(name)


def trace(fn, *args):
    """Run ``fn(*args)`` under a profiler: (modules in order, up pairs, return pairs, re-entry pairs, totals)."""
    stack: list[str] = []
    order: list[str] = []
    up: set[tuple[str, str]] = set()
    back: set[tuple[str, str]] = set()
    reentry: set[tuple[str, str]] = set()
    totals = [0, 0, 0]

    def nearest() -> str | None:
        return next((m for m in reversed(stack) if m.startswith(PKG + ".") or m == PKG), None)

    def profile(frame, event, _arg):
        if event not in ("call", "return"):
            return
        mod = frame.f_globals.get("__name__", "?")
        if event == "call":
            caller = nearest()
            stack.append(mod)
            if mod in FILES:
                if mod not in order:
                    order.append(mod)
                if caller and caller != mod and level(mod) > level(caller):
                    up.add((caller, mod))
                    totals[0] += 1
                if caller and caller != mod and mod in stack[:-1]:
                    reentry.add((caller, mod))
                    totals[2] += 1
        else:
            if stack:
                stack.pop()
            to = nearest()
            if mod in FILES and to and to != mod:
                back.add((mod, to))
                totals[1] += 1

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return order, up, back, reentry, totals


def main(argv: list[str]) -> int:
    import importlib

    entry = "opdesign.skeletons.registry:estimate"
    if argv[:1] == ["--entry"]:
        entry, argv = argv[1], argv[2:]
    import opdesign
    from opdesign.spec import load_spec

    FILES.update(_module_files(Path(opdesign.__file__).resolve().parent.parent))
    module, _, name = entry.partition(":")
    estimate = getattr(importlib.import_module(module), name)
    try:
        from opdesign.workflows.new import golden_module_count
    except ImportError:
        from opdesign.cli.entry import _golden_module_count as golden_module_count  # type: ignore[no-redef]

    specs = [Path(a) for a in argv] or sorted((ROOT / "examples" / "specs").glob("*.yaml"))
    for path in specs:
        spec = load_spec(path)
        golden = golden_module_count(spec, path)
        estimate(spec, golden)
        order, up, back, reentry, totals = trace(estimate, spec, golden)
        print(f"{path.stem}: {len(order)} modules, {len(up)} calls up [{totals[0]}], "
              f"{len(reentry)} re-entries [{totals[2]}], {len(back)} returns [{totals[1]}]")
        print("  modules: " + ", ".join(m.removeprefix(PKG + ".") for m in order))
        for a, b in sorted(up):
            print(f"  up: {a.removeprefix(PKG + '.')} (level {level(a)}) -> "
                  f"{b.removeprefix(PKG + '.')} (level {level(b)})")
        for a, b in sorted(reentry):
            print(f"  re-entry: {a.removeprefix(PKG + '.')} -> {b.removeprefix(PKG + '.')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
