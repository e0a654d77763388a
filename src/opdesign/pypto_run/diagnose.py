"""Turn exceptions from a PyPTO 0.2.0 kernel call into :class:`KernelError` records.

Stages: ``parse`` (Python-level front-end errors: unknown ``pypto.X``, bad
syntax, wrong call), ``compile`` (errors from the C++ graph builder or passes,
recognisable by an ``Errcode`` / ``...OpError``), ``sim`` (raised from the SIM
run after compilation). The kernel line comes, in order, from a ``lineno: N``
line in the message (C++ op errors re-raised as "INTERNAL BUG <file>:1:0"),
the parser error's AST node, the rendered ``ERROR file:line:col`` diagnostic,
or the traceback frame in the kernel file.
"""

from __future__ import annotations

import re
import traceback

from .results import KernelError, diagnostic_line, strip_ansi

_SIM_FRAMES = {"_run_with_cpu", "_run"}
_MSG_LINE = re.compile(r"^lineno: (\d+)$", re.M)


def classify_exception(exc: BaseException, kernel_file: str | None, diag_text: str) -> KernelError:
    """Turn an exception from a kernel call into a :class:`KernelError`."""
    message = strip_ansi(str(exc)).strip()
    line = None
    node = getattr(exc, "node", None)
    # C++ op errors re-raised as "INTERNAL BUG <file>:1:0" carry the real line as "lineno: N"
    in_msg = _MSG_LINE.search(message)
    if in_msg:
        line = int(in_msg.group(1))
    elif node is not None and getattr(node, "lineno", None):
        line = int(node.lineno)
    if line is None:
        line = diagnostic_line(diag_text, kernel_file)
    frames = traceback.extract_tb(exc.__traceback__)
    if line is None and kernel_file:
        for frame in reversed(frames):
            if frame.filename == kernel_file:
                line = frame.lineno
                break
    names = {f.name for f in frames}
    if names & _SIM_FRAMES:
        stage = "sim"
    elif type(exc).__name__ in ("ParserError", "RenderedParserError"):
        # Errors raised by the C++ graph builder carry an Errcode; pure front-end ones do not.
        stage = "compile" if ("Errcode" in message or "OpError" in message or in_msg) else "parse"
    elif isinstance(exc, (SyntaxError, NameError, AttributeError, TypeError)):
        stage = "parse"
    else:
        stage = "compile"
    return KernelError(stage=stage, message=message[:4000], kernel_line=line, kind=type(exc).__name__)


def classify_chain(exc: BaseException, kernel_file: str | None, diag_text: str) -> list[KernelError]:
    """Errors for ``exc`` and the exceptions it was raised while handling, root cause first.

    In 0.2.0 a front-end error inside the jit body (e.g. an unknown ``pypto.X``)
    is logged as "Record function ... failed" and then replaced by a C++ error
    from ``EndFunction`` in a ``finally`` block; the original stays reachable as
    ``__context__`` and is the one that names the real mistake.
    """
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    errors = [classify_exception(e, kernel_file, diag_text) for e in reversed(chain)]
    unique: list[KernelError] = []
    for err in errors:
        if all(err.message != u.message for u in unique):
            unique.append(err)
    return unique


