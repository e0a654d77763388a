"""Facts about kernel code in textual order, for the code rules (:mod:`opdesign.validate.rules.code`).

One pass over a parsed :class:`~opdesign.validate.parse.pseudocode.Program` (a DESIGN.md kernel block or a
kernel ``.py``) in statement order, with the loops around each statement. For every name bound so
far it keeps what the rules ask about:

- ``dtype``: the ``pypto.DT_*`` of a tensor (annotated parameters ``pypto.Tensor(shape, dtype)``,
  ``pypto.tensor`` / ``full`` / ``zeros`` / ``cast`` / ``matmul`` with a dtype argument; other pypto
  ops take the dtype of their first tensor argument), with the line that gave it;
- ``shape``: the dims of a tensor as expressions (``view`` / ``reshape`` / allocation shapes,
  ``matmul`` ``[M, N]``, elementwise ops keep the shape of their first tensor argument; reductions
  with ``keepdim`` end in 1);
- ``deps``: the loop indices a value depends on, through assignments (``page = block_table[b, i]``
  depends on ``b``);
- ``symbolic``: whether a value is a runtime scalar (a ``pypto.loop`` index, ``t.shape[i]``, a
  ``pypto.frontend.dynamic`` name, indexing an int tensor, arithmetic on those);
- ``batched``: tensors that are kernel inputs of rank >= 3 or reshapes of one (their views and
  assembles are indexed per batch and head).

Nothing here is a rule; unknown facts are None, and a rule that needs one stays quiet.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from opdesign.validate.analysis import astnodes
from opdesign.validate.parse.pseudocode import Node, Program, call_name, dotted, keyword

ALLOCATORS = frozenset({"tensor", "full", "zeros", "ones", "empty"})
#: pypto ops whose result keeps the shape of the first tensor argument (elementwise, cast, scalar ops).
ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "exp", "cast", "maximum", "minimum", "where", "neg",
                         "reciprocal", "muls", "adds", "subs", "divs", "sqrt", "rsqrt", "abs", "log", "clone"})
REDUCTIONS = frozenset({"amax", "amin", "sum", "rowmax", "rowsum", "mean"})
LOW_PRECISION = frozenset({"DT_BF16", "DT_FP16"})


@dataclass
class Value:
    dtype: str | None = None
    dtype_line: int = 0
    shape: tuple[ast.expr, ...] | None = None
    deps: frozenset[str] = frozenset()
    symbolic: bool = False
    batched: bool = False
    rank: int | None = None


@dataclass
class State:
    values: dict[str, Value] = field(default_factory=dict)
    loop_vars: dict[str, Node] = field(default_factory=dict)  # loop index name -> its loop

    def get(self, name: str) -> Value | None:
        return self.values.get(name)


def _dtype_arg(call: ast.Call) -> str | None:
    for arg in list(call.args) + [k.value for k in call.keywords if k.arg in ("dtype", "out_dtype")]:
        name = dotted(arg)
        if name.rpartition(".")[2].startswith("DT_"):
            return name.rpartition(".")[2]
    return None


def names_in(expr: ast.AST | None) -> set[str]:
    """Every name an expression mentions."""
    return {n.id for n in astnodes.walk(expr) if isinstance(n, ast.Name)} if expr is not None else set()


def _list(expr: ast.AST | None) -> tuple[ast.expr, ...] | None:
    return tuple(expr.elts) if isinstance(expr, (ast.List, ast.Tuple)) else None


_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b if b else None}


def int_of(expr: ast.AST, ints: dict[str, int], depth: int = 0) -> int | None:
    """The int an expression is: a literal, a name of ``ints``, or ``+ - * //`` of those; else None."""
    if depth > 50:
        return None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.Name):
        return ints.get(expr.id)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = int_of(expr.operand, ints, depth + 1)
        return None if inner is None else -inner
    if isinstance(expr, ast.BinOp) and type(expr.op) in _INT_OPS:
        left, right = int_of(expr.left, ints, depth + 1), int_of(expr.right, ints, depth + 1)
        return None if left is None or right is None else _INT_OPS[type(expr.op)](left, right)
    return None


def program_ints(program: Program) -> dict[str, int]:
    """Names bound to one int wherever the program binds them (assignments to the name alone, parameter
    defaults), module constants included; read once per program and kept on it."""
    kept = program.__dict__.get("_od_ints")
    if kept is not None:
        return kept
    bindings: dict[str, list[ast.expr]] = {}
    for node, _loops in program.walk():
        st = node.stmt
        if isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, ast.Name):
                    bindings.setdefault(t.id, []).append(st.value)
                else:
                    for n in astnodes.walk(t):
                        if isinstance(n, ast.Name):
                            bindings.setdefault(n.id, []).append(ast.Constant(value=None))  # unpacked: unknown
        elif isinstance(st, (ast.AnnAssign, ast.AugAssign)) and isinstance(st.target, ast.Name):
            bindings.setdefault(st.target.id, []).append(
                st.value if isinstance(st, ast.AnnAssign) and st.value is not None else ast.Constant(value=None))
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            for n in astnodes.walk(st.target):
                if isinstance(n, ast.Name):
                    bindings.setdefault(n.id, []).append(ast.Constant(value=None))
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = st.args
            positional = args.posonlyargs + args.args
            defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
            for arg, default in (list(zip(positional, defaults, strict=True))
                                 + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))):
                bindings.setdefault(arg.arg, []).append(default if default is not None else ast.Constant(value=None))
    ints: dict[str, int] = dict(program.constants)
    for _round in range(4):  # names defined from other names (``s2_tile = 4 * q_tile``)
        for name, values in bindings.items():
            found = {int_of(v, ints) for v in values}
            if len(found) == 1 and None not in found:
                ints[name] = found.pop()
    program.__dict__["_od_ints"] = ints
    return ints


class Flow:
    """Evaluate expressions against a :class:`State` (see the module docstring)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.constants = program.constants
        self.dynamic: set[str] = set()
        self._memo: dict[int, Value] = {}
        self._scanned: dict[int, tuple[frozenset[str], bool]] = {}
        for node in program.nodes:
            s = node.stmt
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and call_name(s.value) == "dynamic":
                self.dynamic |= {t.id for t in s.targets if isinstance(t, ast.Name)}

    def fork(self) -> Flow:
        """A Flow for the next statement: the same program facts, an empty memo (the state changed)."""
        out = object.__new__(Flow)
        out.program, out.constants, out.dynamic = self.program, self.constants, self.dynamic
        out._memo, out._scanned = {}, {}
        return out

    def _scan(self, expr: ast.AST, state: State) -> tuple[frozenset[str], bool]:
        """(loop indices, symbolic) of an expression, from its names (memoised per statement)."""
        key = id(expr)
        if key in self._scanned:
            return self._scanned[key]
        if isinstance(expr, ast.Name):
            known = state.get(expr.id)
            deps = set(known.deps) if known is not None else set()
            if expr.id in state.loop_vars:
                deps.add(expr.id)
            out = (frozenset(deps), bool(known is not None and known.symbolic) or expr.id in self.dynamic)
        else:
            deps, symbolic = set(), False
            for child in astnodes.children(expr):
                d, sym = self._scan(child, state)
                deps |= d
                symbolic |= sym
            out = (frozenset(deps), symbolic)
        self._scanned[key] = out
        return out

    def value(self, expr: ast.AST | None, state: State) -> Value:
        if expr is None:
            return Value()
        key = id(expr)
        if key not in self._memo:
            self._memo[key] = self._value(expr, state)
        return self._memo[key]

    def _value(self, expr: ast.AST, state: State) -> Value:
        deps, symbolic = self._scan(expr, state)
        out = Value(deps=deps, symbolic=symbolic)
        if isinstance(expr, ast.Name):
            known = state.get(expr.id)
            if known is not None:
                return Value(known.dtype, known.dtype_line, known.shape, out.deps, known.symbolic, known.batched,
                             known.rank)
            return out
        if isinstance(expr, ast.Subscript):
            base = expr.value
            if isinstance(base, ast.Attribute) and base.attr in ("shape", "valid_shape"):
                out.symbolic = True
                return out
            known = state.get(base.id) if isinstance(base, ast.Name) else None
            if known is not None and known.dtype is not None and not isinstance(expr.slice, ast.Slice):
                out.symbolic = known.dtype.startswith("DT_INT") or known.dtype.startswith("DT_UINT")
            return out
        if isinstance(expr, ast.Call):
            return self._call(expr, state, out)
        return out

    def _call(self, call: ast.Call, state: State, out: Value) -> Value:
        name = call_name(call)
        func = dotted(call.func)
        line = self.program.call_line(call, _NO_NODE)
        if isinstance(call.func, ast.Attribute) and name in ("min", "max") and not func.startswith("pypto."):
            owner = self.value(call.func.value, state)
            out.symbolic = owner.symbolic or out.symbolic
            return out
        if not func.startswith("pypto."):
            return out
        out.symbolic = False  # a pypto op gives a tensor
        args = [self.value(a, state) for a in call.args]
        first = next((a for a in args if a.dtype is not None or a.shape is not None), Value())
        if name in ALLOCATORS:
            out.dtype, out.dtype_line = _dtype_arg(call), line
            out.shape = _list(call.args[0] if call.args else keyword(call, "shape"))
        elif name == "matmul":
            out.dtype, out.dtype_line = _dtype_arg(call), line
            out.shape = self.matmul_mkn(call, state)
            if out.shape is not None:
                out.shape = (out.shape[0], out.shape[2])
        elif name == "view":
            src = self.value(call.args[0], state) if call.args else Value()
            out.dtype, out.dtype_line = src.dtype, src.dtype_line
            out.shape = _list(call.args[1] if len(call.args) > 1 else keyword(call, "shape"))
        elif name == "reshape":
            src = self.value(call.args[0], state) if call.args else Value()
            out.dtype, out.dtype_line = src.dtype, src.dtype_line
            out.shape = _list(call.args[1] if len(call.args) > 1 else keyword(call, "shape"))
            out.batched = src.batched
        elif name == "cast":
            out.dtype, out.dtype_line, out.shape = _dtype_arg(call), line, first.shape
        elif name in ELEMENTWISE:
            out.dtype, out.dtype_line, out.shape = first.dtype, first.dtype_line, first.shape
        elif name in REDUCTIONS:
            out.dtype, out.dtype_line = first.dtype, first.dtype_line
            keep = keyword(call, "keepdim")
            if first.shape and isinstance(keep, ast.Constant) and keep.value is True:
                out.shape = first.shape[:-1] + (ast.Constant(1),)
        return out

    def matmul_mkn(self, call: ast.Call, state: State) -> tuple[ast.expr, ast.expr, ast.expr] | None:
        """(M, K, N) of a ``pypto.matmul(a, b, ...)`` when both operand shapes are known 2-D."""
        if len(call.args) < 2:
            return None
        a, b = self.value(call.args[0], state).shape, self.value(call.args[1], state).shape
        if not a or not b or len(a) != 2 or len(b) != 2:
            return None
        a_t, b_t = (isinstance(keyword(call, k), ast.Constant) and keyword(call, k).value is True
                    for k in ("a_trans", "b_trans"))
        m, k = (a[1], a[0]) if a_t else (a[0], a[1])
        n = b[0] if b_t else b[1]
        return m, k, n

    def dims_key(self, dims: tuple[ast.expr, ...]) -> tuple[str, ...]:
        """Dims compared by value: known constants become their ints (module constants, and names of any
        case bound to one int everywhere in the program: a factory's ``q_tile = 128``, a parameter default
        ``kv_tile=128``, arithmetic of those), the rest their source text."""
        ints = program_ints(self.program)
        out = []
        for d in dims:
            value = int_of(d, ints)
            out.append(str(value) if value is not None else ast.unparse(d))
        return tuple(out)


class _NoNode:
    line = 1


_NO_NODE = _NoNode()


def bind(flow: Flow, state: State, target: ast.AST, value: Value) -> None:
    if isinstance(target, ast.Name):
        state.values[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            bind(flow, state, elt, Value(deps=value.deps, symbolic=value.symbolic))


def _params(flow: Flow, fn: ast.FunctionDef, state: State) -> None:
    for arg in fn.args.args + fn.args.kwonlyargs:
        ann = arg.annotation
        if isinstance(ann, ast.Call) and call_name(ann) == "Tensor":
            dims = _list(ann.args[0] if ann.args else None) or None  # ``Tensor([], dtype)``: shape from the input
            dtype = _dtype_arg(ann)
            state.values[arg.arg] = Value(dtype=dtype, dtype_line=flow.program.call_line(ann, _NO_NODE),
                                          shape=dims, batched=dims is not None and len(dims) >= 3,
                                          rank=len(dims) if dims is not None else None)
        else:
            state.values[arg.arg] = Value()


def _advance(flow: Flow, state: State, node: Node) -> None:
    """Bind what ``node`` binds (its state before it is ``state``, updated in place)."""
    s = node.stmt
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
        _params(flow, s, state)
    elif isinstance(s, ast.Assign):
        value = flow.value(s.value, state)
        for target in s.targets:
            bind(flow, state, target, value)
    elif isinstance(s, ast.AnnAssign) and s.value is not None:
        bind(flow, state, s.target, flow.value(s.value, state))
    elif isinstance(s, (ast.For, ast.AsyncFor)):
        iter_value = flow.value(s.iter, state)
        looped = node.loop_kind in ("pypto.loop", "loop_unroll")
        targets = [s.target] if isinstance(s.target, ast.Name) else list(getattr(s.target, "elts", []))
        for i, t in enumerate(targets):
            if not isinstance(t, ast.Name):
                continue
            if i == 0 and looped:
                state.loop_vars[t.id] = node
                state.values[t.id] = Value(symbolic=True, deps=frozenset({t.id}))
            else:
                state.loop_vars[t.id] = node
                state.values[t.id] = Value(symbolic=iter_value.symbolic and node.loop_kind != "loop_unroll",
                                           deps=frozenset({t.id}) | iter_value.deps)


Step = tuple[Node, tuple[Node, ...], State, Flow]
#: A program of more nodes is walked afresh by each rule instead of kept: a kept walk copies the state
#: at every node (nodes x names entries), which a long file of distinct names makes quadratic
#: (a 256 KiB kernel holds some 37,000 statements). Generated kernels have about 360 nodes.
KEEP_NODES = 1024


def _steps(program: Program, keep: bool) -> Iterator[Step]:
    """The walk; ``keep``: each node gets a copy of the state (else the one state, updated after the yield)."""
    flow = Flow(program)
    state = State()
    for node, loops in program.walk():
        step = flow.fork()
        yield node, loops, State(dict(state.values), dict(state.loop_vars)) if keep else state, step
        _advance(step, state, node)


def walk(program: Program) -> Iterator[Step]:
    """Each node (textual order, as :meth:`Program.walk`) with its loops, the state *before* it and a
    :class:`Flow` that evaluates expressions in that state.

    The walk of a program of up to :data:`KEEP_NODES` nodes is listed once and kept on it (OD-KN-02 ..
    05 read the same walk): each node gets its own copy of the state and its own :class:`Flow` memo, so
    what a rule asks of one node is what the one-pass walk gave at that node. Rules read the states
    and values at the node they are given; none edits them, and none keeps a state for a later node."""
    steps = program._flowed
    if steps is None:
        if sum(1 for _ in program.walk()) > KEEP_NODES:
            return _steps(program, keep=False)
        steps = list(_steps(program, keep=True))
        program._flowed = steps
    return iter(steps)
