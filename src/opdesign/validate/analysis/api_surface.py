"""Check PyPTO kernel code against the API surface of the pinned release, without PyPTO.

The surface is ``constraints/pypto_api.yaml`` (generated from an installed
release by ``scripts/gen_pypto_api.py``); the forms known to be wrong, with
their real replacement, are in the hand-written ``constraints/pypto_api_notes.yaml``.

:func:`check_tree` walks a parsed module (a DESIGN.md kernel block or a kernel
``.py``) and reports, with line numbers:

- ``name``: a ``pypto.*`` name the release does not have (``pypto.sg_set_scope``);
- ``later``: a name, keyword or method the target release lacks but a later manifest has
  (``pypto.atomic_add``, ``div(precision_type=)``: "not in PyPTO 0.2.0 (added later ...)"); all of
  one line are one finding, so one cause (``PrecisionType`` and ``precision_type=`` on one call) is
  reported once. Targeting the later commit (``--target-pypto``) checks against its manifest;
- ``keyword``: a keyword a pypto function does not take, or too many positional
  arguments (functions with ``**kwargs`` / ``*args`` accept anything there, except a
  ``**kwargs`` whose read keys the manifest lists: ``pypto.loop(..., unroll_List=[4])`` is
  silently ignored by the release, so it is reported);
- ``method``: a method a PyPTO tensor or symbolic scalar does not have
  (``t.to_scalar()``, ``t.max(0)``); ``.min()`` / ``.max()`` on a symbolic scalar are legal;
- ``rank``: ``view`` / ``assemble`` offsets (or a ``valid_shape``) whose length is
  not the rank of the tensor they index, when that rank is known from the kernel
  signature, ``pypto.tensor``, ``view`` or ``reshape``.

Values are typed by a small flow-insensitive pass per function: annotated
``pypto.Tensor((...), ...)`` parameters and pypto op results are tensors when the manifest's
``returns`` says so or does not say (``pypto.get_debug_options()`` returns a dict: not a tensor) (with
a rank where it is known), loop indices, tensor indexing and ``.shape[i]`` are
symbolic scalars. Untyped values (torch tensors of a host harness) are not checked.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opdesign.catalog.pypto_api import ApiSurface, later_surfaces, load_api_surface
from opdesign.validate.analysis import astnodes

TENSOR, SCALAR = "Tensor", "SymbolicScalar"


__all__ = ["ApiHit", "ApiSurface", "check_source", "check_tree", "load_api_surface"]


@dataclass(frozen=True)
class ApiHit:
    line: int
    kind: str  # name | keyword | method | rank | later
    message: str


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


#: return kinds (the manifest's ``returns``) that are not tensors and not symbolic scalars
_NOT_VALUES = frozenset({"none", "dict", "list", "tuple", "bool", "int", "float", "str", "iterator", "object"})


class _Checker:
    def __init__(self, api: ApiSurface, later: list[ApiSurface] | None = None) -> None:
        self.api = api
        self._later = later  # loaded on the first name the target lacks (a clean kernel never reads them)
        self.added: dict[int, list[tuple[str, str]]] = {}  # line -> (what, in which later manifest)
        self.aliases: dict[str, str] = {}  # local name -> dotted pypto path
        self.hits: list[ApiHit] = []
        self.types: dict[str, tuple[str, int | None]] = {}

    # --- names -------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        """``pypto.x.y`` for an expression naming a pypto object (through import aliases)."""
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])

    def check_name(self, node: ast.AST, dotted: str) -> None:
        """Report the first part of ``dotted`` the release does not have. A submodule the manifest does
        not expand is checked against the top-level ``pypto`` when pypto re-exports all of its names
        (``reexported_at_top``: ``pypto.op``, ``pypto.op.math`` ...); other submodules are not checked."""
        parts = dotted.split(".")
        module = parts[0]
        for i, part in enumerate(parts[1:], start=1):
            names = self.api.modules.get(module)
            if names is None and module in self.api.reexported_at_top:
                names = self.api.modules.get(parts[0])
            if names is None:
                return  # a submodule outside the checked surface
            if part.startswith("_"):
                return  # the manifests list public names only: pypto._controller exists, unlisted
            entry = names.get(part)
            here = ".".join(parts[:i + 1])
            if entry is None and self.added_later(node.lineno, here,
                                                  lambda s, m=module, p=part: s.modules.get(m, {}).get(p) is not None
                                                  or s.entry(f"{parts[0]}.{p}") is not None
                                                  and m in self.api.reexported_at_top):
                return
            if entry is None:
                hint = self.api.missing.get(here)
                self.hits.append(ApiHit(node.lineno, "name", f"{here} does not exist in PyPTO {self.api.release}"
                                        + (f": {hint}" if hint else "")))
                return
            if entry.get("kind") == "module":
                module = here
                continue
            if entry.get("kind") == "enum" and i + 1 < len(parts) and parts[i + 1] not in entry.get("members", []):
                member = parts[i + 1]
                if self.added_later(node.lineno, f"{here}.{member}", lambda s, m=module, p=part, e=member:
                                    e in ((s.modules.get(m, {}).get(p) or {}).get("members") or [])):
                    return
                self.hits.append(ApiHit(node.lineno, "name", f"{here} has no member {parts[i + 1]!r} in PyPTO "
                                        f"{self.api.release} (members: {', '.join(entry['members'])})"))
            return

    @property
    def later(self) -> list[ApiSurface]:
        """The manifests newer than the target (:func:`later_surfaces`)."""
        if self._later is None:
            self._later = later_surfaces(self.api)
        return self._later

    def added_later(self, line: int, what: str, present: Any) -> bool:
        """True (and noted for one finding per line) when a later manifest has ``what`` (``present(s)``)."""
        for surface in self.later:
            if present(surface):
                self.added.setdefault(line, []).append((what, surface.label))
                return True
        return False

    # --- calls -------------------------------------------------------------------------------
    def check_args(self, call: ast.Call, what: str, entry: dict[str, Any], later: Any = None) -> None:
        """``later(surface)``: the entry of the same callable in another manifest (None: not looked up)."""
        if entry.get("signature") == "unknown":
            return  # the manifest could not read its parameters (a C++ callable without a stub)
        allowed = set(entry.get("positional", [])) | set(entry.get("keyword_only", []))
        # a **kwargs callable that reads only known keys (pypto.loop: kwargs.get) ignores any other one
        read = entry.get("var_keyword_names")
        allowed |= set(read or [])
        if not entry.get("var_keyword") or read is not None:
            for kw in call.keywords:
                if kw.arg is not None and kw.arg not in allowed:
                    if later is not None and self.added_later(
                            kw.value.lineno, f"{what}({kw.arg}=)", lambda s, k=kw.arg: k in _keywords(later(s))):
                        continue
                    self.hits.append(ApiHit(kw.value.lineno, "keyword", f"{what}() takes no keyword {kw.arg!r} "
                                            f"in PyPTO {self.api.release} (it takes: {', '.join(sorted(allowed))})"))
        positional = entry.get("positional", [])
        if not entry.get("var_positional") and len(call.args) > len(positional) \
                and not any(isinstance(a, ast.Starred) for a in call.args):
            self.hits.append(ApiHit(call.lineno, "keyword", f"{what}() takes at most {len(positional)} positional "
                                    f"arguments in PyPTO {self.api.release}, got {len(call.args)}"))

    def rank_of(self, node: ast.AST) -> int | None:
        kind = self.type_of(node)
        return kind[1] if kind and kind[0] == TENSOR else None

    def check_rank(self, call: ast.Call, op: str, tensor: ast.AST | None, offsets: ast.AST | None,
                   shape: ast.AST | None) -> None:
        rank = self.rank_of(tensor) if tensor is not None else None
        if rank is not None and isinstance(offsets, (ast.List, ast.Tuple)) and len(offsets.elts) != rank:
            self.hits.append(ApiHit(call.lineno, "rank", f"{op} offsets have {len(offsets.elts)} entries but the "
                                    f"tensor has rank {rank}: offsets need the tensor's rank (reshape to 2-D "
                                    "first, as real kernels do)"))
        valid = next((kw.value for kw in call.keywords if kw.arg == "valid_shape"), None)
        if isinstance(shape, (ast.List, ast.Tuple)) and isinstance(valid, (ast.List, ast.Tuple)) \
                and len(valid.elts) != len(shape.elts):
            self.hits.append(ApiHit(call.lineno, "rank", f"{op} valid_shape has {len(valid.elts)} entries for a "
                                    f"{len(shape.elts)}-D shape"))

    def check_call(self, call: ast.Call) -> None:
        dotted = self.resolve(call.func)
        if dotted is not None:
            entry = self.api.entry(dotted)
            if entry is not None and entry.get("kind") in ("function", "class"):
                self.check_args(call, dotted, entry, lambda s, d=dotted: s.entry(d))
            name = dotted.rpartition(".")[2]
            args = call.args
            if name == "view" and args:
                self.check_rank(call, dotted, args[0], args[2] if len(args) > 2 else None,
                                args[1] if len(args) > 1 else None)
            elif name == "assemble" and len(args) >= 3:
                self.check_rank(call, dotted, args[2], args[1], None)
            return
        if isinstance(call.func, ast.Attribute):
            owner = self.type_of(call.func.value)
            if owner is None:
                return
            cls, method = owner[0], call.func.attr
            entry = self.api.value_classes.get(cls, {}).get(method)
            if entry is None and self.added_later(call.lineno, f"{cls}.{method}()", lambda s, c=cls, m=method:
                                                  m in s.value_classes.get(c, {})):
                return
            if entry is None:
                note = self.api.method_notes.get(method)
                self.hits.append(ApiHit(call.lineno, "method", f"a PyPTO {cls} has no method .{method}() in "
                                        f"{self.api.release}" + (f": {note}" if note else "")))
            elif entry.get("kind") == "method":
                self.check_args(call, f"{cls}.{method}", entry,
                                lambda s, c=cls, m=method: s.value_classes.get(c, {}).get(m))
                if cls == TENSOR and method == "view" and call.args:
                    self.check_rank(call, "Tensor.view", call.func.value,
                                    call.args[1] if len(call.args) > 1 else None, call.args[0])

    # --- types -------------------------------------------------------------------------------
    def type_of(self, node: ast.AST) -> tuple[str, int | None] | None:
        if isinstance(node, ast.Name):
            return self.types.get(node.id)
        if isinstance(node, ast.Subscript):
            base = self.type_of(node.value)
            if base and base[0] == TENSOR and not isinstance(node.slice, ast.Slice):
                return (SCALAR, None)  # indexing an int tensor gives a scalar
            if isinstance(node.value, ast.Attribute) and node.value.attr in ("shape", "valid_shape") \
                    and self.type_of(node.value.value):
                return (SCALAR, None)
            return None
        if isinstance(node, ast.BinOp):
            sides = [self.type_of(node.left), self.type_of(node.right)]
            return (SCALAR, None) if any(s and s[0] == SCALAR for s in sides) else None
        if isinstance(node, ast.Call):
            return self.result_type(node)
        return None

    def result_type(self, call: ast.Call) -> tuple[str, int | None] | None:
        dotted = self.resolve(call.func)
        if dotted is not None:
            short = dotted.partition(".")[2]
            if short in self.api.non_tensor or short.rpartition(".")[2].startswith(("set_", "is_")):
                return None
            entry = self.api.entry(dotted)
            if entry is None:
                return None  # not in the target's manifest (reported once as a name): its result is unknown
            if entry.get("kind") == "class":  # an instance of the class: a Tensor, a symbolic scalar, or other
                cls = short.rpartition(".")[2].lower().replace("_", "")
                if cls == "symbolicscalar":
                    return (SCALAR, None)
                if cls != "tensor":
                    return None
            returns = entry.get("returns")
            if returns in _NOT_VALUES:
                return None  # pypto.get_debug_options() is a dict, not a tensor
            if returns == "scalar":
                return (SCALAR, None)
            name = short.rpartition(".")[2]
            if name in ("view", "reshape") and len(call.args) > 1:
                shape = call.args[1]  # a shape held in a name (``reshape(k, k_2d_shape)``): rank not known here
                return (TENSOR, len(shape.elts) if isinstance(shape, (ast.List, ast.Tuple)) else None)
            if name in ("tensor", "full", "zeros") and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)):
                return (TENSOR, len(call.args[0].elts))
            first = self.rank_of(call.args[0]) if call.args else None
            return (TENSOR, first if name not in ("matmul", "index_select", "gather") else None)
        if isinstance(call.func, ast.Attribute):
            owner = self.type_of(call.func.value)
            if owner and owner[0] == SCALAR and call.func.attr in ("min", "max"):
                return (SCALAR, None)
            if owner and owner[0] == TENSOR:
                if (call.func.attr in ("view", "reshape") and call.args
                        and isinstance(call.args[0], (ast.List, ast.Tuple))):
                    return (TENSOR, len(call.args[0].elts))
                return (TENSOR, owner[1])
        return None

    def annotate(self, fn: ast.FunctionDef) -> None:
        for arg in fn.args.args + fn.args.kwonlyargs:
            ann = arg.annotation
            if isinstance(ann, ast.Call) and (self.resolve(ann.func) or "").endswith(".Tensor"):
                dims = ann.args[0] if ann.args else None
                # [...]: rank not given; []: the shape (and rank) comes from the runtime input
                known = isinstance(dims, (ast.Tuple, ast.List)) and bool(dims.elts) and not any(
                    isinstance(d, ast.Constant) and d.value is Ellipsis for d in dims.elts)
                self.types[arg.arg] = (TENSOR, len(dims.elts) if known else None)

    def bind(self, target: ast.AST, kind: tuple[str, int | None] | None) -> None:
        if isinstance(target, ast.Name):
            if kind is None:
                self.types.pop(target.id, None)
            else:
                self.types[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt, (SCALAR, None) if kind and kind[0] == SCALAR else None)

    def visit(self, tree: ast.AST) -> None:
        for node in _statements(tree):  # the imports first, in ast.walk order: the last binding of an alias wins
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "pypto" or a.name.startswith("pypto."):
                        self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else "pypto"
                        if "." in a.name:
                            self.check_name(node, a.name)  # import pypto.ir
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pypto":
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    if a.name != "*":
                        self.check_name(node, f"{node.module}.{a.name}")  # from pypto import reduce_sum
        module_types = self.types
        inner: set[int] = set()  # attributes that are the value of an attribute (``pypto.frontend`` of ``.jit``)
        stack = [tree]
        while stack:  # every node in source order (statements before the expressions after them)
            node = stack.pop()
            below = astnodes.children(node)
            if below:
                stack.extend(reversed(below))
            if isinstance(node, ast.expr):
                if isinstance(node, ast.Attribute):
                    if isinstance(node.value, ast.Attribute):
                        inner.add(id(node.value))
                    if id(node) not in inner:
                        dotted = self.resolve(node)
                        if dotted is not None:
                            self.check_name(node, dotted)
                elif isinstance(node, ast.Call):
                    self.check_call(node)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # each function types its own names: a torch helper's ``q`` is not the kernel's ``q``
                self.types = dict(module_types)
                self.annotate(node)
            elif isinstance(node, ast.Assign):
                kind = self.type_of(node.value)
                for target in node.targets:
                    self.bind(target, kind)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                looped = isinstance(node.iter, ast.Call) and (self.resolve(node.iter.func) or "").rpartition(".")[2] \
                    in ("loop", "loop_unroll")
                self.bind(node.target, (SCALAR, None) if looped else None)


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """``tree`` and the statements under it in ``ast.walk`` (breadth-first) order: a statement's parent is
    always a statement, a handler, a match case or the module, so the other nodes need no visit."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        todo.extend(child for child in astnodes.children(node) if isinstance(child, _BLOCKS))
        yield node


def _keywords(entry: dict[str, Any] | None) -> set[str]:
    """The keywords a manifest entry takes by name (none for a missing entry)."""
    if not entry:
        return set()
    return set(entry.get("positional", [])) | set(entry.get("keyword_only", [])) | set(
        entry.get("var_keyword_names") or [])


def check_tree(tree: ast.AST, api: ApiSurface | None = None) -> list[ApiHit]:
    """API findings of one parsed module, in line order, each reported once; what a later manifest has
    is one ``later`` finding per line, naming everything of that line."""
    checker = _Checker(api or load_api_surface())
    checker.visit(tree)
    for line, items in checker.added.items():
        whats = list(dict.fromkeys(what for what, _where in items))
        where = items[0][1]
        hints = list(dict.fromkeys(h for w in whats if (h := checker.api.missing.get(w.split("(")[0]))))
        checker.hits.append(ApiHit(line, "later", f"{', '.join(whats)}: not in PyPTO {checker.api.label} (added "
                                   f"later: in {where}); set --target-pypto (or target-pypto in the configuration) "
                                   "to the release the kernel is written for" + (f"; {hints[0]}" if hints else "")))
    seen: set[tuple[int, str, str]] = set()
    out = []
    for hit in sorted(checker.hits, key=lambda h: (h.line, h.kind, h.message)):
        key = (hit.line, hit.kind, hit.message)
        if key not in seen:
            seen.add(key)
            out.append(hit)
    return out


def check_source(text: str, api: ApiSurface | None = None) -> list[ApiHit]:
    """:func:`check_tree` on source text (raises SyntaxError when it does not parse)."""
    return check_tree(astnodes.parse(text), api)
