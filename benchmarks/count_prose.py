"""Count the prose the planner writes: f-strings and English prose literals per file.

    python benchmarks/count_prose.py [PATH ...]   (default: src/opdesign/skeletons src/opdesign/plan)

An f-string is one ``JoinedStr`` node (the f-strings nested in its format specs are not counted
again). An English prose literal is a plain string constant with at least two words of two or more
letters separated by a space (``"pypto.loop"``, ``"sk01.q_tile.perf"`` or ``"C1"`` are not prose).
Not counted: docstrings, ``Field(description=...)`` texts (both are documentation) and the parts
of an f-string. Counted, but shown apart: citations (the value of a ``source=`` or
``capacity_source=`` argument: card, rule and device-table names) and error messages (inside a
``raise``). Columns: f-strings, prose literals, then how many of them are citations, how many errors.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ("src/opdesign/skeletons", "src/opdesign/plan")
PROSE = re.compile(r"[A-Za-z]{2,}[^\n]*? [^\n]*?[A-Za-z]{2,}")


def _docs(tree: ast.AST) -> set[int]:
    """ids of the docstring and ``description=`` constants."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "description":
            out.update(id(n) for n in ast.walk(node.value))
    return out


def _marked(tree: ast.AST) -> tuple[set[int], set[int]]:
    """ids of the nodes inside a citation argument and inside a ``raise``."""
    cites: set[int] = set()
    errors: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("source", "capacity_source"):
            cites.update(id(n) for n in ast.walk(node.value))
        if isinstance(node, ast.Raise):
            errors.update(id(n) for n in ast.walk(node))
    return cites, errors


def count(path: Path) -> tuple[int, int, int, int]:
    """(f-strings, English prose literals, citations among both, error messages among both) of one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docs(tree)
    cites, errors = _marked(tree)
    inner: set[int] = set()
    found: list[int] = []
    fstrings = prose = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            if id(node) not in inner:
                fstrings += 1
                found.append(id(node))
            inner.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                and id(node) not in inner and PROSE.search(node.value)):
            prose += 1
            found.append(id(node))
    return fstrings, prose, sum(i in cites for i in found), sum(i in errors for i in found)


def main(argv: list[str]) -> int:
    totals = [0, 0, 0, 0]
    print("   f  prose  cite  error")
    for arg in argv or DEFAULT:
        base = ROOT / arg if not Path(arg).is_absolute() else Path(arg)
        for path in sorted(base.rglob("*.py") if base.is_dir() else [base]):
            row = count(path)
            totals = [t + r for t, r in zip(totals, row, strict=True)]
            if row[0] or row[1]:
                print("{:4d} {:6d} {:5d} {:6d}  ".format(*row) + str(path.relative_to(ROOT)))
    print("{:4d} {:6d} {:5d} {:6d}  total".format(*totals))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
