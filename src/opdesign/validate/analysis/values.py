"""Which values of a kernel are compile-time ints: the static / dynamic / unknown reading the
C-SYM-06, C-SYM-07, C-TILE-06 and SK-02-R5 rules use.

A value is

- ``static`` when it is known while the kernel is traced: an int literal, an UPPER_CASE name the code
  never binds (a module constant of the card notation: ``Q_TILE``), a name (of any case) every binding
  of which is static (``q_tile = 128``, ``c1_tile = [[128, 128], [128, 128], [128, 128]]``, ``s2_tile
  = 4 * q_tile``, a parameter default ``cmp_r=1`` or ``: int`` annotation, a tuple unpack of ints, the
  index of a Python ``range`` over a static bound, the unroll factor of ``pypto.loop_unroll``), an item
  of a static list, a ``.shape[i]`` of an axis the signature declares static (an int or
  ``pypto.STATIC``), or ``min`` / ``max`` / arithmetic of static values;
- ``dynamic`` when it can change per launch or per iteration: the index of a ``pypto.loop`` /
  ``loop_unroll``, an element read out of a tensor (``lengths[b]`` of a ``pypto.Tensor`` parameter
  or of a name the code never binds, or anything indexed by a dynamic value), a ``pypto.*`` call
  result (``pypto.symbolic_scalar``; ``pypto.min`` / ``pypto.max`` follow their arguments),
  a ``.shape[i]`` of an axis declared ``pypto.DYNAMIC`` (or a ``pypto.frontend.dynamic`` name), a
  name of the design's front-matter ``dynamic_axes`` (``batch``, ``seq_kv``) wherever it appears, a
  lower-case name the code never binds (the pseudocode's convention for a runtime length:
  ``kv_valid``, ``seq_kv``), a float, or anything computed from a dynamic value;
- ``unknown`` otherwise (the ``.shape[i]`` of a tensor whose signature says nothing about its axes
  or covers them with ``...``, a parameter without annotation or default: real kernels pass tile
  sizes such as ``topk`` as plain Python ints; a value returned by a non-``pypto`` call, an
  attribute such as ``tile_config.g_tile``). The
  rules report only dynamic values: PyPTO 0.2.0's ``Tensor.shape`` returns a Python int for a static
  axis and a ``SymbolicScalar`` only for a dynamic one (``pypto/tensor.py``, ``Tensor.shape``), so a
  shape-derived value without a signature to say which can be either.

Names are read per top-level function (a function reads the module's names it does not bind) and,
within one, flow-insensitively: a name bound twice is static only when both bindings are.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from opdesign.validate.parse.pseudocode import Node, Program, call_name, dotted, is_constant_name

STATIC, DYNAMIC, UNKNOWN = "static", "dynamic", "unknown"
_PURE_BUILTINS = frozenset({"min", "max", "int", "abs", "len"})
_UNSET = object()


def join(kinds: list[str]) -> str:
    """Dynamic wins, then unknown; static only when every part is static (no parts: static)."""
    if DYNAMIC in kinds:
        return DYNAMIC
    return UNKNOWN if UNKNOWN in kinds else STATIC


@dataclass
class Values:
    """The bindings of a program's names and the kind (:data:`STATIC` / :data:`DYNAMIC` /
    :data:`UNKNOWN`) of any expression in it."""

    bindings: dict[str, list[ast.expr | str]] = field(default_factory=dict)  # name -> exprs or fixed kinds
    dynamic_dims: set[str] = field(default_factory=set)  # pypto.frontend.dynamic(...) names, declared axes
    parent: Values | None = None  # a function's scope reads the module's names it does not bind itself
    _memo: dict[str, str] = field(default_factory=dict)

    def bind(self, name: str, value: ast.expr | str) -> None:
        self.bindings.setdefault(name, []).append(value)

    def lookup(self, name: str) -> list[ast.expr | str] | None:
        """The bindings of ``name`` in this scope, else in the enclosing one(s); None when unbound."""
        values = self.bindings.get(name)
        if values:
            return values
        return self.parent.lookup(name) if self.parent is not None else None

    def name_kind(self, name: str) -> str:
        if name in self.dynamic_dims:
            return DYNAMIC
        values = self.bindings.get(name)
        if not values and self.parent is not None:
            return self.parent.name_kind(name)
        if not values:
            return STATIC if is_constant_name(name) else DYNAMIC
        memo = self._memo.get(name, _UNSET)
        if memo is not _UNSET:
            return memo
        self._memo[name] = UNKNOWN  # a binding that refers to itself (``x = x + 1``) adds nothing
        kind = join([v if isinstance(v, str) else self.kind(v) for v in values])
        self._memo[name] = kind
        return kind

    def kind(self, expr: ast.AST | None) -> str:
        """The kind of an expression (see the module docstring)."""
        if expr is None:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, bool) or not isinstance(expr.value, (int, float)):
                return UNKNOWN
            return STATIC if isinstance(expr.value, int) else DYNAMIC
        if isinstance(expr, ast.Name):
            return self.name_kind(expr.id)
        if isinstance(expr, (ast.BinOp, ast.UnaryOp)):
            return join([self.kind(e) for e in _operands(expr)])
        if isinstance(expr, (ast.List, ast.Tuple)):
            return join([self.kind(e) for e in expr.elts])
        if isinstance(expr, ast.IfExp):
            return join([self.kind(expr.body), self.kind(expr.orelse)])
        if isinstance(expr, ast.Subscript):
            return self._subscript(expr)
        if isinstance(expr, ast.Attribute):
            return self._shape(expr.value, None) if expr.attr == "shape" else UNKNOWN
        if isinstance(expr, ast.Call):
            return self._call(expr)
        return UNKNOWN

    def _subscript(self, expr: ast.Subscript) -> str:
        base, index = expr.value, expr.slice
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            return self._shape(base.value, index)
        bound = self.lookup(base.id) if isinstance(base, ast.Name) else None
        if bound and all(isinstance(b, ast.Attribute) and b.attr == "shape" for b in bound):
            return join([self._shape(b.value, index) for b in bound])  # shape_k = k.shape; shape_k[3]
        if isinstance(base, ast.Name) and not bound and not is_constant_name(base.id):
            return DYNAMIC  # an element of a tensor the snippet never binds (``lengths[b]``)
        items = self._literal(base)
        if items is not None:
            position = self._int(index)
            if position is not None and -len(items) <= position < len(items):
                return self.kind(items[position])
            return join([self.kind(e) for e in items] + [self.kind(index)])
        if self.kind(index) == DYNAMIC:
            return DYNAMIC  # read at a runtime index (``kv_lens[b_idx]``): a runtime scalar
        kind = self.kind(base)
        # an element read out of a runtime tensor (``lengths[b]``) is a runtime scalar
        return DYNAMIC if kind == DYNAMIC else (STATIC if kind == STATIC and self.kind(index) == STATIC else UNKNOWN)

    def _literal(self, expr: ast.AST) -> list[ast.expr] | None:
        """The items of a list / tuple literal, or of a name bound once to one."""
        if isinstance(expr, (ast.List, ast.Tuple)):
            return list(expr.elts)
        if isinstance(expr, ast.Name):
            values = self.lookup(expr.id) or []
            if len(values) == 1 and isinstance(values[0], (ast.List, ast.Tuple)):
                return list(values[0].elts)
        return None

    @staticmethod
    def _int(expr: ast.AST) -> int | None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return expr.value
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant) \
                and isinstance(expr.operand.value, int):
            return -expr.operand.value
        return None

    def _shape(self, tensor: ast.AST, index: ast.AST | None) -> str:
        """``t.shape`` / ``t.shape[i]``: the declared axis of every binding of ``t`` (its parameter's
        ``pypto.Tensor([...])`` annotation, or the shape list of the ``reshape`` / ``view`` / ``tensor``
        that built it), else unknown."""
        bound = self.lookup(tensor.id) if isinstance(tensor, ast.Name) else None
        if not bound:
            return UNKNOWN
        kinds = []
        for value in bound:
            dims = self._dims(value)
            if dims is None:
                return UNKNOWN
            if dims and isinstance(dims[-1], ast.Constant) and dims[-1].value is Ellipsis:
                dims = dims[:-1] + [None] * 8  # ``[pypto.DYNAMIC, ...]``: the axes ``...`` covers are not declared
            position = self._int(index) if index is not None else None
            if index is not None and position is not None and -len(dims) <= position < len(dims):
                kinds.append(self._dim_kind(dims[position]))
            else:
                kinds.append(join([self._dim_kind(d) for d in dims]
                                  + ([self.kind(index)] if index is not None else [])))
        return join(kinds)

    def _dims(self, value: ast.expr | str) -> list[ast.expr] | None:
        if not isinstance(value, ast.Call):
            return None
        name = call_name(value)
        if name == "Tensor" and value.args:
            shape = value.args[0]
        elif name == "tensor" and value.args:
            shape = value.args[0]
        elif name in ("reshape", "view") and len(value.args) > 1:
            shape = value.args[1]
        else:
            return None
        return self._literal(shape)

    def _dim_kind(self, dim: ast.expr | None) -> str:
        if dim is None:
            return UNKNOWN
        name = dotted(dim)
        if name.endswith(".STATIC"):
            return STATIC
        if name.endswith(".DYNAMIC"):
            return DYNAMIC
        return self.kind(dim)

    def _call(self, call: ast.Call) -> str:
        name = dotted(call.func)
        args = [self.kind(a) for a in call.args]
        if call_name(call) == "Tensor":
            return DYNAMIC  # a tensor parameter (its annotation): its values are runtime data
        if name in _PURE_BUILTINS or name in ("pypto.min", "pypto.max"):
            return STATIC if name == "len" else join(args)
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("min", "max") and not name.startswith("pypto."):
            return join([self.kind(call.func.value)] + args)  # a symbolic scalar's .min() / .max()
        if name.startswith("pypto.") or name.split(".")[0] in ("pp",):
            return DYNAMIC
        return UNKNOWN


def _operands(expr: ast.BinOp | ast.UnaryOp) -> list[ast.expr]:
    """The leaves of an arithmetic chain (``a + b * -c``: a, b, c), collected with an explicit stack
    so a chain of hundreds of terms costs no recursion."""
    out, stack = [], [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.BinOp):
            stack += [e.right, e.left]
        elif isinstance(e, ast.UnaryOp):
            stack.append(e.operand)
        else:
            out.append(e)
    return out


def _bind_target(values: Values, target: ast.AST, value: ast.expr | str) -> None:
    if isinstance(target, ast.Name):
        values.bind(target.id, value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        items = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
        for i, elt in enumerate(target.elts):
            if items is not None:
                _bind_target(values, elt, items[i])
            elif isinstance(value, ast.Attribute) and value.attr == "shape":  # b, s, d = q.shape
                _bind_target(values, elt, ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load()))
            else:
                _bind_target(values, elt, value if isinstance(value, str) else UNKNOWN)
    # subscript / attribute targets bind no name


def _loop_target(values: Values, node: Node) -> None:
    stmt = node.stmt
    kind = node.loop_kind
    if kind == "loop_unroll" and isinstance(stmt.target, ast.Tuple) and len(stmt.target.elts) == 2:
        _bind_target(values, stmt.target.elts[0], DYNAMIC)
        _bind_target(values, stmt.target.elts[1], STATIC)  # the factor: fixed within its path (C-LOOP-05)
    elif kind in ("pypto.loop", "loop_unroll"):
        _bind_target(values, stmt.target, DYNAMIC)
    elif kind == "range":
        _bind_target(values, stmt.target, ast.Tuple(elts=list(stmt.iter.args), ctx=ast.Load()))
    else:
        _bind_target(values, stmt.target, UNKNOWN)


def _function(values: Values, node: Node) -> None:
    """Parameters: a ``pypto.Tensor(...)`` annotation makes a tensor (its elements are runtime values,
    its axes as declared); ``: int`` or an int default a compile-time int; any other parameter is
    unknown (real kernels pass tile sizes such as ``topk`` or ``win_size`` as plain Python ints). A
    parameter the function rebinds in its own body before any loop (``ratio = 4``) is that value."""
    args = node.stmt.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    rebound = {t.id for child in node.body if isinstance(child.stmt, ast.Assign)
               for t in child.stmt.targets if isinstance(t, ast.Name)}
    for arg, default in pairs:
        annotation = arg.annotation
        if annotation is not None and dotted(getattr(annotation, "func", annotation)).endswith("Tensor"):
            values.bind(arg.arg, annotation)
        elif arg.arg in rebound:
            continue
        elif default is not None:
            values.bind(arg.arg, default)
        else:
            values.bind(arg.arg, STATIC if isinstance(annotation, ast.Name) and annotation.id == "int" else UNKNOWN)
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            values.bind(extra.arg, UNKNOWN)


@dataclass
class ProgramValues:
    """A program's values by scope: the module's, and one :class:`Values` per top-level function
    (reading the module's names it does not bind), so that a ``q`` or ``idx`` of a torch helper is not
    the kernel's."""

    module: Values
    functions: dict[str, Values]
    by_node: dict[int, Values]

    def at(self, node: Node | None) -> Values:
        """The scope a statement belongs to (the module's for a statement outside every function)."""
        return self.by_node.get(id(node), self.module) if node is not None else self.module


def _bind_statement(values: Values, node: Node) -> None:
    stmt = node.stmt
    if isinstance(stmt, ast.Assign):
        if isinstance(stmt.value, ast.Call) and dotted(stmt.value.func).endswith(("frontend.dynamic", "pypto.dynamic")):
            values.dynamic_dims |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        for target in stmt.targets:
            _bind_target(values, target, stmt.value)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        _bind_target(values, stmt.target, stmt.value)
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        values.bind(stmt.target.id, stmt.value)
    elif node.loop_kind is not None:
        _loop_target(values, node)
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        _function(values, node)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                _bind_target(values, item.optional_vars, UNKNOWN)


def read_values(program: Program, declared: frozenset[str] = frozenset()) -> ProgramValues:
    """The :class:`ProgramValues` of a program, with the design's ``declared`` dynamic axis names (its
    front matter's ``dynamic_axes``: dynamic wherever they appear); computed once per set and kept on it."""
    cache = program._values if isinstance(program._values, dict) else {}
    if declared in cache:
        return cache[declared]
    module = Values(dynamic_dims=set(declared))
    result = ProgramValues(module=module, functions={}, by_node={})
    for top in program.nodes:
        if top.kind == "def" and isinstance(top.stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = Values(dynamic_dims=set(declared), parent=module)
            result.functions.setdefault(top.stmt.name, scope)
            _function(scope, top)
            result.by_node[id(top)] = scope
            for node, _loops in program.walk(top.body):
                result.by_node[id(node)] = scope
                _bind_statement(scope, node)
        else:
            for node, _loops in program.walk([top]):
                _bind_statement(module, node)
    cache[declared] = result
    program._values = cache
    return result


def declared_axes(front: dict) -> frozenset[str]:
    """The names of a front matter's ``dynamic_axes``: ``[{name: batch, ...}]`` (opdesign) or plain
    names ``[batch, seq_kv]`` (the CANNBot template)."""
    axes = front.get("dynamic_axes") if isinstance(front, dict) else None
    if not isinstance(axes, list):
        return frozenset()
    names = [a.get("name") if isinstance(a, dict) else a for a in axes]
    return frozenset(n.strip() for n in names if isinstance(n, str) and n.strip())


def is_dynamic(program: Program, expr: ast.AST, declared: frozenset[str] = frozenset(),
               node: Node | None = None) -> bool:
    """True when ``expr`` (in statement ``node``, whose function's names are read) is known to change per
    launch or per iteration (see the module docstring); ``declared``: the design's dynamic axis names
    (:func:`declared_axes`). A chain of bindings too deep to follow is not known to be dynamic."""
    try:
        return read_values(program, declared).at(node).kind(expr) == DYNAMIC
    except RecursionError:
        return False
