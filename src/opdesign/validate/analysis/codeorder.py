"""Binding order in kernel code: which names a body reads before it binds them.

:class:`Order` visits statements in evaluation order (the right-hand side before the target, a
loop's iterable before its index and body); with ``branches`` an ``if`` binds only what both of
its branches bind (definite assignment), else bindings count in textual order. Comprehensions,
lambdas and nested functions have their own names. Used by OD-KN-03 (which values a loop carries)
and OD-KN-06 (reads before the first binding).
"""

from __future__ import annotations

import ast
import builtins
from typing import NamedTuple

from opdesign.validate.analysis import astnodes
from opdesign.validate.parse.pseudocode import Program

_OWN_SCOPE = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)
#: node classes without fields (the visitor has no method for any of them)
_NO_FIELDS = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


class Order(ast.NodeVisitor):
    """Names read before they are bound, in evaluation order, within one function."""

    def __init__(self, bound: set[str], branches: bool = False) -> None:
        self.bound = set(bound)
        self.branches = branches  # an if binds what both branches bind (else: textual order)
        self.reads: list[tuple[str, int]] = []  # (name, lineno) read while unbound
        self.first_bind: dict[str, int] = {}
        self.written: set[str] = set()  # names written through a subscript (``oi[:] = x``)

    def visit(self, node: ast.AST) -> None:
        """Expressions are walked with an explicit stack (children in evaluation order), so a
        500-term sum costs no recursion; statements and own-scope nodes go to their visitors."""
        stack: list[ast.AST | tuple[str, ast.AST]] = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, ast.Name):  # the commonest nodes first
                self.visit_Name(item)
            elif isinstance(item, _NO_FIELDS):
                continue  # an operator or a load / store marker: nothing to visit
            elif isinstance(item, tuple):  # a walrus target, stored after its value
                self.store(item[1])
            elif isinstance(item, ast.NamedExpr):
                stack += [("store", item.target), item.value]
            elif isinstance(item, ast.expr) and not isinstance(item, _OWN_SCOPE):
                stack.extend(reversed(astnodes.children(item)))
            else:
                super().visit(item)

    def store(self, target: ast.AST) -> None:
        for n in astnodes.walk(target):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.bound.add(n.id)
                self.first_bind.setdefault(n.id, n.lineno)
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                self.load(n.value)  # ``oi[:] = x`` writes into an existing oi
                self.written.add(n.value.id)

    def load(self, node: ast.Name) -> None:
        if node.id not in self.bound:
            self.reads.append((node.id, node.lineno))

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.load(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.store_target(t)

    def store_target(self, t: ast.AST) -> None:
        if isinstance(t, ast.Subscript):
            self.visit(t.slice)
        self.store(t)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.store_target(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.load(ast.Name(id=node.target.id, ctx=ast.Load(), lineno=node.target.lineno))
        self.store_target(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.store(node.target)
        for s in node.body + node.orelse:
            self.visit(s)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        if not self.branches:
            for s in node.body + node.orelse:
                self.visit(s)
            return
        before = set(self.bound)
        for s in node.body:
            self.visit(s)
        after_body, self.bound = self.bound, set(before)
        for s in node.orelse:
            self.visit(s)
        self.bound = after_body & self.bound

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.store(node.target)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.store(item.optional_vars)
        for s in node.body:
            self.visit(s)

    def _scope(self, node: ast.AST) -> None:  # comprehensions, lambdas, nested functions: own names
        saved = set(self.bound)
        for n in astnodes.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.bound.add(n.id)
            elif isinstance(n, ast.arg):
                self.bound.add(n.arg)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.generic_visit(node)
        self.bound = saved
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bind_name(node.name, node.lineno)  # ``def f`` / ``class C`` bind their name

    def bind_name(self, name: str, lineno: int) -> None:
        self.bound.add(name)
        self.first_bind.setdefault(name, lineno)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.bind_name((alias.asname or alias.name).split(".")[0], node.lineno)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind_name(node.name, node.lineno)  # ``except E as e``
        for s in node.body:
            self.visit(s)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda = _scope
    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Global(self, node: ast.Global) -> None:
        self.bound |= set(node.names)

    visit_Nonlocal = visit_Global


#: names every module has (``__file__`` is not a builtin, but is bound in a module run from a file)
MODULE_DUNDERS = frozenset({"__file__", "__name__", "__doc__", "__spec__", "__package__", "__loader__",
                            "__builtins__", "__cached__", "__path__", "__annotations__", "__dict__"})


def defined_names(program: Program, assigned: bool = False) -> set[str]:
    """Builtins, imports and the functions / classes of the module (bound before its statements run);
    ``assigned`` adds every name a module-level statement stores (:func:`module_names`)."""
    names: set[str] = set(dir(builtins)) | MODULE_DUNDERS | program.module_bound
    for node in program.nodes:
        s = node.stmt
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in s.names}
        elif assigned and s is not None:
            names |= {n.id for n in astnodes.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def local_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Every name a function binds anywhere in its own body (parameters, assignments, loop indices,
    ``except ... as`` names, ``def`` / ``class`` / ``import`` / ``global`` names), the names a closure may
    read from it; a nested function's or class's own names are not the function's."""
    args = fn.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack += astnodes.children(node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names |= set(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def functions(program: Program) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]]:
    """Every function of the program at any depth (a factory's kernel, a method, a closure), in file
    order, with the names its enclosing functions bind (:func:`local_names`; a class body's names are
    not visible to its methods)."""
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]] = []
    stack: list[tuple[ast.AST, frozenset[str]]] = [(n.stmt, frozenset()) for n in reversed(program.nodes)
                                                   if n.stmt is not None]
    while stack:
        node, outer = stack.pop()
        inner = outer
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node, set(outer)))
            inner = outer | local_names(node)
        stack += [(child, inner) for child in reversed(astnodes.children(node))]
    return sorted(out, key=lambda item: (item[0].lineno, item[0].col_offset))


def module_names(program: Program) -> set[str]:
    """Every name bound at module level: :func:`defined_names` plus the names its statements assign."""
    return defined_names(program, assigned=True)


class _Summary(NamedTuple):
    """What one statement (or a run of statements) does to binding order, from nothing bound before it."""

    reads: frozenset[str]  # names read while not yet bound
    bound: frozenset[str]  # names surely bound after it
    stored: frozenset[str]  # every name it stores
    written: frozenset[str]  # names written through a subscript


_EMPTY = _Summary(frozenset(), frozenset(), frozenset(), frozenset())


def _of_order(order: Order) -> _Summary:
    return _Summary(frozenset(name for name, _line in order.reads), frozenset(order.bound),
                    frozenset(order.first_bind), frozenset(order.written))


def _then(first: _Summary, second: _Summary) -> _Summary:
    """``first`` followed by ``second``: what ``second`` reads counts only if ``first`` did not bind it."""
    return _Summary(first.reads | (second.reads - first.bound), first.bound | second.bound,
                    first.stored | second.stored, first.written | second.written)


class Carried:
    """The names each loop of one tree carries, each statement summarised once.

    :meth:`of` a loop: the names its body reads before this iteration has surely bound them, and
    assigns somewhere: values carried from one iteration to the next (an ``if`` binds a name surely
    only when both branches do: the SSA first-tile form ``if kj == 0: m = m_blk`` / ``else: ... m ...``
    carries m).

    An :class:`Order` pass over an outer loop revisits every inner loop's body; here a statement's
    effect (:class:`_Summary`) is computed once and composed. Starting from a set ``B`` of bound names
    changes an :class:`Order` pass only by union (its reads are those from an empty start minus ``B``,
    its bindings those plus ``B``; an ``if`` binds ``B`` plus what both branches bind), so composing
    summaries gives the names of a pass over the whole body. ``for`` and ``if`` are composed from their
    parts; any other statement is one :class:`Order` pass. The tree must not change while it is used.
    """

    def __init__(self) -> None:
        self._done: dict[int, tuple[ast.stmt, _Summary]] = {}  # the node is kept: its id stays its own

    def of(self, loop: ast.For | ast.AsyncFor | ast.While) -> set[str]:
        body = self._run(loop.body)
        return set(body.reads & (body.stored | body.written))

    def _run(self, stmts: list[ast.stmt]) -> _Summary:
        out = _EMPTY
        for stmt in stmts:
            out = _then(out, self._stmt(stmt))
        return out

    def _stmt(self, stmt: ast.stmt) -> _Summary:
        done = self._done.get(id(stmt))
        if done is not None:
            return done[1]
        if type(stmt) is ast.For:  # Order.visit_For: the iterable, the index, then body and else in order
            head = Order(set(), branches=True)
            head.visit(stmt.iter)
            head.store(stmt.target)
            out = _then(_of_order(head), self._run(stmt.body + stmt.orelse))
        elif type(stmt) is ast.If:  # Order.visit_If with branches
            test = Order(set(), branches=True)
            test.visit(stmt.test)
            head, body, orelse = _of_order(test), self._run(stmt.body), self._run(stmt.orelse)
            out = _Summary(head.reads | ((body.reads | orelse.reads) - head.bound),
                           head.bound | (body.bound & orelse.bound), head.stored | body.stored | orelse.stored,
                           head.written | body.written | orelse.written)
        else:
            order = Order(set(), branches=True)
            order.visit(stmt)
            out = _of_order(order)
        self._done[id(stmt)] = (stmt, out)
        return out
