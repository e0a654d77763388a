"""Write an API manifest of PyPTO at a source commit by STATIC reading (``ast``) of ``python/pypto/**``.

Run on a local clone of hicann/pypto (nothing is downloaded; the commit must be in the clone)::

    python scripts/gen_pypto_api_source.py --git-dir PATH/TO/pypto/.git --commit 883e7dfb0 \\
        [--out constraints/pypto_api_883e7dfb0.yaml]

The manifest has the shape of ``constraints/pypto_api.yaml`` (which ``scripts/gen_pypto_api.py``
writes from an installed wheel by introspection), plus ``commit`` / ``commit_date``: the names
``pypto``, ``pypto.experimental`` and ``pypto.frontend`` export, with kinds, parameter lists, return
kinds and enum members, and the methods of ``Tensor``, ``SymbolicScalar`` and ``Element``. Only
facts (names, parameter names, return kinds) are written, never PyPTO code.

How names are found: every ``.py`` / ``.pyi`` file under ``python/pypto`` is a module; each
module's top-level statements (also inside ``if`` / ``try`` / ``with``) bind names by ``def``,
``class``, assignment (an alias of another binding, or a constant), ``from .x import a`` /
``from .x import *`` (through the other module's own bindings and a literal ``__all__``) and
``from . import sub``; every submodule is also a name of its package (``import pypto.ir``).
The C++ extension ``pypto_impl`` is read from its ``.pyi`` stubs, shipped in the package.

What static reading misses (checked by running this at tag r0.2.0 and comparing with the
manifest introspected from the 0.2.0 wheel; the script prints that comparison with ``--compare``):

- names the C++ extension binds that its ``.pyi`` stubs do not declare, and signatures of
  extension callables whose stub says ``*args, **kwargs`` or is missing;
- names bound at import time by code (``setattr(module, ...)``, ``globals()[...] = ...``, a loop
  over a list, a decorator that registers a function under another name), and a ``__all__``
  built by code (then every public name of the module is taken);
- signatures changed by a decorator that does not keep the wrapped function's signature;
- members a class inherits from a base defined outside the package, and enum members created
  by code rather than by assignments in the class body;
- constant values (only their kind is written: ``constant``) and return kinds without annotation.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_pypto_api import MODULES, VALUE_CLASSES, kwargs_names_ast, return_kind  # noqa: E402

HEADER = """\
# PyPTO public API manifest -- GENERATED, do not edit by hand.
# Source: STATIC reading (Python ast) of python/pypto/** of hicann/pypto at the commit below,
# with the .pyi stubs of the pypto_impl extension; no PyPTO code is copied, only names,
# parameter names, return kinds and enum members. Names the C++ extension binds without a
# stub, names bound by code at import time and a computed __all__ are not seen (see
# scripts/gen_pypto_api_source.py). Regenerate:
#   python scripts/gen_pypto_api_source.py --git-dir <clone>/.git --commit <commit>
# Fields as in pypto_api.yaml (positional, keyword_only, required, var_positional,
# var_keyword, var_keyword_names, returns, members, value_classes).
"""

_EXTERNAL = ("external",)  # a name bound to something outside pypto (stdlib, torch): not in the manifest
_ENUM_BASES = ("Enum", "IntEnum", "Flag", "IntFlag", "StrEnum")


@dataclass
class _Module:
    name: str
    tree: ast.Module
    is_package: bool
    bindings: dict[str, Any] | None = None  # name -> entry dict, or ("ref", module, name)
    busy: bool = False
    all_names: list[str] | None = None
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_self: bool) -> dict[str, Any]:
    """Parameters of a ``def`` as the introspecting generator writes them."""
    a = fn.args
    out: dict[str, Any] = {"positional": [], "keyword_only": [], "required": []}
    positional = [*a.posonlyargs, *a.args]
    defaults_from = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        if drop_self and i == 0 and arg.arg in ("self", "cls"):
            continue
        out["positional"].append(arg.arg)
        if i < defaults_from:
            out["required"].append(arg.arg)
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out["keyword_only"].append(arg.arg)
        if default is None:
            out["required"].append(arg.arg)
    pos_only = [arg.arg for i, arg in enumerate(a.posonlyargs)
                if not (drop_self and i == 0 and arg.arg in ("self", "cls"))]
    if pos_only:
        out["positional_only"] = pos_only
    if a.vararg is not None:
        out["var_positional"] = True
    if a.kwarg is not None:
        out["var_keyword"] = True
    if fn.returns is not None:
        out["returns"] = return_kind(ast.unparse(fn.returns))
    return {k: v for k, v in out.items() if v not in ([], None)}


def _decorators(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            names.add(target.attr)
    return names


class Reader:
    """The modules of one ``python/pypto`` tree and the names each binds."""

    def __init__(self, root: Path) -> None:
        self.modules: dict[str, _Module] = {}
        self.dynamic_all: list[str] = []
        for path in sorted(root.rglob("*.py*")):
            if path.suffix not in (".py", ".pyi"):
                continue
            rel = path.relative_to(root.parent).with_suffix("")
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            if name in self.modules and path.suffix == ".pyi":
                continue  # a .py beats its stub
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            self.modules[name] = _Module(name, tree, is_package)

    # --- resolution --------------------------------------------------------------------------
    def _absolute(self, here: _Module, module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        base = here.name.split(".")
        if not here.is_package:
            base = base[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    def lookup(self, module: str, name: str, depth: int = 0) -> Any:
        """The entry ``module.name`` resolves to (a submodule, a binding), or None (outside pypto, unknown)."""
        if depth > 50:
            return None
        sub = f"{module}.{name}"
        mod = self.modules.get(module)
        bound = self.bindings(mod).get(name) if mod is not None else None
        if bound is None and sub in self.modules:
            return {"kind": "module", "module": sub}
        return self.deref(bound, depth + 1)

    def deref(self, value: Any, depth: int = 0) -> Any:
        while isinstance(value, tuple) and value and value[0] == "ref":
            if depth > 50:
                return None
            value = self.lookup(value[1], value[2], depth + 1)
            depth += 1
        return value

    def public_names(self, mod: _Module) -> list[str]:
        bindings = self.bindings(mod)
        if mod.all_names is not None:
            return mod.all_names
        return [n for n in bindings if not n.startswith("_")]

    def bindings(self, mod: _Module) -> dict[str, Any]:
        if mod.bindings is not None:
            return mod.bindings
        if mod.busy:  # an import cycle: what is bound so far
            return {}
        mod.busy = True
        out: dict[str, Any] = {}
        if mod.is_package:
            prefix = mod.name + "."
            for other in self.modules:
                if other.startswith(prefix) and "." not in other[len(prefix):]:
                    out[other[len(prefix):]] = {"kind": "module", "module": other}
        self._statements(mod, mod.tree.body, out)
        mod.bindings = out
        mod.busy = False
        return out

    def _statements(self, mod: _Module, body: list[ast.stmt], out: dict[str, Any]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                entry = {"kind": "function", **_signature(node, drop_self=False)}
                if entry.get("var_keyword"):
                    keys = kwargs_names_ast(node, lambda name, seen, m=mod: self._callee_keys(m, name, seen))
                    if keys is not None:
                        entry["var_keyword_names"] = keys
                out[node.name] = entry
            elif isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
                out[node.name] = self._class(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is None:
                    continue
                for target in targets:
                    if isinstance(target, ast.Name):
                        if target.id == "__all__":
                            mod.all_names = self._literal_all(mod, node.value)
                        else:
                            out[target.id] = self._value(mod, node.value, out)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
                extra = self._literal_all(mod, node.value)
                if mod.all_names is not None and extra is not None:
                    mod.all_names = mod.all_names + extra
                else:
                    mod.all_names = None
                    self.dynamic_all.append(mod.name)
            elif isinstance(node, ast.ImportFrom):
                source = self._absolute(mod, node.module, node.level)
                if source.split(".")[0] != "pypto":
                    for alias in node.names:  # typing, torch ...: not pypto's own names (a star import re-exports them)
                        if alias.name != "*":
                            out[alias.asname or alias.name] = _EXTERNAL
                    continue
                for alias in node.names:
                    if f"{source}.{alias.name}" in self.modules and alias.name != "*" and (
                            source not in self.modules or alias.name not in self._defined(self.modules[source])):
                        out[alias.asname or alias.name] = {"kind": "module", "module": f"{source}.{alias.name}"}
                    elif alias.name == "*":
                        other = self.modules.get(source)
                        if other is not None:
                            for name in self.public_names(other):
                                out[name] = ("ref", source, name)
                    else:
                        out[alias.asname or alias.name] = ("ref", source, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in self.modules:
                        out[alias.asname] = {"kind": "module", "module": alias.name}
                    elif alias.name.split(".")[0] != "pypto":
                        out[alias.asname or alias.name.split(".")[0]] = _EXTERNAL
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out.pop(target.id, None)
            elif isinstance(node, ast.If):
                self._statements(mod, node.body, out)
                self._statements(mod, node.orelse, out)
            elif isinstance(node, ast.Try):
                self._statements(mod, node.body, out)
                for handler in node.handlers:
                    self._statements(mod, handler.body, out)
                self._statements(mod, node.orelse, out)
                self._statements(mod, node.finalbody, out)
            elif isinstance(node, ast.With):
                self._statements(mod, node.body, out)

    def _defined(self, mod: _Module) -> set[str]:
        """Names a module binds by def / class / assignment at its top level (without following imports)."""
        names = set()
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return names

    def _literal_all(self, mod: _Module, value: ast.expr) -> list[str] | None:
        if isinstance(value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
            return [e.value for e in value.elts]
        self.dynamic_all.append(mod.name)
        return None

    def _callee_keys(self, mod: _Module, name: str, seen: frozenset[str]) -> list[str] | None:
        if name in seen:
            return None
        fn = next((n for n in mod.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and n.name == name), None)
        if fn is None:
            return None
        return kwargs_names_ast(fn, lambda inner, s: self._callee_keys(mod, inner, s), seen | {name})

    def _value(self, mod: _Module, value: ast.expr, out: dict[str, Any]) -> Any:
        """The entry an assigned value gives: an alias (``jit = frontend.jit``), else a constant."""
        parts: list[str] = []
        node = value
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            parts.reverse()
            head = out.get(parts[0])
            entry = self.deref(head)
            for part in parts[1:]:
                if isinstance(entry, dict) and entry.get("kind") == "module":
                    entry = self.lookup(entry["module"], part)
                elif isinstance(entry, dict) and entry.get("kind") == "enum" and part in entry.get("members", []):
                    return {"kind": "constant", "type": parts[-2]}
                else:
                    entry = None
                    break
            if isinstance(entry, dict):
                return entry
        return {"kind": "constant"}

    def _class(self, node: ast.ClassDef) -> dict[str, Any]:
        bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                 for b in node.bases}
        if bases & set(_ENUM_BASES):
            members = sorted({t.id for s in node.body if isinstance(s, ast.Assign) for t in s.targets
                              if isinstance(t, ast.Name) and not t.id.startswith("_")})
            return {"kind": "enum", "members": members}
        init = next((s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == "__init__"), None)
        entry: dict[str, Any] = {"kind": "class"}
        if init is not None:
            sig = _signature(init, drop_self=True)
            sig.pop("returns", None)
            entry.update(sig)
        else:
            entry["signature"] = "unknown"
        if node.name in VALUE_CLASSES:
            entry["members_in"] = "value_classes"
        return entry

    def class_members(self, module: str, name: str) -> dict[str, Any]:
        """Public methods and properties of class ``module.name`` (its own body)."""
        mod = self.modules.get(module)
        if mod is None:
            return {}
        self.bindings(mod)
        node = mod.classes.get(name)
        if node is None:
            return {}
        out: dict[str, Any] = {}
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not stmt.name.startswith("_"):
                decos = _decorators(stmt)
                if "setter" in decos or "deleter" in decos:
                    continue
                if "property" in decos or "cached_property" in decos:
                    out[stmt.name] = {"kind": "property"}
                elif "staticmethod" in decos:
                    out[stmt.name] = {"kind": "staticmethod", **_signature(stmt, drop_self=False)}
                elif "classmethod" in decos:
                    out[stmt.name] = {"kind": "classmethod", **_signature(stmt, drop_self=True)}
                else:
                    out[stmt.name] = {"kind": "method", **_signature(stmt, drop_self=True)}
        return dict(sorted(out.items()))

    def class_home(self, module: str, name: str) -> tuple[str, str] | None:
        """(module, class name) where ``module.name`` is defined."""
        value: Any = ("ref", module, name)
        for _ in range(50):
            if not (isinstance(value, tuple) and value[0] == "ref"):
                break
            mod = self.modules.get(value[1])
            if mod is None:
                return None
            bound = self.bindings(mod).get(value[2])
            if isinstance(bound, dict) and value[2] in mod.classes:
                return value[1], value[2]
            value = bound
        return None

    def surface(self, module: str) -> dict[str, Any]:
        mod = self.modules[module]
        out: dict[str, Any] = {}
        for name in sorted(self.bindings(mod)):
            if name.startswith("_"):
                continue
            entry = self.deref(self.bindings(mod)[name])
            if isinstance(entry, dict):
                out[name] = entry
        return out


def _extract(git_dir: Path, commit: str, into: Path) -> tuple[str, str]:
    """``python/pypto`` of ``commit`` into ``into``; (full commit hash, commit date)."""
    full = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", f"{commit}^{{commit}}"],
                          check=True, capture_output=True, text=True).stdout.strip()
    date = subprocess.run(["git", "--git-dir", str(git_dir), "log", "-1", "--format=%cs", full],
                          check=True, capture_output=True, text=True).stdout.strip()
    archive = into / "src.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "--git-dir", str(git_dir), "archive", full, "python/pypto"], check=True, stdout=fh)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return full, date


def build_manifest(root: Path, commit: str, date: str) -> tuple[dict[str, Any], Reader]:
    reader = Reader(root)
    modules = {name: reader.surface(name) for name in MODULES if name in reader.modules}
    value_classes: dict[str, Any] = {}
    for cls in VALUE_CLASSES:
        home = reader.class_home("pypto", cls)
        if home is not None:
            value_classes[cls] = reader.class_members(*home)
    manifest = {"release": f"commit {commit[:9]}", "commit": commit, "commit_date": date,
                "generated_with": {"method": "static ast reading of python/pypto/** and pypto_impl .pyi stubs"},
                "modules": modules, "value_classes": value_classes}
    return manifest, reader


def _compare(static: dict[str, Any], introspected: Path) -> None:
    """Print the names the wheel manifest has and the static reading does not (what static reading misses)."""
    wheel = yaml.safe_load(introspected.read_text(encoding="utf-8"))
    for module, names in wheel["modules"].items():
        mine = static["modules"].get(module, {})
        missed = sorted(set(names) - set(mine))
        extra = sorted(set(mine) - set(names))
        print(f"{module}: wheel {len(names)}, static {len(mine)}; missed {len(missed)} {missed[:30]}; "
              f"extra {len(extra)} {extra[:30]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", type=Path, required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path, help="an introspected manifest to compare the static one with")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        full, date = _extract(args.git_dir, args.commit, Path(tmp))
        manifest, reader = build_manifest(Path(tmp) / "python" / "pypto", full, date)
    if args.compare:
        _compare(manifest, args.compare)
    if reader.dynamic_all:
        print(f"computed __all__ (all public names taken): {sorted(set(reader.dynamic_all))}")
    out = args.out or Path(__file__).resolve().parent.parent / "constraints" / f"pypto_api_{full[:9]}.yaml"
    if not args.compare or args.out:
        text = HEADER + yaml.safe_dump(manifest, sort_keys=True, default_flow_style=None, width=100)
        out.write_text(text, encoding="utf-8")
        counts = {m: len(v) for m, v in manifest["modules"].items()}
        print(f"wrote {out} (commit {full[:9]} of {date}; names per module {counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
