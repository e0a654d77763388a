"""A PyPTO kernel ``.py`` as a :class:`~opdesign.validate.parse.pseudocode.Program` the code rules walk.

``opdesign validate kernel.py`` (and ``opdesign validate DIR`` for each ``*_kernel.py`` /
``*_impl.py`` of DIR) reads the file with Python's ``ast``: lines are the file's own. The program
holds what runs on the device side:

- module-level imports and assignments (the UPPER_CASE constants the rules treat as static);
- every ``jit``-decorated function and the module functions it calls, transitively (a helper
  that builds part of the graph is kernel code too);

and leaves out host code: other functions (the torch golden, ``make_case``), classes and the
``if __name__ == "__main__":`` block, so a ``for b in range(batch)`` of the golden is not a
symbolic range.

Which rules run on a kernel file: the rules registered with ``kernel=True`` (by default the
pseudocode family, :attr:`opdesign.validate.api.Rule.on_kernel`; ``opdesign rules ID`` says
it). A lone ``.py`` has no ``opdesign:`` block, no chapters and no interface file: rules that read
those see an empty document and stay quiet (OD-PC-01 looks for the pseudocode chapter and finds
none; C-LOOP-05 skips its block half). The skeleton a rule applies to is the first ``SK-nn`` id
of the module docstring (``bd.skeleton``); a kernel naming none is judged as an unknown skeleton
(the SK-01 rules apply, as for a hand-written design without a selection).

Per rule, on a lone ``.py`` (decided by what each rule reads; checked by running every corpus and
generated kernel clean, tests/unit/validate/test_kernel_lint.py):

- run as on a design: OD-PC-03 (scopes; SK-02's matmul-in-scope exception from the declared
  skeleton), OD-PC-04, OD-PC-05 (always: a kernel file has no block that could name another
  release), C-SYM-06, C-SYM-07, SK-01-R1 / R2 / R3 (accumulator names of the SK-01 card: oi, li, mi),
  AT-17-R4 / SK-02-R3 / R5 / R6 / SK-16-R* when the docstring names that skeleton, OD-KN-01..07;
- the code half only: C-LOOP-05 (the block's ``unroll_list`` is absent);
- quiet: OD-PC-01 (no pseudocode chapter), OD-PC-02 (a .py that does not parse is OD-KN-01),
  SK-01-P2 / P3 / P4 and SK-01-R7 / R8 (they need the block's ``form``, ``kv_cache``, ``quant``);
- not run (``kernel=False``: the document, interface and number families): OD-DOC-*, OD-IF-*,
  OD-NUM-*, C-TILE-*, SK-01-R6 (FP32 state in the block and tables; on code OD-KN-03 checks it).

A file that does not parse is one OD-KN-01 finding at the syntax error's line; nothing else is
checked (reading a real ``.py`` by indentation, as pseudocode is, would guess).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from opdesign.validate.parse.document import Document, Fence, parse
from opdesign.validate.parse.pseudocode import Node, Program, _constants, _from_ast, _kernel
from opdesign.validate.analysis import astnodes

#: File names ``opdesign validate DIR`` checks besides DESIGN.md (glob patterns, DIR level only).
KERNEL_GLOBS = ("*_kernel.py", "*_impl.py")
SYNTAX_RULE = "OD-KN-01"
_SKELETON = re.compile(r"\bSK-\d{2}\b")


@dataclass
class KernelSource:
    """A kernel file read for the rules: the program (None when it does not parse)."""

    text: str
    program: Program | None
    syntax_error: tuple[int, str] | None
    skeleton: str | None
    document: Document


def _is_jit(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in fn.decorator_list)


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def device_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module statements that describe the device side (see the module docstring), in file order."""
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    keep: set[str] = set()
    todo = [name for name, fn in functions.items() if _is_jit(fn)]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        for node in astnodes.walk(functions[name]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                todo.append(node.func.id)
    out = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name in keep:
                out.append(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign)):
            out.append(stmt)
        elif isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
            out.append(stmt)  # a module-level call (e.g. pypto.set_*): kernel configuration
        elif isinstance(stmt, ast.If) and not _is_main_guard(stmt):
            out.append(stmt)
    return out


def declared_skeleton(tree: ast.Module) -> str | None:
    """The first ``SK-nn`` id of the module docstring, or None."""
    doc = ast.get_docstring(tree) or ""
    found = _SKELETON.search(doc)
    return found.group(0) if found else None


def read_kernel(text: str) -> KernelSource:
    """Parse kernel source into a program over its device statements (file lines)."""
    fence = Fence(info="python", content=text, first_line=1, chapter="pseudocode")
    document = parse("")
    try:
        tree = astnodes.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        lineno = getattr(err, "lineno", None) or 1
        message = getattr(err, "msg", None) or str(err) or type(err).__name__
        return KernelSource(text, None, (max(lineno, 1), message), None, document)
    nodes: list[Node] = _from_ast(device_statements(tree), 1)
    program = Program(fence=fence, parsed=True, syntax_error=None, nodes=nodes, kernel=_kernel(nodes),
                      constants=_constants(nodes))
    return KernelSource(text, program, None, declared_skeleton(tree), document)
