"""The online-softmax merge (AT-01-R3) on kernel code: both the old state and the new tile are rescaled
against the new running max.

An online-softmax update of a running sum or output has the form ``acc = acc * F + G`` (or ``pypto.add(
pypto.mul(acc, F), G)``, in any order of the operands; ``acc[:] = ...`` too). ``F`` rescales the old
state: it is computed from an ``exp`` whose argument depends on a new max ``m_new`` (a name bound to
``pypto.maximum(a, b)`` / ``pypto.max(a, b)``): ``exp(m_old - m_new)``. ``G`` is the new tile's
contribution; it is right when an ``exp`` in its derivation depends on the same ``m_new``: either the
AT-01 form ``beta = exp(m_tile - m_new)`` times the tile's sum or output, or the FA-2 form whose tile
exponentials are taken against the new max directly (``p = exp(s - m_new)``). A ``G`` whose every
``exp`` is taken against the tile's own max only (``exp(s - m_tile)``) is weighted wrongly against the
old state whenever ``m_tile < m_new``.

Derivations are read flow-insensitively over the program's assignments (a name's bindings, transitively:
``l_tile = pypto.sum(p)``, ``p = pypto.exp(pypto.sub(s, m_tile))``; ``assemble(src, offsets, dst)``
makes dst derive from src). Updates whose ``F`` has no ``exp`` against a max (a plain accumulation such
as ``dq = dq + blk``) and tile terms with no ``exp`` in their derivation are not judged.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from opdesign.validate.analysis import astnodes
from opdesign.validate.analysis.codeflow import names_in
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.pseudocode import Program, call_name, unparse

EXPS = frozenset({"exp", "exp2"})
MAXES = frozenset({"maximum", "max"})


def _base(target: ast.AST) -> str | None:
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


class _Derivations:
    """What each name is computed from (transitively), the ``exp`` arguments in its bindings, and which
    names hold a running max."""

    def __init__(self, program: Program) -> None:
        self.reads: dict[str, set[str]] = {}
        self.exps: dict[str, list[ast.expr]] = {}
        self.values: dict[str, list[ast.expr]] = {}
        self.maxima: set[str] = set()
        self._closure: dict[str, frozenset[str]] = {}
        for node, _loops in program.walk():
            s = node.stmt
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None:
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    for name in self._names(t):
                        self._bind(name, s.value, extra={name} if isinstance(s, ast.AugAssign) else set())
            elif isinstance(s, ast.Expr):
                for call in astnodes.walk(s.value):
                    if isinstance(call, ast.Call) and call_name(call) == "assemble" and len(call.args) > 2:
                        dst = _base(call.args[2])
                        if dst is not None:
                            self._bind(dst, call.args[0])

    @staticmethod
    def _names(target: ast.AST) -> list[str]:
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for elt in target.elts for n in _Derivations._names(elt)]
        name = _base(target)
        return [name] if name is not None else []

    def _bind(self, name: str, value: ast.expr, extra: set[str] | None = None) -> None:
        self.reads.setdefault(name, set()).update(names_in(value) | (extra or set()))
        self.exps.setdefault(name, []).extend(_exp_args(value))
        self.values.setdefault(name, []).append(value)
        if isinstance(value, ast.Call) and call_name(value) in MAXES and len(value.args) == 2:
            self.maxima.add(name)

    def closure(self, names: set[str]) -> frozenset[str]:
        """The names and every name they are computed from, transitively."""
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += self.reads.get(name, ())
        return frozenset(seen)

    def exps_of(self, expr: ast.expr) -> list[ast.expr]:
        """The ``exp`` arguments in the derivation of ``expr`` (its own and its names' bindings)."""
        out = list(_exp_args(expr))
        for name in sorted(self.closure(names_in(expr))):
            out += self.exps.get(name, [])
        return out

    def against(self, exp_arg: ast.expr) -> frozenset[str]:
        """The running maxima an ``exp`` argument depends on."""
        return self.closure(names_in(exp_arg)) & self.maxima


def _exp_args(expr: ast.AST) -> list[ast.expr]:
    out = []
    for node in astnodes.walk(expr):
        if isinstance(node, ast.Call) and call_name(node) in EXPS:
            if node.args:
                out.append(node.args[0])
            elif isinstance(node.func, ast.Attribute):  # ``x.exp()``
                out.append(node.func.value)
    return out


def _terms(expr: ast.expr, op: type, call: str) -> list[ast.expr] | None:
    """The two operands of ``a + b`` / ``pypto.add(a, b)`` (``op`` / ``call``), else None."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, op):
        return [expr.left, expr.right]
    if isinstance(expr, ast.Call) and call_name(expr) == call and len(expr.args) >= 2:
        return list(expr.args[:2])
    return None


def _factors(term: ast.expr, d: _Derivations) -> list[ast.expr] | None:
    """The operands of ``term`` when it is a product (``a * b``, ``pypto.mul(a, b)``, or a name bound once
    to one: ``oi_scaled = pypto.mul(oi_acc, alpha)``), else None."""
    if isinstance(term, ast.Name) and len(d.values.get(term.id, [])) == 1:
        term = d.values[term.id][0]
    return _terms(term, ast.Mult, "mul")


def updates(program: Program) -> Iterator[tuple[int, str, ast.expr, ast.expr, frozenset[str]]]:
    """(line, target, rescaled term, tile term, maxima the rescaled term is taken against) of each merge
    ``X * F + G`` inside a loop whose factor ``F`` is an ``exp`` against a running max (the old state,
    rescaled: ``exp(m_old - m_new)``). The target may be the state itself (``l = l * alpha + l_tile``) or
    a new name stored later (``li_new = pypto.add(pypto.mul(t2, li), pypto.mul(t4, lij))``)."""
    d = _Derivations(program)
    for node, loops in program.walk():
        s = node.stmt
        if not loops or not isinstance(s, ast.Assign) or len(s.targets) != 1:
            continue
        terms = _terms(s.value, ast.Add, "add")
        if terms is None:
            continue
        target = _base(s.targets[0]) or unparse(s.targets[0])
        for i, term in enumerate(terms):
            factors = _factors(term, d)
            if factors is None:
                continue
            # the factor's own exp, or the exp of a name it reads (``alpha = pypto.exp(...)``, in every branch
            # that binds it)
            rescaled = frozenset().union(*(d.against(a) for f in factors for a in _exp_args(f) + [
                e for n in names_in(f) for v in d.values.get(n, []) for e in _exp_args(v)]))
            if rescaled:
                yield node.line, target, term, terms[1 - i], rescaled
                break


@rule("AT-01-R3", "error", "pseudocode", "AT-01-R3 (online softmax: merge a later tile against the new max)",
      "an online-softmax update rescales the old state by exp(m_old - m_new) but adds the new tile without "
      "exp(m_tile - m_new)",
      bad=("for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
           "    s = pypto.matmul(q_t, k_t, pypto.DT_FP32, b_trans=True)\n"
           "    m_tile = pypto.amax(s, -1, keepdim=True)\n"
           "    p = pypto.exp(pypto.sub(s, m_tile))\n"
           "    l_tile = pypto.sum(p, -1, keepdim=True)\n"
           "    m_new = pypto.maximum(m_run, m_tile)\n"
           "    alpha = pypto.exp(pypto.sub(m_run, m_new))\n"
           "    l_run = pypto.add(pypto.mul(l_run, alpha), l_tile)\n"
           "    m_run = m_new"),
      good=("for kj in pypto.loop(kv_tiles, name='LOOP_kv'):\n"
            "    s = pypto.matmul(q_t, k_t, pypto.DT_FP32, b_trans=True)\n"
            "    m_tile = pypto.amax(s, -1, keepdim=True)\n"
            "    p = pypto.exp(pypto.sub(s, m_tile))\n"
            "    l_tile = pypto.sum(p, -1, keepdim=True)\n"
            "    m_new = pypto.maximum(m_run, m_tile)\n"
            "    alpha = pypto.exp(pypto.sub(m_run, m_new))\n"
            "    beta = pypto.exp(pypto.sub(m_tile, m_new))\n"
            "    l_run = pypto.add(pypto.mul(l_run, alpha), pypto.mul(l_tile, beta))\n"
            "    m_run = m_new"),
      kernel=True)
def check_online_softmax_rescale(ctx: Context) -> Iterator[Hit]:
    """In an online-softmax merge (AT-01-R3: ``m_new = max(m_old, m_tile)``, ``l = exp(m_old - m_new) * l
    + exp(m_tile - m_new) * l_tile``, the output likewise), the running sum and output rescale both the
    old state and the new tile against the new max. An update ``acc = acc * F + G`` whose ``F`` is an
    ``exp`` against a new max but whose tile term ``G`` was computed against the tile's own max only
    (``exp(s - m_tile)`` and no ``exp(m_tile - m_new)``) weights the tiles wrongly whenever a later tile
    raises the max: the result no longer matches a full softmax. Algebraic equivalents pass: the tile's
    exponentials taken against the new max (``p = exp(s - m_new)``, FA-2), or the tile term multiplied by
    any ``exp`` that depends on the new max. See :mod:`opdesign.validate.rules.softmax` for how
    derivations are read. Runs on factory-nested kernels as on module-level ones, and on any kernel (the
update pattern itself says online softmax; an online softmax without C2 is one too)."""
    program = ctx.program
    if program is None or not program.parsed:
        return
    d = _Derivations(program)
    for line, acc, _state, tile, maxima in updates(program):
        tile_exps = d.exps_of(tile)
        if not tile_exps or any(d.against(a) & maxima for a in tile_exps):
            continue
        m_new = sorted(maxima)[0]
        yield Hit(line, f"online-softmax update of {acc} rescales the old state against the new max {m_new} but "
                        f"adds the new tile {unparse(tile)} without exp(m_tile - {m_new}): every exp in its "
                        f"derivation ({', '.join(sorted({unparse(a) for a in tile_exps})[:3])}) ignores {m_new}")
