"""Loops of a parsed kernel program: what a loop iterates over (batch, head, q or kv), read from its
``name=``, its index or its bound; the shared code rules and the skeletons' code rules both use it.
"""

from __future__ import annotations

import ast
import re

from opdesign.validate.analysis import codeflow
from opdesign.validate.api import Context
from opdesign.validate.parse.pseudocode import Node, Program, keyword

_TOKEN = re.compile(r"[a-z]+\d*")
BATCH_TOKENS = frozenset({"b", "batch", "bs", "bidx"})
HEAD_TOKENS = frozenset({"h", "head", "heads", "hidx", "n1", "nh", "kvh", "kv_head"})
Q_TOKENS = frozenset({"q", "qi", "qidx", "s1", "q_tile", "q_tiles"})
KV_TOKENS = frozenset({"kv", "kj", "kvidx", "s2", "kv_tile", "kv_tiles"})


def parsed_program(ctx: Context) -> Program | None:
    program = ctx.program
    return program if program is not None and program.parsed else None


def _words(texts: list[str]) -> set[str]:
    words: list[str] = []
    for text in texts:
        parts = text.lower().split("_")
        words += parts + [text.lower()]
        words += ["_".join(parts[i:i + 2]) for i in range(len(parts) - 1)]
    return set(words)


def loop_words(node: Node) -> tuple[set[str], set[str]]:
    """(words of the loop's ``name=`` and index, words of its bound)."""
    s = node.stmt
    texts: list[str] = []
    name = keyword(s.iter, "name") if isinstance(s.iter, ast.Call) else None
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        texts.append(name.value)
    var = loop_var(node)
    if var is not None:
        texts.append(var)
    bound = [n for arg in (s.iter.args if isinstance(s.iter, ast.Call) else []) for n in codeflow.names_in(arg)]
    return _words(texts), _words(bound)


def loop_var(node: Node) -> str | None:
    target = node.stmt.target
    target = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
    return target.id if isinstance(target, ast.Name) else None


def loop_role(node: Node) -> str | None:
    """``batch`` / ``head`` / ``q`` / ``kv`` for a loop whose name or index says so, else its bound (else None)."""
    for words in loop_words(node):
        for role, tokens in (("batch", BATCH_TOKENS), ("head", HEAD_TOKENS), ("kv", KV_TOKENS), ("q", Q_TOKENS)):
            if words & tokens:
                return role
    return None
