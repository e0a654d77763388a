"""Prose pseudocode: a pseudocode chapter that holds no Python code.

The CANNBot template (pypto-op-design ``templates/DESIGN.md.tmpl``) writes its pseudocode as
plain text in a ```` ```text ```` fence (entry and outputs, preprocessing, the loop, the write-back),
and a design may say the same in paragraphs. Such a chapter is a valid design, not a broken
kernel: the code rules (the ``pseudocode`` family) have nothing to read. The engine then runs
none of them and says so in one info finding (OD-PC-06), instead of reporting "no kernel function".

A fence holds Python code when its info string names Python (```` ```python ````, ``py``,
``python3``), or when it has no info string or a plain-text one and its content parses as Python
with at least one statement a kernel is made of (a call, an assignment, a loop, a function). A
fence in another language (``yaml``, ``bash``) is not Python.
"""

from __future__ import annotations

import ast

from opdesign.validate.analysis import astnodes
from opdesign.validate.parse.document import Document, Fence, Heading

PYTHON_INFO = frozenset({"python", "py", "python3", "py3"})
PLAIN_INFO = frozenset({"", "text", "txt", "plain", "plaintext", "pseudo", "pseudocode"})
CODE_NODES = (ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.While, ast.With, ast.FunctionDef)


def _language(fence: Fence) -> str:
    return fence.info.split()[0].casefold() if fence.info.strip() else ""


def holds_python(fence: Fence) -> bool:
    """True when the fence is Python code (see the module docstring)."""
    lang = _language(fence)
    if lang in PYTHON_INFO:
        return True
    if lang not in PLAIN_INFO:
        return False
    try:
        tree = astnodes.parse(fence.content)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(isinstance(node, CODE_NODES) for node in astnodes.walk(tree))


def _chapter_end(doc: Document, heading: Heading) -> int:
    """File line of the heading that closes the chapter opened by ``heading`` (past the end: no such heading)."""
    for other in doc.headings:
        if other.line > heading.line and (other.chapter is not None or other.level <= heading.level):
            return other.line
    return len(doc.lines) + 1


def prose_pseudocode(doc: Document) -> Heading | None:
    """The pseudocode chapter's heading when the chapter holds text but no Python code: fences that are
    all plain text (or another language), or paragraphs without a fence. None when the chapter is
    missing, empty (OD-PC-01 reports that) or holds Python code."""
    heading = doc.chapter_heading("pseudocode")
    if heading is None:
        return None
    fences = [f for f in doc.fences if f.chapter == "pseudocode"]
    if any(holds_python(f) for f in fences):
        return None
    if any(f.content.strip() for f in fences):
        return heading
    end = _chapter_end(doc, heading)
    return heading if any(heading.line < span.line < end for span in doc.spans) else None
