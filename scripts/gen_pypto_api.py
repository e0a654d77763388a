"""Write constraints/pypto_api.yaml: the public API surface of the installed PyPTO.

Run with the python of an environment that has pypto (and torch, sympy)::

    /work/venv-pypto/bin/python scripts/gen_pypto_api.py [--out constraints/pypto_api.yaml]

The manifest is introspected, never hand-written: every public name (no
leading underscore) of ``pypto``, ``pypto.experimental`` and ``pypto.frontend``,
with its kind (function, class, enum, constant, module) and, for callables,
the parameter names and kinds as ``inspect.signature`` reports them, so a linter
can tell an unknown keyword (error unless the callable takes ``**kwargs``) from
a valid one. Enums list their members; the classes kernels use on values
(``Tensor``, ``SymbolicScalar``, ``Element``) list their public methods and
properties. Names that a pypto module merely re-exports from the standard
library or torch (``List``, ``Optional``, ``sys``, ``torch`` ...) are left out.
Output is deterministic: sorted keys, ``yaml.safe_dump``.
"""

from __future__ import annotations

import argparse
import ast
import enum
import inspect
import sys
import textwrap
import types
from importlib import import_module, metadata
from pathlib import Path
from typing import Any

import yaml

MODULES = ("pypto", "pypto.experimental", "pypto.frontend")
VALUE_CLASSES = ("Tensor", "SymbolicScalar", "Element")
HEADER = """\
# PyPTO public API manifest -- GENERATED, do not edit by hand.
# Source: introspection of the installed pypto package (dir(), inspect.signature).
# Regenerate: <venv-with-pypto>/bin/python scripts/gen_pypto_api.py
#   (e.g. /work/venv-pypto/bin/python scripts/gen_pypto_api.py --out constraints/pypto_api.yaml)
# Callables: positional = names passable by position (in order), keyword_only =
# names after '*', required = names without default, var_positional / var_keyword
# = takes *args / **kwargs (with var_keyword an unknown keyword is not by itself
# an error; without it, it is). Any positional name may also be given by keyword
# unless listed in positional_only. var_keyword_names = the only keys a **kwargs
# callable reads (from its source: kwargs.get/pop/[...] and **kwargs forwarded to
# a pypto function with such a list); any other keyword is silently ignored.
# Value classes (Tensor, SymbolicScalar, Element) list their methods/properties
# under value_classes.
"""


def _is_pypto_object(obj: Any) -> bool:
    """True when ``obj`` is defined inside pypto (Python sources or the pypto_impl extension)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__.startswith("pypto")
    mod = getattr(obj, "__module__", None)
    if mod is None:
        mod = getattr(type(obj), "__module__", "") or ""
    return str(mod).startswith("pypto")


def _signature(obj: Any) -> dict[str, Any]:
    """Parameters of a callable, grouped by kind, or ``signature: unknown``.

    ``positional``: names that may be passed by position (positional-only ones
    are also listed in ``positional_only``); ``keyword_only``: names after ``*``;
    ``required``: names without a default; ``var_positional`` / ``var_keyword``:
    the callable takes ``*args`` / ``**kwargs``.
    """
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return {"signature": "unknown"}
    out: dict[str, Any] = {"positional": [], "keyword_only": [], "required": []}
    pos_only: list[str] = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            out["var_positional"] = True
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            out["var_keyword"] = True
            continue
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            out["keyword_only"].append(p.name)
        else:
            out["positional"].append(p.name)
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                pos_only.append(p.name)
        if p.default is inspect.Parameter.empty:
            out["required"].append(p.name)
    if pos_only:
        out["positional_only"] = pos_only
    return {k: v for k, v in out.items() if v not in ([], None)}


def _kwargs_names(obj: Any, seen: frozenset[str] = frozenset()) -> list[str] | None:
    """The keys a ``**kwargs`` callable reads, from its source, or None when that is not closed.

    Closed means every use of the ``**kwargs`` name is ``kwargs.get("k", ...)``, ``kwargs.pop("k", ...)``,
    ``kwargs["k"]`` (read or write) or ``"k" in kwargs``, or ``**kwargs`` passed on to a module function
    whose own keys are closed (``loop_unroll`` forwards to ``loop``). ``pypto.loop`` reads its options
    with ``kwargs.get``, so a misspelt ``unroll_List=`` is silently ignored: the list lets a linter say so.
    """
    try:
        source = textwrap.dedent(inspect.getsource(obj))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None or fn.args.kwarg is None:
        return None
    kw = fn.args.kwarg.arg
    names: set[str] = set()
    allowed: set[int] = set()
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == kw:
            key = node.args[0] if node.args else None
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            names.add(key.value)
            allowed.add(id(node.func.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == kw:
            if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
                return None
            names.add(node.slice.value)
            allowed.add(id(node.value))
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and len(node.comparators) == 1 \
                and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id == kw:
            names.add(str(node.left.value))
            allowed.add(id(node.comparators[0]))
        elif isinstance(node, ast.Call):
            for k in node.keywords:
                if k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kw:
                    callee = getattr(module, node.func.id, None) if isinstance(node.func, ast.Name) else None
                    name = getattr(callee, "__qualname__", "")
                    inner = _kwargs_names(callee, seen | {name}) if callee is not None and name not in seen else None
                    if inner is None:
                        return None
                    names.update(inner)
                    allowed.add(id(k.value))
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == kw and id(node) not in allowed:
            return None  # another use (passed as a dict, iterated ...): not closed
    return sorted(names)


def _enum_members(cls: type) -> list[str] | None:
    """Member names of a Python or pybind11 enum, else None."""
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return sorted(cls.__members__)
    members = getattr(cls, "__members__", None)
    if isinstance(members, dict) and members:
        return sorted(str(k) for k in members)
    return None


def _class_members(cls: type) -> dict[str, Any]:
    """Public methods and properties of a class (its own MRO, excluding ``object``)."""
    out: dict[str, Any] = {}
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, property) or type(raw).__name__ in ("property", "getset_descriptor"):
            out[name] = {"kind": "property"}
            continue
        value = getattr(cls, name)
        if isinstance(raw, staticmethod):
            out[name] = {"kind": "staticmethod", **_signature(value)}
        elif isinstance(raw, classmethod):
            out[name] = {"kind": "classmethod", **_signature(value)}
        elif callable(value):
            out[name] = {"kind": "method", **_signature(value)}
        else:
            out[name] = {"kind": "attribute", "type": type(value).__name__}
    return out


def describe(name: str, obj: Any) -> dict[str, Any] | None:
    """One manifest entry, or None for names re-exported from outside pypto."""
    if isinstance(obj, types.ModuleType):
        return {"kind": "module", "module": obj.__name__} if _is_pypto_object(obj) else None
    if inspect.isclass(obj):
        if not _is_pypto_object(obj):
            return None
        members = _enum_members(obj)
        if members is not None:
            return {"kind": "enum", "members": members}
        entry: dict[str, Any] = {"kind": "class", **_signature(obj)}
        if name in VALUE_CLASSES:
            entry["members_in"] = "value_classes"
        return entry
    if callable(obj):
        if not _is_pypto_object(obj) and not inspect.isbuiltin(obj):
            return None
        if inspect.isbuiltin(obj) and not _is_pypto_object(obj):
            return None
        entry = {"kind": "function", **_signature(obj)}
        if entry.get("var_keyword"):
            keys = _kwargs_names(obj)
            if keys is not None:
                entry["var_keyword_names"] = keys
        return entry
    if _is_pypto_object(obj) or type(obj).__module__.startswith("pypto"):
        text = repr(obj)
        if " object at 0x" in text:  # default repr: the address changes every run
            return {"kind": "instance", "type": type(obj).__name__,
                    "members": sorted(n for n in dir(obj) if not n.startswith("_"))}
        return {"kind": "constant", "type": type(obj).__name__, "value": str(obj)}
    return None


def module_surface(module_name: str) -> dict[str, Any]:
    """Manifest entries for every public name of ``module_name``."""
    module = import_module(module_name)
    out: dict[str, Any] = {}
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        entry = describe(name, getattr(module, name))
        if entry is not None:
            out[name] = entry
    return out


def build_manifest() -> dict[str, Any]:
    """The whole manifest as plain data."""
    import torch  # pypto wants torch imported first (C++ ABI)

    pypto = import_module("pypto")
    modules = {name: module_surface(name) for name in MODULES}
    value_classes = {
        cls: _class_members(getattr(pypto, cls)) for cls in VALUE_CLASSES if hasattr(pypto, cls)
    }
    return {
        "release": metadata.version("pypto"),
        "generated_with": {
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "torch": str(torch.__version__),
        },
        "modules": modules,
        "value_classes": value_classes,
    }


def main(argv: list[str] | None = None) -> int:
    """Generate the manifest file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = Path(__file__).resolve().parent.parent / "constraints" / "pypto_api.yaml"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args(argv)
    manifest = build_manifest()
    text = HEADER + yaml.safe_dump(manifest, sort_keys=True, default_flow_style=None, width=100)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    counts = {m: len(v) for m, v in manifest["modules"].items()}
    print(f"wrote {args.out} (pypto {manifest['release']}; names per module {counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
