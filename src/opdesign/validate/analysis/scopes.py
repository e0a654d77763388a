"""Sub-graph scopes of a kernel (AT-21): which scope each call runs in, and scopes never closed.

A scope opens with ``pypto.set_pass_options(sg_set_scope=n)`` (the PyPTO 0.2.0 idiom) or the card
notation ``sg_set_scope(n)``, and closes with scope ``-1``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from opdesign.validate.parse.pseudocode import Node, Program, call_name, int_value, keyword


@dataclass
class Scopes:
    """``sg_set_scope`` analysis (AT-21): the scope each call runs in, scopes never closed, and matmuls
    run inside an open scope."""

    of_call: dict[int, int | None]  # id(call) -> open scope value (None: outside any scope)
    unclosed: list[tuple[int, int, str]]  # (line of sg_set_scope(n), n, why)
    cube_in_scope: list[tuple[int, int, int]] = field(default_factory=list)  # (matmul line, n, line of sg_set_scope(n))
    #: lines of unclosed scopes that are the one scope of their function: opened in its body (outside
    #: any loop), closed there after the loops or never, no other scope set anywhere in it
    #: (:func:`_one_function_scope`): kept open over the whole function on purpose
    whole_function: set[int] = field(default_factory=set)


def scope_value(call: ast.Call, constants: dict[str, Any]) -> int | None:
    """The scope a call sets: ``pypto.set_pass_options(sg_set_scope=n)`` (the PyPTO 0.2.0 idiom) or the
    card notation ``sg_set_scope(n)`` (not a PyPTO function: the API rule reports it); None otherwise."""
    name = call_name(call)
    if name == "set_pass_options":
        arg = keyword(call, "sg_set_scope")
        return int_value(arg, constants) if arg is not None else None
    if name == "sg_set_scope" and call.args:
        return int_value(call.args[0], constants)
    return None


#: Loops that are a scope boundary (AT-21-R4: a scope never crosses a ``pypto.loop``); a Python
#: ``range`` (or any other Python ``for``) is unrolled while tracing and is no boundary.
BOUNDARY_LOOPS = ("pypto.loop", "loop_unroll")


def _one_function_scope(program: Program, fn: Node) -> bool:
    """Whether the function sets exactly one scope, in its own body outside any loop, and closes it only
    there (after the loops) or never: ``sg_set_scope(10000)`` ... loops ... ``sg_set_scope(-1)``."""
    top = {id(n) for n in fn.body}
    values = [(scope_value(c, program.constants), id(n) in top) for n, _loops in program.walk(fn.body)
              for c in n.calls()]
    values = [(v, at_top) for v, at_top in values if v is not None]
    opened = [v for v, _t in values if v != -1]
    return (len(opened) == 1 and all(at_top for _v, at_top in values) and values[0][0] != -1
            and all(v == -1 for v, _t in values[1:]))


def scopes(program: Program, cube_in_scope: bool = False) -> Scopes:
    """Walk the statements in order: a scope ``n`` opens, scope ``-1`` closes (see :func:`scope_value`).

    A scope still open at another ``sg_set_scope(n)``, on entering or leaving a ``pypto.loop`` /
    ``loop_unroll`` / ``while`` body, or at the end of a function is reported once (at the line
    that opened it) and treated as closed from there on. A Python ``range`` loop body belongs to the
    scope around it (the loop is unrolled while tracing). A matmul inside an open scope is listed
    in ``cube_in_scope`` (the first one per scope; unless ``cube_in_scope`` is allowed) and the
    scope stays open.
    """
    result = Scopes(of_call={}, unclosed=[])

    def close(state: list, why: str) -> None:
        if state[0] is not None:
            result.unclosed.append((state[0][1], state[0][0], why))
            state[0] = None

    def visit(nodes: list[Node], state: list) -> None:
        for node in nodes:
            for call in node.calls():
                name = call_name(call)
                if name == "matmul" and not cube_in_scope and state[0] is not None \
                        and all(opened != state[0][1] for _l, _v, opened in result.cube_in_scope):
                    result.cube_in_scope.append((program.call_line(call, node), state[0][0], state[0][1]))
                result.of_call[id(call)] = state[0][0] if state[0] else None
                value = scope_value(call, program.constants)
                if value is not None:
                    if value == -1:
                        state[0] = None
                    else:
                        close(state, f"before sg_set_scope at line {program.call_line(call, node)}")
                        state[0] = (value, program.call_line(call, node))
            boundary = node.kind == "while" or node.loop_kind in BOUNDARY_LOOPS
            if boundary or node.kind == "def":
                close(state, f"before the loop at line {node.line}" if node.kind != "def" else "before the function")
                inner: list = [None]
                if node.kind == "def" and _one_function_scope(program, node):
                    first = len(result.unclosed)
                    visit(node.body, inner)
                    close(inner, "by the end of the function")
                    result.whole_function |= {line for line, _v, _w in result.unclosed[first:]}
                    continue
                visit(node.body, inner)
                close(inner, "by the end of the loop body" if node.kind != "def" else "by the end of the function")
            else:
                visit(node.body, state)

    top: list = [None]
    visit(program.nodes, top)
    close(top, "by the end of the code")
    return result
