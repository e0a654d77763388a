"""Attention-aware signals of a golden function, found by syntax alone.

These signals sit next to the CANNBot-compatible counts and never change them;
:func:`opdesign.golden.estimate.decide_module_count` combines them with the design
parameters into the module count the plan uses.

What is detected (all by :mod:`ast`, names are hints, nothing is executed):

- **Loop-carried state.** A name a loop body reads before the body rebinds it
  (``m = np.maximum(m, ...)``, ``l += ...``, or a branch such as
  ``if j == 0: m = mij`` / ``else: m = np.maximum(m, mij)``), or an array the
  loop accumulates into at an index that does not use the loop variable
  (``dk[j] += ...`` inside ``for i``). Plain counters (``pos += block_size``,
  no call, subscript or matmul in the update) are not state. Each loop that
  carries state is one state group (the deriver's ``S``).
- **Online-softmax state** (AT-01): one loop carries a running max and a
  running sum and computes an ``exp`` in its body (or in a helper it calls).
  Roles come from the update expression (a ``maximum`` / ``max`` call, a
  ``sum`` call, a matmul) and, failing that, from the name (``m``/``l``/``acc``).
- **Softmax chain** (AT-02): a ``softmax`` call, or max, ``exp(x - ...)`` and
  sum together; the chain max -> subtract -> exp -> sum -> divide is one module.
- **Backward:** gradient outputs (``dq``/``dk``/``dv``, ``grad_q`` ...) returned,
  or an upstream-gradient parameter (``dout``, ``d_o``, ``grad_out`` ...);
  softmax statistics inputs are parameters named like forward ``l``/``m``/``lse``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from opdesign.golden.names import STATS_INPUT
from opdesign.golden.syntax import FunctionNode, call_name, is_matmul, walk_local

_MAX_CALLS = frozenset({"maximum", "fmax", "amax", "max"})
_SUM_CALLS = frozenset({"sum", "nansum"})
_SOFTMAX_CALLS = frozenset({"softmax", "log_softmax"})
_CROSS_TILE_CALLS = frozenset(
    {"sum", "nansum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "softmax", "log_softmax", "logsumexp"}
)
# Python builtins whose bare-name call is scalar arithmetic, not a tensor op.
_SCALAR_BUILTINS = frozenset({"min", "max", "abs", "int", "float", "len", "round", "range", "divmod"})

_ROLE_BY_NAME = (
    ("max", re.compile(r"^(m|mi|m_i|m_prev|m_old|max|row_?max|running_max|\w+_max|max_\w+)$")),
    ("sum", re.compile(r"^(l|li|l_i|l_prev|l_old|row_?sum|running_sum|denom\w*|normali[sz]er|\w+_sum|sum_\w+)$")),
    ("weighted_sum", re.compile(r"^(o|oi|o_i|acc\w*|\w+_acc|o_acc|out_acc|numerator|weighted\w*)$")),
)
_ROLE_ORDER = {"max": 0, "sum": 1, "weighted_sum": 2, "other": 3}
_GRAD_OUTPUT = re.compile(r"^(d_?|grad_?)(q|k|v|query|key|value)(_\w+)?$")
_UPSTREAM_GRAD = re.compile(r"^(dout|d_?o|do_|d_?out(put)?|grad_?o|grad_?out(put)?|dy|grad_y)$")

SK16_MIN_MATMULS = 5  # SK-16 "When": two matmuls in C1, three in C2


class Attention(NamedTuple):
    """Attention structure of a golden; reported beside, never inside, the parity counts (the fields of
    :class:`opdesign.golden.models.AttentionSignals`)."""

    online_softmax_state: bool
    state_names: list[str]
    state_roles: dict[str, str]
    softmax_chain: bool
    backward: bool
    stats_inputs: list[str]
    grad_outputs: list[str]
    sk16_applicable: bool
    matmul_count: int


class CarriedState(NamedTuple):
    """Loop-carried state found in the golden: names in role order and the number of loops carrying any."""

    names: list[str]
    roles: dict[str, str]
    groups: int
    online_softmax: bool


def _names(node: ast.AST, ctx: type[ast.expr_context]) -> set[str]:
    """Names used with ``ctx`` under ``node`` (itself included), comprehension variables left out."""
    nodes = (node, *walk_local(node))
    found = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}
    comprehension_vars = {
        n.id for c in nodes if isinstance(c, ast.comprehension) for n in ast.walk(c.target) if isinstance(n, ast.Name)
    }
    return found - comprehension_vars


def _stores(node: ast.AST) -> set[str]:
    return _names(node, ast.Store)


def _loads(node: ast.AST) -> set[str]:
    return _names(node, ast.Load)


def _exposed(block: list[ast.stmt], killed: set[str]) -> tuple[set[str], set[str]]:
    """``(read, killed)``: names ``block`` reads before it surely assigns them, and what it surely assigns.

    A loop body may run zero times and a branch may not be taken, so neither
    kills a name for the statements after it (an ``if`` kills what both of its
    branches assign); a plain assignment does.
    """
    killed = set(killed)
    read: set[str] = set()
    for stmt in block:
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            read |= _loads(stmt.iter) - killed
            read |= _exposed(stmt.body, killed | _stores(stmt.target))[0] | _exposed(stmt.orelse, killed)[0]
        elif isinstance(stmt, ast.While):
            read |= (_loads(stmt.test) - killed) | _exposed(stmt.body, killed)[0] | _exposed(stmt.orelse, killed)[0]
        elif isinstance(stmt, ast.If):
            body_read, body_killed = _exposed(stmt.body, killed)
            else_read, else_killed = _exposed(stmt.orelse, killed)
            read |= (_loads(stmt.test) - killed) | body_read | else_read
            killed = body_killed & else_killed
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            read |= set().union(*(_loads(item.context_expr) for item in stmt.items)) - killed
            body_read, killed = _exposed(stmt.body, killed)
            read |= body_read
        else:  # simple statements; other compound ones (try, match) conservatively kill nothing
            target_read = _stores(stmt.target) if isinstance(stmt, ast.AugAssign) else set()
            read |= (_loads(stmt) | target_read) - killed
            if isinstance(stmt, ast.Assign) or (isinstance(stmt, ast.AnnAssign) and stmt.value is not None):
                killed |= _stores(stmt)
    return read, killed


def _assignments(loop: ast.AST) -> Iterator[tuple[ast.expr, ast.expr, bool, bool]]:
    """``(target, value, reads_target, shared)`` of every assignment in the loop body.

    Tuple targets are unpacked; ``shared`` marks a value that several targets
    take apart (``m, l, acc = update(...)``), where the value says nothing per name.
    """
    for node in walk_local(loop):
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
            reads = False
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            pairs = [(node.target, node.value)]
            reads = isinstance(node, ast.AugAssign)
        else:
            continue
        for target, value in pairs:
            yield from _unpack(target, value, reads, shared=False)


def _unpack(target: ast.expr, value: ast.expr, reads: bool,
            shared: bool) -> Iterator[tuple[ast.expr, ast.expr, bool, bool]]:
    if not isinstance(target, (ast.Tuple, ast.List)):
        yield target, value, reads, shared
        return
    paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
    for index, element in enumerate(target.elts):
        if paired:
            yield from _unpack(element, value.elts[index], reads, shared)
        else:
            yield from _unpack(element, value, reads, shared=True)


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _carried_names(loop: ast.For | ast.AsyncFor | ast.While) -> list[str]:
    """Names whose value flows from one iteration of ``loop`` into the next."""
    loop_vars = _stores(loop.target) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    rebound = set().union(*(_stores(s) for s in loop.body)) - loop_vars
    carried = sorted(_exposed(loop.body, loop_vars)[0] & rebound)
    if loop_vars:  # in-place accumulation at an index the loop variable does not select
        for target, value, reads_target, _ in _assignments(loop):
            base = _root_name(target)
            if not isinstance(target, ast.Subscript) or base is None or base in carried:
                continue
            if _loads(target.slice) & loop_vars:
                continue
            if reads_target or base in _loads(value):
                carried.append(base)
    return carried


class _Update(NamedTuple):
    """How a carried name is updated: alias-resolved values, their temporaries, shared unpacking."""

    direct: list[ast.expr]
    one_level: list[ast.expr]
    shared: bool


def _update_exprs(loop: ast.AST, name: str, carried: set[str]) -> _Update:
    """Right-hand sides updating ``name`` in ``loop``.

    ``direct`` follows aliases (``m = m_new``) to the expression that computes
    the value; ``one_level`` adds the values of the loop temporaries it reads.
    """
    by_target: dict[str, list[ast.expr]] = {}
    shared_values: set[int] = set()
    for target, value, _, shared in _assignments(loop):
        base = _root_name(target)
        if base is not None:
            by_target.setdefault(base, []).append(value)
        if shared:
            shared_values.add(id(value))

    def is_temp(temp: str) -> bool:
        return temp in by_target and temp not in carried

    direct: list[ast.expr] = []
    pending = list(by_target.get(name, []))
    followed = {name}
    while pending:
        expr = pending.pop(0)
        if isinstance(expr, ast.Name) and is_temp(expr.id) and expr.id not in followed:
            followed.add(expr.id)
            pending.extend(by_target[expr.id])
        else:
            direct.append(expr)
    one_level = [
        value
        for temp in sorted(set().union(*(_loads(e) for e in direct)) - followed)
        if is_temp(temp)
        for value in by_target[temp]
    ]
    return _Update(direct=direct, one_level=one_level, shared=any(id(e) in shared_values for e in direct))


def _nodes(exprs: list[ast.expr]) -> Iterator[ast.AST]:
    for expr in exprs:
        yield expr
        yield from walk_local(expr)


def _is_tensor_update(exprs: list[ast.expr]) -> bool:
    for node in _nodes(exprs):
        if is_matmul(node) or isinstance(node, ast.Subscript):
            return True
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _SCALAR_BUILTINS):
            return True
    return False


def _op_role(exprs: list[ast.expr]) -> str | None:
    nodes = list(_nodes(exprs))
    if any(is_matmul(n) for n in nodes):
        return "weighted_sum"
    calls = {call_name(n) for n in nodes}
    if calls & _SUM_CALLS:
        return "sum"
    if calls & _MAX_CALLS:
        return "max"
    return None


def _name_role(name: str) -> str | None:
    return next((role for role, pattern in _ROLE_BY_NAME if pattern.match(name.lower())), None)


def _role(name: str, update: _Update) -> str:
    """Role of a carried name: from its own update, then its temporaries, then its name.

    A value several names unpack (``m, l, acc = update(...)``) goes by name first.
    """
    if update.shared:
        return _name_role(name) or "other"
    return _op_role(update.direct) or _op_role(update.one_level) or _name_role(name) or "other"


def _calls_exp(node: ast.AST, helpers: dict[str, FunctionNode], seen: set[str] | None = None) -> bool:
    seen = set() if seen is None else seen
    for child in ast.walk(node):
        name = call_name(child)
        if name == "exp":
            return True
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and name in helpers and name not in seen:
            seen.add(name)
            if _calls_exp(helpers[name], helpers, seen):
                return True
    return False


def find_carried_state(scope: list[FunctionNode], helpers: dict[str, FunctionNode]) -> CarriedState:
    """Loop-carried tensor state in ``scope`` (the golden and the helpers it calls)."""
    names: list[str] = []
    roles: dict[str, str] = {}
    groups = 0
    online = False
    for function in scope:
        for loop in (n for n in ast.walk(function) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))):
            carried = _carried_names(loop)
            loop_roles = {}
            for name in carried:
                update = _update_exprs(loop, name, set(carried))
                if _is_tensor_update(update.direct + update.one_level):
                    loop_roles[name] = _role(name, update)
            if not loop_roles:
                continue
            groups += 1
            kinds = set(loop_roles.values())
            online = online or ({"max", "sum"} <= kinds and _calls_exp(loop, helpers))
            for name, role in loop_roles.items():
                if name not in roles:
                    names.append(name)
                    roles[name] = role
    names.sort(key=lambda n: _ROLE_ORDER[roles[n]])
    return CarriedState(names=names, roles=roles, groups=groups, online_softmax=online)


def has_softmax_chain(scope: list[FunctionNode]) -> bool:
    """A softmax call, or a max reduction, ``exp`` of a difference and a sum reduction together."""
    calls = {call_name(n) for f in scope for n in ast.walk(f)}
    if calls & _SOFTMAX_CALLS:
        return True
    exp_of_difference = any(
        call_name(n) == "exp" and any(isinstance(a, ast.BinOp) and isinstance(a.op, ast.Sub) for a in n.args)
        for f in scope
        for n in ast.walk(f)
    )
    return exp_of_difference and bool(calls & _MAX_CALLS) and bool(calls & _SUM_CALLS)


def count_cross_tile_reductions(scope: list[FunctionNode]) -> int:
    """Reductions that span a tiled axis: sum/mean/max/min/var/softmax... calls (bare max/min excluded)."""
    return sum(
        1
        for f in scope
        for n in ast.walk(f)
        if call_name(n) in _CROSS_TILE_CALLS
        and not (isinstance(n.func, ast.Name) and n.func.id in _SCALAR_BUILTINS)
    )


def _returned_names(function: FunctionNode) -> list[str]:
    names: list[str] = []
    for node in walk_local(function):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Dict):
            items = [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        else:
            elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            items = [name for name in map(_root_name, elements) if name]
        for name in items:
            if name not in names:
                names.append(name)
    return names


def _parameters(function: FunctionNode) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def detect_attention(function: FunctionNode, scope: list[FunctionNode], state: CarriedState,
                     matmul_count: int) -> Attention:
    """Attention signals of ``function``; ``scope`` adds the helpers it calls, ``state`` its carried state."""
    params = _parameters(function)
    grad_outputs = [n for n in _returned_names(function) if _GRAD_OUTPUT.match(n.lower())]
    backward = bool(grad_outputs) or any(_UPSTREAM_GRAD.match(p.lower()) for p in params)
    stats_inputs = [p for p in params if STATS_INPUT.match(p.lower())] if backward else []
    return Attention(
        online_softmax_state=state.online_softmax,
        state_names=state.names,
        state_roles=state.roles,
        softmax_chain=has_softmax_chain(scope),
        backward=backward,
        stats_inputs=stats_inputs,
        grad_outputs=grad_outputs,
        sk16_applicable=backward and bool(stats_inputs) and matmul_count >= SK16_MIN_MATMULS,
        matmul_count=matmul_count,
    )
