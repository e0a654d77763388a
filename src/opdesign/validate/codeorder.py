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

from opdesign.validate.pseudocode import Program
from opdesign.validate import astnodes


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

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda = _scope
    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Global(self, node: ast.Global) -> None:
        self.bound |= set(node.names)

    visit_Nonlocal = visit_Global


def defined_names(program: Program, assigned: bool = False) -> set[str]:
    """Builtins, imports and the functions / classes of the module (bound before its statements run);
    ``assigned`` adds every name a module-level statement stores (:func:`module_names`)."""
    names: set[str] = set(dir(builtins))
    for node in program.nodes:
        s = node.stmt
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in s.names}
        elif assigned and s is not None:
            names |= {n.id for n in astnodes.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def module_names(program: Program) -> set[str]:
    """Every name bound at module level: :func:`defined_names` plus the names its statements assign."""
    return defined_names(program, assigned=True)


def carried(loop: ast.For | ast.AsyncFor | ast.While) -> set[str]:
    """Names a loop body reads before this iteration has surely bound them, and assigns somewhere:
    values carried from one iteration to the next (an ``if`` binds a name surely only when both
    branches do: the SSA first-tile form ``if kj == 0: m = m_blk`` / ``else: ... m ...`` carries m)."""
    order = Order(set(), branches=True)
    for stmt in loop.body:
        order.visit(stmt)
    return {name for name, _line in order.reads} & (set(order.first_bind) | order.written)
