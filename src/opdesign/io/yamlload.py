"""``yaml.safe_load`` on libyaml when it is installed, with the pure-Python loader's behaviour.

libyaml (``yaml.CSafeLoader``: the C parser with the same safe constructors and resolvers) reads a
SPEC about three times faster. Its error messages and its nesting limit differ from the pure-Python
``SafeLoader``, so anything libyaml refuses, and any document nested deeper than
:data:`C_LOADER_MAX_DEPTH`, is read again with ``yaml.safe_load``: results, errors, their messages
and the refusal of deep nesting (``RecursionError``) are exactly those of ``yaml.safe_load``.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["C_LOADER_MAX_DEPTH", "safe_load"]

#: nesting above which a document libyaml accepted is read again by the pure-Python loader, whose
#: recursion limit decides (refused as nested too deeply) exactly as before libyaml was used
C_LOADER_MAX_DEPTH = 64


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of parsed YAML data, counted up to ``limit + 1``."""
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with libyaml (``CSafeLoader``, same safe constructors) when it is installed.

    Anything libyaml refuses, and any document nested deeper than :data:`C_LOADER_MAX_DEPTH`, is read
    again with the pure-Python ``SafeLoader``, so errors, their messages and the nesting refusal are
    those of ``yaml.safe_load``.
    """
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        except (yaml.YAMLError, RecursionError):
            pass
        else:
            if _depth(data, C_LOADER_MAX_DEPTH) <= C_LOADER_MAX_DEPTH:
                return data
    return yaml.safe_load(text)
