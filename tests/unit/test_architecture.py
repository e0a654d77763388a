"""The package's shape: the folder tree is the architecture, and imports flow one way.

The graph is read with ``ast`` from the sources under ``src/opdesign`` (``pypto_run`` included):
every ``import`` and ``from ... import`` anywhere in a module (function bodies included; relative
imports resolved), an edge to each package ``__init__`` the import runs on the way (except the
importer's own ancestors, which Python has already initialised), and ``from package import name``
resolved to the submodule when ``name`` is one.

A *package* is a folder right under ``src/opdesign`` (``cli``, ``validate`` ...); the three top-level
modules (``__init__``, ``__main__``, ``errors``) count as packages of their own. Packages are ranked
(:data:`LAYERS`): a module imports only its own package or a lower one, so there is no package loop
and a SPEC followed through ``new`` never climbs back. Size is a reason to look, not a test: there is
no line cap.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "opdesign"
#: The only modules at the top of ``src/opdesign``.
TOP_MODULES = {"__init__", "__main__", "errors"}
#: Packages from the bottom up; a package imports only its own modules and those of lower layers
#: (one layer may hold several packages that know nothing of each other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("io", "_startup"),
    ("catalog",),
    ("spec",),
    ("plan", "golden", "pypto_run"),
    ("tuning", "validate"),
    ("skeletons",),
    ("render",),
    ("workflows",),
    ("agent",),
    ("cli",),
    ("__main__",),
)
RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}
#: What ``validate`` may import besides itself (it gets the skeletons handed in, never imports them);
#: ``pypto_run`` for :mod:`opdesign.pypto_run.constants` only, the kernel constants ``verify`` also reads.
VALIDATE_MAY_IMPORT = {"errors", "io", "catalog", "spec", "plan", "pypto_run"}
#: What a skeleton's rule module may import from the validator (besides ``opdesign.validate`` itself,
#: the package ``__init__`` every ``opdesign.validate.X`` import runs).
RULE_API = ("opdesign.validate.api", "opdesign.validate.parse", "opdesign.validate.analysis")
SKELETON_ID = re.compile(r"SK-\d\d")
#: A skeleton id or one of its rule ids as a whole string (``"SK-01"``, ``"SK-01-P1"``, ``"SK-16-R4"``).
SKELETON_NAME = re.compile(r"SK-\d\d(-[A-Z]+\d+)?")
#: Modules allowed to name a skeleton id, and why (each one a value users see, not a selection).
ID_CITATIONS = {
    "opdesign.golden.models": "GoldenReport.rule: the card whose module-count rule decided (JSON field values)",
    "opdesign.golden.estimate": "the same rule names, set where the golden estimator decides the count",
}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
#: The skeleton packages, read from the folder (``skeletons/skNN/``).
SKELETONS = tuple(sorted(f"{ROOT}.skeletons.{p.name}" for p in (SRC / ROOT / "skeletons").iterdir()
                         if p.is_dir() and re.fullmatch(r"sk\d\d", p.name)))


def package_of(name: str) -> str:
    """``opdesign.validate.rules.code`` -> ``validate``; ``opdesign.errors`` -> ``errors``;
    ``opdesign`` -> ``__init__``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


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


def _trees() -> dict[str, ast.AST]:
    return {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


TREES = _trees()
#: Per module, the modules it names in an import (no ancestors added).
DIRECT = {name: {t for t in _imports(name, tree) if t in MODULES} for name, tree in TREES.items()}


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, tree in TREES.items():
        edges = set()
        for target in _imports(name, tree):
            parts = target.split(".")
            for i in range(2, len(parts) + 1):  # the packages an import initialises, then the module
                prefix = ".".join(parts[:i])
                if prefix in MODULES and prefix != name and not name.startswith(prefix + "."):
                    edges.add(prefix)
        graph[name] = edges
    return graph


GRAPH = _graph()
#: Package -> the other packages its modules import.
PACKAGE_GRAPH: dict[str, set[str]] = {}
for _name, _edges in GRAPH.items():
    PACKAGE_GRAPH.setdefault(package_of(_name), set()).update(
        package_of(t) for t in _edges if package_of(t) != package_of(_name))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
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


# --- the reader sees the package ---------------------------------------------------------------------


def test_the_graph_sees_the_package() -> None:
    """The reader finds the layers and their edges (a broken reader would pass every test below)."""
    assert {"opdesign.workflows.new", "opdesign.skeletons.registry", "opdesign.validate.engine",
            "opdesign.pypto_run.runner"} <= set(GRAPH)
    assert "opdesign.skeletons.registry" in GRAPH["opdesign.workflows.new"]
    assert "opdesign.skeletons.sk01" in GRAPH["opdesign.skeletons.registry"]
    assert "opdesign.tuning" in GRAPH["opdesign.workflows.new"]  # a function-level import
    assert "opdesign.validate" in GRAPH["opdesign.skeletons.sk01.rules"]  # the package __init__ it runs
    assert "opdesign.validate.api" in DIRECT["opdesign.skeletons.sk01.rules"]
    assert {"skeletons", "validate", "plan"} <= PACKAGE_GRAPH["workflows"]
    assert "validate" in PACKAGE_GRAPH["skeletons"]


def test_the_skeleton_list_is_the_folder() -> None:
    assert "opdesign.skeletons.sk01" in SKELETONS and len(SKELETONS) >= 3
    assert all(s in MODULES for s in SKELETONS)


def test_every_package_is_ranked() -> None:
    packages = {package_of(n) for n in MODULES} - {"__init__"}
    assert packages - set(RANK) == set(), "rank the new package in LAYERS"
    assert set(RANK) - packages - {"__init__"} == set(), "a ranked package that no longer exists"


def test_a_cycle_is_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


# --- the tree -------------------------------------------------------------------------------------------


def test_at_most_three_modules_at_the_top() -> None:
    top = {p.stem for p in (SRC / ROOT).glob("*.py")}
    assert top <= TOP_MODULES, f"move {sorted(top - TOP_MODULES)} into the package of its role"


# --- one-way flow ------------------------------------------------------------------------------------------


def test_no_module_import_cycle() -> None:
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_package_import_loop() -> None:
    cycle = _cycle(PACKAGE_GRAPH)
    assert cycle is None, "package loop: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_its_package_or_lower_layers(name: str) -> None:
    own = RANK[package_of(name)] if package_of(name) != "__init__" else len(LAYERS)
    up = sorted(t for t in GRAPH[name]
                if package_of(t) != package_of(name) and package_of(t) != "__init__" and RANK[package_of(t)] >= own)
    assert up == [], f"{name} ({package_of(name)}) imports {up}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if package_of(n) == "validate"))
def test_validate_never_imports_skeletons_or_render(name: str) -> None:
    out = sorted(t for t in GRAPH[name] if package_of(t) not in VALIDATE_MAY_IMPORT | {"validate"})
    assert out == [], f"{name} imports {out}; the caller hands the skeletons in (validate.api.use_skeletons)"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _within(n, SKELETONS) and ".rules" in n))
def test_skeleton_rules_import_only_the_rule_api(name: str) -> None:
    inner = sorted(t for t in DIRECT[name] if package_of(t) == "validate"
                   and t != "opdesign.validate" and not _within(t, RULE_API))
    assert inner == [], f"{name} imports validator internals {inner}; use {', '.join(RULE_API)}"


def test_skeleton_packages_do_not_import_each_other() -> None:
    for name in MODULES:
        own = next((p for p in SKELETONS if _within(name, (p,))), None)
        if own:
            other = sorted(t for t in GRAPH[name] if _within(t, SKELETONS) and not _within(t, (own,)))
            assert other == [], f"{name} imports {other}"


def test_planning_never_reaches_render_validate_or_workflows() -> None:
    """spec -> skeletons/<id> -> plan / tuning -> render: the skeletons' planning modules stay below the
    renderer, the validator and the workflows (their rule modules alone import the validator's rule API)."""
    for name in MODULES:
        if package_of(name) == "skeletons" and ".rules" not in name:
            up = sorted(t for t in GRAPH[name] if package_of(t) in {"render", "validate", "workflows", "cli", "agent"})
            assert up == [], f"{name} imports {up}"


def test_the_layer_checks_fire() -> None:
    """A climb back and a loop are caught on a made-up graph (the checks above cannot pass vacuously)."""
    graph = {"validate": {"skeletons"}, "skeletons": {"validate"}}
    assert _cycle(graph) == ["skeletons", "validate", "skeletons"]
    assert RANK["validate"] < RANK["skeletons"] < RANK["render"] < RANK["workflows"] < RANK["cli"]
    assert package_of("opdesign.validate.rules.code") == "validate" and package_of("opdesign.errors") == "errors"


# --- skeleton ids live in the skeleton packages ----------------------------------------------------------


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _id_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are exactly a skeleton id or a skeleton rule id (``"SK-01"``, ``"SK-01-P1"``):
    a comparison operand, a lookup key or a selection, never a citation such as ``"SK-01-R6 FP32 state"``
    (docstrings excluded)."""
    skip = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and SKELETON_NAME.fullmatch(n.value.strip())]


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


@pytest.mark.parametrize("name", sorted(n for n in MODULES if package_of(n) != "skeletons"))
def test_only_skeleton_packages_name_skeleton_ids(name: str) -> None:
    tree = TREES[name]
    if name not in ID_CITATIONS:
        assert _id_strings(tree) == [], f"{name} names a skeleton (rule) id; read it from the registered Skeleton"
    assert _id_comparisons(tree) == [], f"{name} compares skeleton ids; make it an attribute of the Skeleton"


def test_the_citations_are_still_needed() -> None:
    """An allowed module that no longer names an id leaves the list (the list cannot grow stale)."""
    for name in ID_CITATIONS:
        assert _id_strings(TREES[name]) != [], f"{name} names no skeleton id any more: drop it from ID_CITATIONS"


def test_the_id_checks_fire() -> None:
    tree = ast.parse('"""SK-01 docstring."""\nx = plan.id == "SK-02"\ny = s in ("SK-16-R4", "a")\nz = "SK-01-R6 FP32"\n'
                     'w = {"SK-01-P1": 1}\n')
    assert sorted(_id_strings(tree)) == [(2, "SK-02"), (3, "SK-16-R4"), (5, "SK-01-P1")]
    assert _id_comparisons(tree) == [(2, "SK-02"), (3, "SK-16-R4")]
