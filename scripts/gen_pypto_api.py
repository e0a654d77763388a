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
# returns = the kind of value the return annotation names (tensor, scalar, none, dict,
# list, tuple, bool, int, float, str, iterator, object); absent: not annotated.
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


def _signature(obj: Any, drop_self: bool = False) -> dict[str, Any]:
    """Parameters of a callable, grouped by kind, or ``signature: unknown``.

    ``drop_self``: leave out a first parameter named ``self`` (a method of a value class, called on an
    instance). A module function keeps it: ``pypto.hypot(self, other)`` takes ``self`` by position or
    keyword like any other parameter (dropping it shifted every later name by one).

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
    for i, p in enumerate(sig.parameters.values()):
        if drop_self and i == 0 and p.name == "self":
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
    if sig.return_annotation is not inspect.Signature.empty:
        out["returns"] = return_kind(_annotation_text(sig.return_annotation))
    return {k: v for k, v in out.items() if v not in ([], None)}


def _annotation_text(annotation: Any) -> str:
    """An annotation as source-like text (``Tensor``, ``Dict[str, int]``, ``None``)."""
    if isinstance(annotation, str):
        return annotation
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


#: what a callable returns, by the outer name of its return annotation (the last dotted part)
_RETURN_KINDS = {"Tensor": "tensor", "SymbolicScalar": "scalar", "None": "none", "NoneType": "none",
                 "dict": "dict", "Dict": "dict", "Mapping": "dict", "list": "list", "List": "list",
                 "tuple": "tuple", "Tuple": "tuple", "Sequence": "list", "bool": "bool", "int": "int",
                 "float": "float", "str": "str", "Iterator": "iterator", "Generator": "iterator",
                 "Iterable": "iterator"}


def return_kind(text: str) -> str:
    """The kind of value a return annotation names: ``tensor``, ``scalar``, ``none``, ``dict``, ``list``,
    ``tuple``, ``bool``, ``int``, ``float``, ``str``, ``iterator`` or ``object`` (anything else: a class
    instance). ``Optional[X]`` / ``X | None`` is X's kind; ``Union`` of different kinds is ``object``.
    A linter types a ``pypto.*`` call's result as a tensor only when this says ``tensor``."""
    text = text.strip().strip("'\"")
    if text.startswith("Optional[") and text.endswith("]"):
        return return_kind(text[len("Optional["):-1])
    if text.startswith("Union[") and text.endswith("]"):
        kinds = {return_kind(part) for part in _top_level_split(text[len("Union["):-1])} - {"none"}
        return kinds.pop() if len(kinds) == 1 else "object"
    parts = _top_level_split(text, "|")
    if len(parts) > 1:
        kinds = {return_kind(part) for part in parts} - {"none"}
        return kinds.pop() if len(kinds) == 1 else "object"
    outer = text.split("[", 1)[0].strip().rpartition(".")[2]
    return _RETURN_KINDS.get(outer, "object")


def _top_level_split(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _kwargs_names(obj: Any, seen: frozenset[str] = frozenset()) -> list[str] | None:
    """The keys a ``**kwargs`` callable reads, from its source, or None when that is not closed
    (:func:`kwargs_names_ast` on the callable's source; callees looked up in its module)."""
    try:
        source = textwrap.dedent(inspect.getsource(obj))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return None
    module = sys.modules.get(getattr(obj, "__module__", ""), None)

    def callee_keys(name: str, seen_now: frozenset[str]) -> list[str] | None:
        callee = getattr(module, name, None)
        qual = getattr(callee, "__qualname__", "")
        return _kwargs_names(callee, seen_now | {qual}) if callee is not None and qual not in seen_now else None

    return kwargs_names_ast(fn, callee_keys, seen)


def kwargs_names_ast(fn: ast.FunctionDef | ast.AsyncFunctionDef,
                     callee_keys: Any, seen: frozenset[str] = frozenset()) -> list[str] | None:
    """The keys the ``**kwargs`` of function node ``fn`` reads, or None when that is not closed.

    Closed means every use of the ``**kwargs`` name is ``kwargs.get("k", ...)``, ``kwargs.pop("k", ...)``,
    ``kwargs["k"]`` (read or write) or ``"k" in kwargs``, or ``**kwargs`` passed on to a module function
    whose own keys are closed (``loop_unroll`` forwards to ``loop``; ``callee_keys(name, seen)`` gives
    them). ``pypto.loop`` reads its options with ``kwargs.get``, so a misspelt ``unroll_List=`` is
    silently ignored: the list lets a linter say so.
    """
    if fn.args.kwarg is None:
        return None
    kw = fn.args.kwarg.arg
    names: set[str] = set()
    allowed: set[int] = set()
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
                    inner = callee_keys(node.func.id, seen) if isinstance(node.func, ast.Name) else None
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
            out[name] = {"kind": "method", **_signature(value, drop_self=True)}
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
        entry.pop("returns", None)  # calling a class gives an instance of it, whatever __init__ says
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
