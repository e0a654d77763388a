"""A PyPTO kernel ``.py`` as a :class:`~opdesign.validate.parse.pseudocode.Program` the code rules walk.

``opdesign validate kernel.py`` (and ``opdesign validate DIR`` for each ``*_kernel.py`` /
``*_impl.py`` of DIR) reads the file with Python's ``ast``: lines are the file's own. The program
holds what runs on the device side:

- module-level imports and assignments (the UPPER_CASE constants the rules treat as static);
- every top-level statement that holds a kernel (:func:`find_kernels`), at any depth: a function
  decorated with ``@pypto.frontend.jit`` (or a ``jit`` imported from pypto, an alias ``_JIT =
  pypto.frontend.jit(...)``, or wrapped as ``pypto.frontend.jit(...)(fn)``) in a factory, a closure,
  a class or the main guard; a ``with pypto.function(...)`` body; a function that calls
  ``pypto.loop`` / ``loop_unroll`` itself. The whole holder is kept (a factory's ``q_tile = 128`` is
  the kernel's constant), and the module functions the kept statements call, transitively (a helper
  that builds part of the graph is kernel code too);

and leaves out host code: other functions (the torch golden, ``make_case``), classes and the
``if __name__ == "__main__":`` block when they hold no kernel, so a ``for b in range(batch)`` of the
golden is not a symbolic range. A ``jit`` of another package (``pypto_pro.language``'s ``pl.jit``,
``torch.jit``) is not a PyPTO kernel.

A file with no kernel in any shape gets one OD-KN-08 info at line 1 naming the kernel rules that did
not run and why (``the file does not import pypto``; another package's ``jit``); the rules that read
the file as a whole still run (OD-PC-05: the pypto names it uses).

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

from opdesign.validate.analysis import astnodes
from opdesign.validate.parse.document import Document, Fence, parse
from opdesign.validate.parse.pseudocode import Node, Program, _constants, _from_ast, dotted

#: File names ``opdesign validate DIR`` checks besides DESIGN.md (glob patterns, DIR level only).
KERNEL_GLOBS = ("*_kernel.py", "*_impl.py")
SYNTAX_RULE = "OD-KN-01"
NO_KERNEL_RULE = "OD-KN-08"
_SKELETON = re.compile(r"\bSK-\d{2}\b")


@dataclass
class KernelSource:
    """A kernel file read for the rules: the program (None when it does not parse)."""

    text: str
    program: Program | None
    syntax_error: tuple[int, str] | None
    skeleton: str | None
    document: Document
    imports_pypto: bool = True
    #: decorators called ``jit`` that are not PyPTO's (``pl.jit`` of ``pypto_pro.language``)
    other_jits: tuple[str, ...] = ()


#: decorators named ``jit`` that are not PyPTO's
_OTHER_JIT_ROOTS = frozenset({"torch", "numba", "jax", "tf", "tensorflow", "triton", "cupy"})


def _is_jit(fn: ast.FunctionDef | ast.AsyncFunctionDef, names: _Names | None = None) -> bool:
    """Decorated with ``@pypto.frontend.jit(...)`` or a ``jit`` imported from pypto (any alias); not
    ``torch.jit`` nor the ``jit`` of another package (``pypto_pro.language``, which 0.2.0 does not ship).
    Without ``names`` (the file's PyPTO imports): any decorator called ``jit`` outside the known others."""
    for d in fn.decorator_list:
        name = dotted(d.func if isinstance(d, ast.Call) else d)
        root, _dot, last = name.rpartition(".")
        if not last.endswith("jit"):
            continue
        if names is None:
            if name.split(".")[0] not in _OTHER_JIT_ROOTS:
                return True
        elif ((root and root.split(".")[0] in names.modules)
              or (not root and names.functions.get(name, "").endswith("jit"))):
            return True
    for d in fn.decorator_list:  # ``_JIT = pypto.frontend.jit(...)`` then ``@_JIT``
        if names is not None and dotted(d.func if isinstance(d, ast.Call) else d) in names.jit_aliases:
            return True
    return False


def _jit_call(call: ast.AST, names: _Names) -> bool:
    """``pypto.frontend.jit(...)`` (or an imported ``jit``) as an expression."""
    if not isinstance(call, ast.Call):
        return False
    name = dotted(call.func)
    root, _dot, last = name.rpartition(".")
    return last.endswith("jit") and ((root and root.split(".")[0] in names.modules)
                                     or (not root and names.functions.get(name, "").endswith("jit")))


def _jit_wrapped(tree: ast.Module, names: _Names) -> set[str]:
    """Names of functions wrapped by a call of jit instead of a decorator: ``pypto.frontend.jit(...)(fn)``,
    ``pypto.frontend.jit(fn)``, ``_JIT(fn)`` of an alias."""
    out: set[str] = set()
    for node in astnodes.walk(tree):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Name):
            continue
        if _jit_call(node.func, names) or dotted(node.func) in names.jit_aliases or (
                _jit_call(node, names) and not node.keywords and len(node.args) == 1):
            out.add(node.args[0].id)
    return out


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = stmt.test if isinstance(stmt, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


@dataclass(frozen=True)
class _Names:
    """How the file names PyPTO: module aliases (``pypto``, ``pp``) and functions imported from it."""

    modules: frozenset[str]
    functions: dict[str, str]  # local name -> PyPTO name (``from pypto import loop as ploop``)
    jit_aliases: frozenset[str] = frozenset()  # names bound to a jit decorator (``_JIT = pypto.frontend.jit(...)``)

    def calls(self, call: ast.Call, *wanted: str) -> bool:
        """Whether ``call`` calls one of the PyPTO functions ``wanted`` (``loop``, ``function``)."""
        name = dotted(call.func)
        root, _dot, last = name.rpartition(".")
        if root:
            return last in wanted and root.split(".")[0] in self.modules
        return self.functions.get(name) in wanted


def _pypto_names(tree: ast.Module) -> _Names:
    modules, functions = {"pypto"}, {}
    for node in astnodes.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "pypto"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pypto":
            for a in node.names:
                functions[a.asname or a.name] = a.name
                if node.module == "pypto" or a.name in ("frontend", "experimental"):
                    modules.add(a.asname or a.name)  # from pypto import frontend
    names = _Names(frozenset(modules), functions)
    aliases = {t.id for node in astnodes.walk(tree) if isinstance(node, ast.Assign) and _jit_call(node.value, names)
               for t in node.targets if isinstance(t, ast.Name)}
    return _Names(frozenset(modules), functions, frozenset(aliases))


#: the three shapes of a kernel (:func:`find_kernels`)
KERNEL_SHAPES = ("@pypto.frontend.jit function", "with pypto.function(...) body", "function with pypto.loop")


def imports_pypto(tree: ast.Module) -> bool:
    """Whether the file imports pypto (``import pypto...`` / ``from pypto... import``) anywhere."""
    for node in astnodes.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "pypto" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pypto" and not node.level:
            return True
    return False


def find_kernels(tree: ast.Module) -> list[ast.stmt]:
    """The kernels of a module at any depth (factories, closures, methods, the main guard), in file
    order: every ``jit``-decorated function; every ``with pypto.function(...)`` statement; every
    function that calls ``pypto.loop`` / ``loop_unroll`` itself (not through a nested kernel) and
    lies inside neither of the first two."""
    names = _pypto_names(tree)
    wrapped = _jit_wrapped(tree, names)
    found: list[ast.stmt] = []
    # (node, inside a kernel already)
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, inside = stack.pop()
        kernel = False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (_is_jit(node, names) or node.name in wrapped):
            kernel = True
        elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and names.calls(i.context_expr, "function") for i in node.items):
            kernel = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not inside and _loops_itself(node, names):
            kernel = True
        if kernel and not (inside and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and not _is_jit(node, names)):
            found.append(node)
        stack += [(child, inside or kernel) for child in reversed(astnodes.children(node))]
    return sorted({id(k): k for k in found}.values(), key=lambda k: (k.lineno, k.col_offset))


def _loops_itself(fn: ast.AST, names: _Names) -> bool:
    """Whether ``fn`` calls ``pypto.loop`` / ``loop_unroll`` outside its nested functions."""
    stack = list(astnodes.children(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and names.calls(i.context_expr, "function") for i in node.items):
            continue  # a kernel of its own
        if isinstance(node, ast.Call) and names.calls(node, "loop", "loop_unroll"):
            return True
        stack += astnodes.children(node)
    return False


def _contains(stmt: ast.stmt, ids: set[int]) -> bool:
    return any(id(n) in ids for n in astnodes.walk(stmt))


def device_statements(tree: ast.Module, kernels: list[ast.stmt] | None = None) -> list[ast.stmt]:
    """The module statements that describe the device side (see the module docstring), in file order:
    imports, assignments, module-level calls and conditions (not the main guard), each top-level
    statement holding a kernel (:func:`find_kernels`: a factory, a class, a ``with`` at module level,
    the main guard when the kernel sits in it), and the module functions the kept ones call,
    transitively."""
    kernels = find_kernels(tree) if kernels is None else kernels
    kernel_ids = {id(k) for k in kernels}
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    holders = [s for s in tree.body if _contains(s, kernel_ids)]
    keep: set[int] = set()
    todo: list[ast.stmt] = list(holders)
    while todo:
        stmt = todo.pop()
        if id(stmt) in keep:
            continue
        keep.add(id(stmt))
        for node in astnodes.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                todo.append(functions[node.func.id])
    out = []
    for stmt in tree.body:
        if id(stmt) in keep:
            out.append(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign)):
            out.append(stmt)
        elif isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
            out.append(stmt)  # a module-level call (e.g. pypto.set_*): kernel configuration
        elif isinstance(stmt, ast.If) and not _is_main_guard(stmt):
            out.append(stmt)
    return out


def module_bound(tree: ast.Module) -> frozenset[str]:
    """Names the module binds at its top level, kept statements or not (a class or function left out as
    host code is still a bound name); ``*`` when a star import binds names nobody can list."""
    names: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:  # module scope only: never into a function's or class's body
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack += astnodes.children(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {"*" if a.name == "*" else (a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)


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
    kernels = find_kernels(tree)
    nodes: list[Node] = _from_ast(device_statements(tree, kernels), 1)
    wanted = {id(k) for k in kernels}
    found = [n for top in nodes for n in _with_descendants(top) if id(n.stmt) in wanted]
    program = Program(fence=fence, parsed=True, syntax_error=None, nodes=nodes,
                      kernel=found[0] if found else None, constants=_constants(nodes),
                      kernels=found, module_bound=module_bound(tree))
    return KernelSource(text, program, None, declared_skeleton(tree), document, imports_pypto(tree),
                        other_jits(tree) if not found else ())


def other_jits(tree: ast.Module) -> tuple[str, ...]:
    """The decorators called ``jit`` of the file that are not PyPTO's, by name (sorted)."""
    names = _pypto_names(tree)
    out = set()
    for node in astnodes.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_jit(node, names):
            for d in node.decorator_list:
                name = dotted(d.func if isinstance(d, ast.Call) else d)
                if name.rpartition(".")[2].endswith("jit"):
                    out.add(name)
    return tuple(sorted(out))


def _with_descendants(node: Node) -> list[Node]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack += reversed(n.body)
    return out
