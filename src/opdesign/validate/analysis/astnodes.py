"""``ast.walk`` / ``ast.iter_child_nodes`` for trees the validator only reads, with each node's
children listed once.

The kernel and pseudocode rules walk the same trees many times (every rule, and nested walks of
sub-expressions); the standard functions rebuild each node's child list from its fields every
time. :func:`children` keeps the list on the node (an attribute outside ``_fields``, so
``ast.dump``, ``compile`` and ``ast.unparse`` never see it), and :func:`walk` yields the nodes in
exactly ``ast.walk``'s order. Trees are never edited after parsing in the validator; a tree that is
edited must not be walked with these.
"""

from __future__ import annotations

import ast
from collections import OrderedDict, deque
from collections.abc import Iterator

_KEY = "_od_children"


def children(node: ast.AST) -> tuple[ast.AST, ...]:
    """The direct child nodes of ``node``, in ``ast.iter_child_nodes`` order."""
    found = node.__dict__.get(_KEY)
    if found is None:
        items: list[ast.AST] = []
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                items.append(value)
            elif isinstance(value, list):
                items += [item for item in value if isinstance(item, ast.AST)]
        found = tuple(items)
        node.__dict__[_KEY] = found
    return found


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself first), in ``ast.walk`` order (breadth first)."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(children(node))
        yield node


#: module trees kept by source text (the kernel and pseudocode texts are parsed by several readers)
_TREES: OrderedDict[str, ast.Module] = OrderedDict()
_TREES_KEPT = 4


def parse(text: str) -> ast.Module:
    """``ast.parse(text)``, shared: the readers of one text (program, API check, prose check) get the
    same tree, which none of them edits. Errors propagate and are not kept."""
    tree = _TREES.get(text)
    if tree is None:
        tree = ast.parse(text)
        _TREES[text] = tree
        if len(_TREES) > _TREES_KEPT:
            _TREES.popitem(last=False)
    else:
        _TREES.move_to_end(text)
    return tree


def clear() -> None:
    """Forget the kept trees."""
    _TREES.clear()
