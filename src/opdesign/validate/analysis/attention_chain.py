"""Whether kernel code is attention: the C1 -> V1 -> C2 chain, read from the data flow, never from names.

Attention is a matmul (C1, the scores), then softmax-like vector work on its result (an ``exp`` /
``exp2`` / ``softmax`` of a value computed from C1: V1), then a matmul one of whose operands is
computed from that (C2, the weighted values). A kernel that has no such chain (a hello-world add, a
layernorm, a plain matmul, a softmax alone, two matmuls in a row) is not attention, and the rules
registered with ``attention_only=True`` are skipped on it (:func:`opdesign.validate.engine`'s kernel
path). The flow is followed through assignments (``s = pypto.matmul(...)``; ``p = pypto.exp(s - m)``),
subscript writes (``buf[:] = value``), ``assemble(src, offsets, dst)`` (dst takes src's marks) and,
flow-insensitively, around loops (two passes), so a chain split across helper functions of the same
file is found when the values pass through names.
"""

from __future__ import annotations

import ast

from opdesign.validate.analysis import astnodes
from opdesign.validate.parse.pseudocode import Program, call_name

MATMULS = frozenset({"matmul", "batch_matmul", "scaled_mm", "transposed_batchmatmul", "bmm"})
SOFTMAX = frozenset({"exp", "exp2", "softmax", "online_softmax"})
C1, V1 = "C1", "V1"


class _Chain:
    def __init__(self, functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
                 returns: dict[str, frozenset[str]]) -> None:
        self.marks: dict[str, frozenset[str]] = {}
        self.found = False
        self.functions = functions  # the program's functions by name (helpers the kernel calls)
        self.returns = returns  # what each helper's return values carry (shared by the chains)

    def run(self, statements: list[ast.stmt]) -> None:
        for _ in range(2):  # a second pass carries marks around loops (a value bound after its use)
            for stmt in statements:
                self.statement(stmt)
                if self.found:
                    return

    def helper(self, name: str, inner: frozenset[str]) -> frozenset[str]:
        """A call of a helper of the file: what its return value carries; an argument after V1 passed to a
        helper that runs a matmul is C2."""
        fn = self.functions[name]
        if name not in self.returns:
            self.returns[name] = frozenset()  # a recursive helper adds nothing
            sub = _Chain(self.functions, self.returns)
            sub.run([n for n in astnodes.walk(fn) if isinstance(n, ast.stmt) and n is not fn])
            self.found |= sub.found
            self.returns[name] = sub.marks.get("<return>", frozenset())
        if V1 in inner and any(isinstance(n, ast.Call) and call_name(n) in MATMULS for n in astnodes.walk(fn)):
            self.found = True
        return self.returns[name]

    def of(self, expr: ast.AST) -> frozenset[str]:
        """The marks of an expression's value; records a C2 (a matmul fed by V1) as found."""
        if isinstance(expr, ast.Name):
            return self.marks.get(expr.id, frozenset())
        if isinstance(expr, ast.Call):
            name = call_name(expr)
            parts = [self.of(a) for a in expr.args] + [self.of(k.value) for k in expr.keywords]
            inner = frozenset().union(*parts) if parts else frozenset()
            if isinstance(expr.func, ast.Attribute):  # ``s.exp()`` / ``x.matmul(y)``: the receiver too
                inner |= self.of(expr.func.value)
            if name in MATMULS:
                if V1 in inner:
                    self.found = True
                return inner | {C1}
            if name in SOFTMAX and C1 in inner:
                return inner | {V1}
            if isinstance(expr.func, ast.Name) and name in self.functions:
                return inner | self.helper(name, inner)
            return inner
        out: frozenset[str] = frozenset()
        for child in astnodes.children(expr):
            if isinstance(child, ast.expr):
                out |= self.of(child)
        return out

    def store(self, target: ast.AST, marks: frozenset[str]) -> None:
        base = target
        while isinstance(base, (ast.Subscript, ast.Attribute, ast.Starred)):
            base = base.value
        if isinstance(base, ast.Name):
            self.marks[base.id] = self.marks.get(base.id, frozenset()) | marks
        elif isinstance(base, (ast.Tuple, ast.List)):
            for elt in base.elts:
                self.store(elt, marks)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            marks = self.of(stmt.value)
            for t in stmt.targets:
                self.store(t, marks)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
            self.store(stmt.target, self.of(stmt.value) | self.of(stmt.target))
        elif isinstance(stmt, (ast.Expr, ast.Return)) and stmt.value is not None:
            marks = self.of(stmt.value)
            for call in astnodes.walk(stmt.value):
                if isinstance(call, ast.Call) and call_name(call) == "assemble" and len(call.args) > 2:
                    self.store(call.args[2], self.of(call.args[0]))
            if isinstance(stmt, ast.Return):
                self.marks["<return>"] = self.marks.get("<return>", frozenset()) | marks
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.store(stmt.target, self.of(stmt.iter))


def has_attention_chain(program: Program) -> bool:
    """Whether the program's code holds a C1 -> V1 -> C2 chain (see the module docstring)."""
    functions = {n.stmt.name: n.stmt for n, _loops in program.walk()
                 if isinstance(n.stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
    chain = _Chain(functions, {})
    chain.run([node.stmt for node, _loops in program.walk() if node.stmt is not None])
    return chain.found
