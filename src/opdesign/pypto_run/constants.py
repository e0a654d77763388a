"""Compile-time constants of a generated kernel, read without running it (``ast``).

Used by ``opdesign verify`` to name the kernel line a framework error came from
(:func:`opdesign.pypto_run.selfcheck.explain_unlocated`) and by the validator's kernel / design
cross-check (:mod:`opdesign.validate.rules.crosscheck`), so both read one set of values.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["eval_constant", "module_constants"]


def module_constants(tree: ast.Module) -> dict[str, tuple[Any, int]]:
    """Module-level ``NAME = <constant expression>`` of the kernel, evaluated, with their lines."""
    env: dict[str, Any] = {}
    lines: dict[str, tuple[Any, int]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            value = eval_constant(node.value, env)
            if value is not None:
                env[name] = value
                lines[name] = (value, node.lineno)
    return lines


def eval_constant(node: ast.AST, env: dict[str, Any]) -> Any:
    """An int / float / list expression of constants and known names, else None."""
    try:
        code = compile(ast.Expression(node), "<const>", "eval")
    except (TypeError, ValueError):
        return None
    if any(n not in env for n in code.co_names):
        return None
    try:
        value = eval(code, {"__builtins__": {}}, dict(env))  # noqa: S307 - names restricted to kernel constants
    except Exception:  # noqa: BLE001 - not a constant expression
        return None
    return value if isinstance(value, (int, float, list, tuple)) and not isinstance(value, bool) else None
