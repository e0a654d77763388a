"""The pseudocode chapter as a small statement tree the pseudocode rules walk.

The fenced code is read with Python's ``ast`` when it parses. When it does
not (pseudo-Python with ``...`` lines, a missing bracket), it is read by
indentation instead: each logical line becomes a node (compound headers
ending in ``:`` open a block) and is parsed on its own where possible, so the
rules still see loops, calls and assignments with the right lines.

Which fences: every fenced block of the pseudocode chapter that defines a
function decorated with ``...jit...`` (a kernel block) is read, and the rules
run on each (:func:`read_programs`), so a small decoy kernel block cannot hide
the real one; without a kernel block, the longest fence is read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from opdesign.validate.analysis import astnodes
from opdesign.validate.parse.document import Document, Fence

COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.FunctionDef,
            ast.AsyncFunctionDef, ast.Try, ast.ClassDef)
MAX_FALLBACK_JOIN = 50  # physical lines joined into one logical line at most
MAX_KERNELS = 16  # kernel blocks checked at most (the rest is reported by the engine, OD-DOC-10)
MAX_FALLBACK_DEPTH = 100  # block nesting kept when reading by indentation (as Python's tokenizer)


@dataclass(eq=False)
class Node:
    """One statement (a compound statement's header) at a file line; ``body`` holds nested nodes."""

    line: int
    kind: str  # for | while | if | else | with | def | stmt
    stmt: ast.stmt | None
    text: str = ""
    body: list[Node] = field(default_factory=list)
    _calls: list[ast.Call] | None = field(default=None, repr=False)

    def exprs(self) -> list[ast.AST]:
        """The expressions this node evaluates itself (a compound statement: its header only)."""
        s = self.stmt
        if s is None:
            return []
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return [s.target, s.iter]
        if isinstance(s, (ast.If, ast.While)):
            return [s.test]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            return [item.context_expr for item in s.items]
        if isinstance(s, COMPOUND):
            return []
        return [s]

    def calls(self) -> list[ast.Call]:
        """Calls this node evaluates itself, outermost first (computed once)."""
        if self._calls is None:
            self._calls = [n for e in self.exprs() for n in astnodes.walk(e) if isinstance(n, ast.Call)]
        return self._calls

    @cached_property
    def loop_kind(self) -> str | None:
        """``range`` | ``pypto.loop`` | ``loop_unroll`` | ``other`` for a for-loop, else None (read once:
        a node's statement is never replaced)."""
        if not isinstance(self.stmt, (ast.For, ast.AsyncFor)):
            return None
        it = self.stmt.iter
        if isinstance(it, ast.Call):
            name = dotted(it.func)
            if name == "range":
                return "range"
            if name.endswith("loop_unroll"):
                return "loop_unroll"
            if name.split(".")[-1] == "loop":
                return "pypto.loop"
        return "other"


def dotted(expr: ast.AST) -> str:
    """``pypto.experimental.set_operation_options`` for an attribute chain, ``""`` otherwise."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return ""


def call_name(call: ast.Call) -> str:
    """Last name of the called function: ``matmul`` for ``pypto.matmul(...)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def is_constant_name(name: str) -> bool:
    """UPPER_CASE names are module constants (``Q_TILE``, ``KV_TILES``)."""
    return any(c.isalpha() for c in name) and name == name.upper()


def is_static(expr: ast.AST) -> bool:
    """An int literal, an UPPER_CASE constant, or arithmetic of those, read without the program's
    bindings; the rules read a program's values with :func:`opdesign.validate.analysis.values.read_values`,
    which also knows lower-case constants (``q_tile = 128``) and what is dynamic."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Name):
        return is_constant_name(expr.id)
    if isinstance(expr, ast.BinOp):
        return is_static(expr.left) and is_static(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return is_static(expr.operand)
    return False


def int_value(expr: ast.AST | None, constants: dict[str, int] | None = None) -> int | None:
    """Value of an int literal, ``-literal`` or known constant; None otherwise."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        inner = int_value(expr.operand, constants)
        return None if inner is None else (-inner if isinstance(expr.op, ast.USub) else inner)
    if isinstance(expr, ast.Name) and constants and expr.id in constants:
        return constants[expr.id]
    return None


def unparse(expr: ast.AST) -> str:
    """Source text of an expression for a message (``ast.unparse``); an expression nested too deep for
    ``ast.unparse`` (a sum of hundreds of terms) is named by its size instead."""
    try:
        return ast.unparse(expr)
    except RecursionError:
        return f"an expression of {sum(1 for _ in astnodes.walk(expr))} nodes (nested {nesting(expr)} deep)"


def nesting(tree: ast.AST) -> int:
    """Depth of the deepest node under ``tree`` (explicit stack: no recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(child, depth + 1) for child in astnodes.children(node)]
    return deepest


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


@dataclass
class Program:
    """The chosen pseudocode fence as a statement tree."""

    fence: Fence
    parsed: bool
    syntax_error: tuple[int, str] | None
    nodes: list[Node]
    kernel: Node | None
    constants: dict[str, int]
    #: every kernel of a kernel file (:func:`opdesign.validate.parse.kernel_source.find_kernels`), ``kernel`` first
    kernels: list[Node] = field(default_factory=list)
    #: names the kernel file binds at module level, statements kept or not (``*``: a star import)
    module_bound: frozenset[str] = frozenset()
    _values: Any = field(default=None, repr=False, compare=False)  # opdesign.validate.analysis.values.read_values
    #: the whole walk, listed on its first use (not an init field: ``dataclasses.replace`` starts afresh)
    _walked: list[tuple[Node, tuple[Node, ...]]] | None = field(default=None, init=False, repr=False, compare=False)
    #: the walk with the kernel facts at each node (:func:`opdesign.validate.analysis.codeflow.walk`), likewise
    _flowed: list[Any] | None = field(default=None, init=False, repr=False, compare=False)

    def walk(self, nodes: list[Node] | None = None,
             loops: tuple[Node, ...] = ()) -> Iterator[tuple[Node, tuple[Node, ...]]]:
        """Every node in textual order with the for-loops enclosing it (outermost first). The walk of the
        whole program is listed once (the rules walk it many times; its nodes are never edited)."""
        if nodes is None and not loops:
            if self._walked is None:
                self._walked = list(self._walk(self.nodes, ()))
            return iter(self._walked)
        return self._walk(self.nodes if nodes is None else nodes, loops)

    def _walk(self, nodes: list[Node], loops: tuple[Node, ...]) -> Iterator[tuple[Node, tuple[Node, ...]]]:
        for node in nodes:
            yield node, loops
            inner = loops + (node,) if node.loop_kind else loops
            yield from self._walk(node.body, inner)

    def calls(self) -> Iterator[tuple[ast.Call, Node, tuple[Node, ...]]]:
        for node, loops in self.walk():
            for call in node.calls():
                yield call, node, loops

    def call_line(self, call: ast.AST, node: Node) -> int:
        """File line of an expression inside ``node`` (multi-line statements included)."""
        if self.parsed and hasattr(call, "lineno"):
            return self.fence.first_line + call.lineno - 1
        return node.line

    def kv_and_q_loops(self) -> tuple[Node | None, Node | None]:
        """(KV-tile loop, Q-tile loop): the innermost loop around the first matmul, and its parent loop.

        The ``for u in range(factor)`` body of a ``for base, factor in pypto.loop_unroll(...)`` loop is
        part of that loop: the KV-tile loop is then the ``loop_unroll`` one.
        """
        for call, _node, loops in self.calls():
            if call_name(call) == "matmul" and loops:
                if len(loops) > 1 and loops[-1].loop_kind == "range" and loops[-2].loop_kind == "loop_unroll":
                    loops = loops[:-1]
                return loops[-1], (loops[-2] if len(loops) > 1 else None)
        return None, None


def _from_ast(stmts: list[ast.stmt], first_line: int) -> list[Node]:
    nodes = []
    for s in stmts:
        kind = {ast.For: "for", ast.AsyncFor: "for", ast.While: "while", ast.If: "if", ast.With: "with",
                ast.AsyncWith: "with", ast.FunctionDef: "def", ast.AsyncFunctionDef: "def"}.get(type(s), "stmt")
        node = Node(line=first_line + s.lineno - 1, kind=kind, stmt=s)
        children: list[ast.stmt] = []
        for attr in ("body", "orelse", "finalbody"):
            children += getattr(s, attr, None) or []
        for handler in getattr(s, "handlers", None) or []:
            children += handler.body
        node.body = _from_ast(children, first_line)
        nodes.append(node)
    return nodes


def _logical_lines(content: str) -> Iterator[tuple[int, int, str]]:
    """(0-based line, indent, text) of each logical line; brackets join physical lines."""
    lines = content.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        text = raw.strip()
        start = i
        i += 1
        if not text or text.startswith("#"):
            continue
        depth = sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        while depth > 0 and i < len(lines) and i - start < MAX_FALLBACK_JOIN:
            nxt = lines[i].strip()
            text += " " + nxt
            depth += sum(nxt.count(c) for c in "([{") - sum(nxt.count(c) for c in ")]}")
            i += 1
        yield start, len(raw) - len(raw.lstrip()), text


def _parse_line(text: str) -> tuple[str, ast.stmt | None]:
    body = text.split(" #", 1)[0].rstrip() if " #" in text else text
    if body.endswith(":"):
        head = body[:-1].strip()
        if head in ("else", "try", "finally") or head.startswith(("except", "else ")):
            return "else", None
        if head.startswith("elif "):
            body = "if " + head[5:] + ":"
        source = body + " pass"
    else:
        source = body
    try:
        parsed = ast.parse(source).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ("block" if body.endswith(":") else "stmt"), None
    stmt = parsed[0] if parsed else None
    kind = "stmt"
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        kind = "for"
    elif isinstance(stmt, (ast.If, ast.While, ast.With, ast.FunctionDef, ast.AsyncFunctionDef)):
        kind = {ast.If: "if", ast.While: "while", ast.With: "with"}.get(type(stmt), "def")
    elif body.endswith(":"):
        kind = "block"
    return kind, stmt


def _from_indentation(content: str, first_line: int) -> list[Node]:
    root: list[Node] = []
    stack: list[tuple[int, list[Node]]] = [(-1, root)]
    for line, indent, text in _logical_lines(content):
        kind, stmt = _parse_line(text)
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        if len(stack) > MAX_FALLBACK_DEPTH:  # deeper lines join the deepest block kept
            stack = stack[:MAX_FALLBACK_DEPTH]
        node = Node(line=first_line + line, kind=kind, stmt=stmt, text=text)
        stack[-1][1].append(node)
        if text.split(" #", 1)[0].rstrip().endswith(":"):
            stack.append((indent, node.body))
    return root


def _jit_kernel(nodes: list[Node]) -> Node | None:
    """The first top-level function decorated with ``...jit...``, or None."""
    for n in nodes:
        decorators = getattr(n.stmt, "decorator_list", []) if n.kind == "def" else []
        if any("jit" in ast.unparse(d) for d in decorators):
            return n
    for i, n in enumerate(nodes):  # indentation mode: decorators are separate lines
        if n.kind == "def" and i and nodes[i - 1].text.startswith("@") and "jit" in nodes[i - 1].text:
            return n
    return None


def _kernel(nodes: list[Node]) -> Node | None:
    found = _jit_kernel(nodes)
    if found is not None:
        return found
    defs = [n for n in nodes if n.kind == "def"]
    return next((n for n in defs if any(c.kind == "for" for c in _descendants(n))), defs[0] if defs else None)


def _descendants(node: Node) -> Iterator[Node]:
    for child in node.body:
        yield child
        yield from _descendants(child)


def _constants(nodes: list[Node]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in nodes:
        s = n.stmt
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            value = int_value(s.value)
            if value is not None and is_constant_name(s.targets[0].id):
                out[s.targets[0].id] = value
    return out


def choose_fence(doc: Document) -> Fence | None:
    """The first kernel-looking fence of the pseudocode chapter, else its longest fence (see :func:`read_programs`)."""
    fences = [f for f in doc.fences if f.chapter == "pseudocode"]
    if not fences:
        return None
    jit = [f for f in fences if "def " in f.content and "jit" in f.content]
    return (jit or sorted(fences, key=lambda f: -len(f.content.splitlines())))[0]


def _read(fence: Fence) -> Program:
    try:
        tree = astnodes.parse(fence.content)
        nodes, parsed, error = _from_ast(tree.body, fence.first_line), True, None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        lineno = getattr(err, "lineno", None) or 1
        message = getattr(err, "msg", None) or str(err) or type(err).__name__
        nodes, parsed = _from_indentation(fence.content, fence.first_line), False
        error = (fence.first_line + max(lineno, 1) - 1, message)
    return Program(fence=fence, parsed=parsed, syntax_error=error, nodes=nodes, kernel=_kernel(nodes),
                   constants=_constants(nodes))


def read_programs(doc: Document) -> tuple[list[Program], int]:
    """(programs, kernel blocks found): every fence of the pseudocode chapter that defines a
    ``jit``-decorated function, in document order (at most :data:`MAX_KERNELS`); without one, the
    longest fence alone; ``[]`` when the chapter has no fenced code."""
    fences = [f for f in doc.fences if f.chapter == "pseudocode"]
    if not fences:
        return [], 0
    kernels: list[Program] = []
    found = 0
    for fence in fences:
        if "def" not in fence.content or "jit" not in fence.content:
            continue
        if found >= MAX_KERNELS:
            found += 1
            continue
        program = _read(fence)
        if _jit_kernel(program.nodes) is not None:
            kernels.append(program)
            found += 1
    if kernels:
        return kernels, found
    return [_read(choose_fence(doc))], 0


def read_program(doc: Document) -> Program | None:
    """The first pseudocode program of a document (see :func:`read_programs`), or None without fenced code."""
    programs, _found = read_programs(doc)
    return programs[0] if programs else None


ALLOCATORS = frozenset({"tensor", "full", "zeros", "empty", "ones"})


def allocation(node: Any, names: set[str]) -> Any:
    """The allocation call of ``acc = pypto.tensor|full|zeros(...)`` for an accumulator name, else None."""
    s = node.stmt
    if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id in names and isinstance(s.value, ast.Call) and call_name(s.value) in ALLOCATORS):
        return s.value
    return None
