"""The package's shape: its import graph (function-level imports included) has no cycle, no module
is over 400 lines, the core never names a skeleton id, and lower layers never import higher ones.

The graph is read with ``ast`` from the sources under ``src/opdesign``: every ``import`` and
``from ... import`` anywhere in a module (relative imports resolved), an edge to each package
``__init__`` the import runs on the way (except the importer's own ancestors, which Python has
already initialised), and ``from package import name`` resolved to the submodule when ``name`` is one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = "opdesign"
MAX_LINES = 400
#: Helpers working in parallel own these; they are not part of this layering yet.
EXCLUDED = ("opdesign.pypto_run",)
#: Modules that drive every skeleton and must read per-skeleton behaviour from the registry.
CORE = ("opdesign.workflows.new", "opdesign.cli.entry", "opdesign.cli.app", "opdesign.cli.fast", "opdesign.render", "opdesign.agent",
        "opdesign.validate.engine", "opdesign.validate.engine.collect")
#: Lower layers never import higher ones (``opdesign.X`` prefixes).
LOWER = ("opdesign.errors", "opdesign.io.paths", "opdesign.spec", "opdesign.spec.messages", "opdesign.catalog", "opdesign.plan", "opdesign.io.yamlsafe",
         "opdesign.io.streams", "opdesign.catalog.dtypes")
HIGHER = ("opdesign.skeletons", "opdesign.tuning", "opdesign.render", "opdesign.validate", "opdesign.agent",
          "opdesign.cli.entry", "opdesign.cli.app", "opdesign.cli.fast", "opdesign.workflows.new")
SKELETON_ID = re.compile(r"SK-\d\d")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if not _within(name, EXCLUDED):
            out[name] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str, tree: ast.AST) -> set[str]:
    """Absolute names of every module imported anywhere in the module (function bodies included)."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in MODULES)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges = set()
        for target in _imports(name, ast.parse(path.read_text(encoding="utf-8"))):
            parts = target.split(".")
            for i in range(2, len(parts) + 1):  # the packages an import initialises, then the module
                prefix = ".".join(parts[:i])
                if prefix in MODULES and prefix != name and not name.startswith(prefix + "."):
                    edges.add(prefix)
        graph[name] = edges
    return graph


GRAPH = _graph()


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_sees_the_package() -> None:
    """The reader finds the layers and their edges (a broken reader would pass every test below)."""
    assert {"opdesign.workflows.new", "opdesign.skeletons.registry", "opdesign.validate.engine"} <= set(GRAPH)
    assert "opdesign.skeletons.registry" in GRAPH["opdesign.workflows.new"]
    assert "opdesign.skeletons.sk01" in GRAPH["opdesign.skeletons.registry"]
    assert "opdesign.tuning" in GRAPH["opdesign.workflows.new"]  # a function-level import
    assert "opdesign.validate" in GRAPH["opdesign.skeletons.sk01.rules"]  # the package __init__ it runs


def test_a_cycle_is_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle() -> None:
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_400_lines(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]}: {lines} lines"


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _id_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are exactly a skeleton id (``"SK-01"``): a comparison operand, a lookup
    key or a selection, never a citation such as ``"SK-01-R6 FP32 state"`` (docstrings excluded)."""
    skip = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and SKELETON_ID.fullmatch(n.value.strip())]


def _id_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """Comparisons (``==``, ``in`` ...) with a string constant that starts with a skeleton id."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                for const in ast.walk(operand):
                    if (isinstance(const, ast.Constant) and isinstance(const.value, str)
                            and SKELETON_ID.match(const.value)):
                        out.append((node.lineno, const.value))
    return out


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _within(n, CORE)))
def test_core_modules_name_no_skeleton_id(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    assert _id_strings(tree) == [], f"{name} names a skeleton id; read it from the registered Skeleton"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not _within(n, ("opdesign.skeletons",))))
def test_only_skeleton_packages_compare_skeleton_ids(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    assert _id_comparisons(tree) == [], f"{name} compares skeleton ids; make it an attribute of the Skeleton"


def test_the_id_checks_fire() -> None:
    tree = ast.parse('"""SK-01 docstring."""\nx = plan.id == "SK-02"\ny = s in ("SK-16-R4", "a")\nz = "SK-01-R6 FP32"\n')
    assert _id_strings(tree) == [(2, "SK-02")]
    assert _id_comparisons(tree) == [(2, "SK-02"), (3, "SK-16-R4")]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _within(n, LOWER)))
def test_lower_layers_never_import_higher_ones(name: str) -> None:
    up = sorted(t for t in GRAPH[name] if _within(t, HIGHER))
    assert up == [], f"{name} imports {up}"


def test_skeleton_packages_do_not_import_each_other() -> None:
    packages = ("opdesign.skeletons.sk01", "opdesign.skeletons.sk02", "opdesign.skeletons.sk16")
    for name in MODULES:
        own = next((p for p in packages if _within(name, (p,))), None)
        if own:
            other = sorted(t for t in GRAPH[name] if _within(t, packages) and not _within(t, (own,)))
            assert other == [], f"{name} imports {other}"


def test_planning_never_reaches_the_cost_model_render_or_validate() -> None:
    """spec -> plan -> render -> validate: the skeletons' planning modules stay below the cost model,
    the renderer and the validator (their rule modules alone import the validator's rule API)."""
    for name in MODULES:
        if _within(name, ("opdesign.skeletons",)) and ".rules" not in name:
            up = sorted(t for t in GRAPH[name] if _within(t, ("opdesign.tuning", "opdesign.render",
                                                                "opdesign.validate", "opdesign.workflows.new")))
            assert up == [], f"{name} imports {up}"
