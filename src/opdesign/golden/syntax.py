"""Syntax-level counting over a golden file: the CANNBot-compatible signals.

Everything here works on an :mod:`ast` tree; nothing is imported or executed.
Names are syntax hints: ``np.matmul(a, b)``, ``torch.matmul`` and a bare
``matmul(a, b)`` all count as a matmul call, whatever the name is bound to.

Two counting scopes (source: anchors.md, "Decomposition estimator" and
"Design-parameter deriver"):

- :func:`count_signals` visits the body of the chosen function only; a nested
  ``def``, ``class`` or ``lambda`` counts zero, its own statement included, and
  every bare string-constant statement is skipped.
- :func:`effective_lines` counts statements recursively, nested functions
  included, docstrings excluded.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

MATMUL_NAMES = frozenset({"matmul", "mm", "bmm"})
EINSUM_NAMES = frozenset({"einsum"})
REDUCTION_NAMES = frozenset({"sum", "mean", "amax", "amin", "prod", "softmax", "logsumexp"})

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.comprehension)


class Signals(NamedTuple):
    """Lexical signals of one golden function (CANNBot estimator key names; the fields of
    :class:`opdesign.golden.models.GoldenSignals`)."""

    statements: int
    loops: int
    matmul_calls: int
    einsum_calls: int
    reduction_calls: int


def call_name(node: ast.AST) -> str | None:
    """Name a call is made through: ``f`` for ``f(...)``, ``matmul`` for ``x.y.matmul(...)``."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def is_matmul(node: ast.AST) -> bool:
    """``a @ b``, ``a @= b`` or a call named matmul / mm / bmm (einsum is counted apart)."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return True
    return call_name(node) in MATMUL_NAMES


def is_bare_string(node: ast.AST) -> bool:
    """A statement that is only a string constant (a docstring or a string used as a comment)."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes under ``node`` (itself excluded), not descending into nested def / class / lambda.

    The nested scope node itself is not yielded either: it counts zero.
    """
    return _walk(node, lambda child: isinstance(child, _SCOPES))


def _walk(node: ast.AST, skip: Callable[[ast.AST], bool]) -> Iterator[ast.AST]:
    """Pre-order walk below ``node`` that drops every subtree whose root ``skip`` accepts.

    Iterative, so a long expression chain cannot exhaust Python's recursion limit.
    """
    stack = [child for child in reversed(_children(node)) if not skip(child)]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child for child in reversed(_children(current)) if not skip(child))


def _children(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))``, without its generator per field (the estimator's hot loop)."""
    out: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend(item for item in value if isinstance(item, ast.AST))
    return out


def count_signals(function: FunctionNode) -> Signals:
    """CANNBot estimator signals of ``function``'s own body (anchors.md, decomposition estimator)."""
    statements = loops = matmul = einsum = reduction = 0
    for node in _walk(function, lambda child: isinstance(child, _SCOPES) or is_bare_string(child)):
        if isinstance(node, ast.stmt):
            statements += 1
        if isinstance(node, _LOOPS):
            loops += 1
        if is_matmul(node):
            matmul += 1
        name = call_name(node)
        if name in EINSUM_NAMES:
            einsum += 1
        elif name in REDUCTION_NAMES:
            reduction += 1
    return Signals(
        statements=statements,
        loops=loops,
        matmul_calls=matmul,
        einsum_calls=einsum,
        reduction_calls=reduction,
    )


def effective_lines(function: FunctionNode) -> int:
    """Statements under ``function``, nested functions included, docstrings excluded (deriver input)."""
    docstrings = {id(body[0]) for body in _bodies(function) if body and is_bare_string(body[0])}
    return sum(
        1
        for node in ast.walk(function)
        if node is not function and isinstance(node, ast.stmt) and id(node) not in docstrings
    )


def _bodies(function: FunctionNode) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.body


def top_level_functions(tree: ast.Module) -> dict[str, FunctionNode]:
    """Module-level ``def`` / ``async def`` by name (a later definition replaces an earlier one)."""
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def reachable_functions(function: FunctionNode, functions: dict[str, FunctionNode]) -> list[FunctionNode]:
    """``function`` followed by the module-level helpers it calls by bare name, transitively."""
    order = [function]
    seen = {id(function)}
    queue = [function]
    while queue:
        current = queue.pop(0)
        for node in ast.walk(current):
            name = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
            helper = functions.get(name) if name else None
            if helper is not None and id(helper) not in seen:
                seen.add(id(helper))
                order.append(helper)
                queue.append(helper)
    return order


def count_matmuls(functions: Iterable[FunctionNode]) -> int:
    """Matrix products (``@``, matmul / mm / bmm **and** einsum) anywhere under the given functions."""
    return sum(
        1
        for function in functions
        for node in ast.walk(function)
        if is_matmul(node) or call_name(node) in EINSUM_NAMES
    )
