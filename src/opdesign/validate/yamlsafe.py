"""Safe, bounded YAML loading with line numbers for the validator.

Front matter and interface files come from anywhere (people, agents, fuzzers),
so loading is defensive:

- only the safe constructors of PyYAML (``SafeLoader``): no Python object
  tags; any unknown tag is a :class:`YamlProblem`;
- at most :data:`MAX_ALIASES` aliases and :data:`MAX_DEPTH` nesting levels
  while composing, and at most :data:`MAX_NODES` nodes visited with aliases
  expanded ("billion laughs" documents are refused, not expanded);
- every node's 1-based line is kept by path (``("modules", 0, "inputs")``), so
  findings can point at the YAML line (PyYAML's compose gives node marks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_ALIASES = 32
MAX_DEPTH = 64
MAX_NODES = 50_000

Path = tuple[Any, ...]


class YamlProblem(ValueError):
    """The text is not YAML we accept; ``line`` is 1-based within the YAML text (or None)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses alias-heavy or deeply nested documents."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # type: ignore[override]
        if self.check_event(AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise YamlProblem(f"more than {MAX_ALIASES} YAML aliases (refused)", mark.line + 1)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise YamlProblem(f"YAML nested deeper than {MAX_DEPTH} levels (refused)", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


@dataclass
class Loaded:
    """A loaded YAML document: plain data plus the 1-based line of every node, by path."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)

    def line(self, *path: Any, default: int = 1) -> int:
        """Line of the node at ``path``, else of its nearest ancestor, else ``default``."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return default
            path = path[:-1]


def _record(node: Node, path: Path, lines: dict[Path, int], budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise YamlProblem(f"YAML expands to more than {MAX_NODES} nodes (refused)")
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, ScalarNode) else repr(key.start_mark.line)
            lines.setdefault(path + (str(name),), key.start_mark.line + 1)
            _record(value, path + (str(name),), lines, budget)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _record(item, path + (i,), lines, budget)


def load(text: str) -> Loaded:
    """Load one YAML document safely; raise :class:`YamlProblem` with a message and line.

    Mapping keys are addressed by their string form in :attr:`Loaded.lines`
    (``("opdesign", "cube_tiles", "C1", "m")``), sequence items by index.
    """
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return Loaded(data=None)
        lines: dict[Path, int] = {}
        _record(node, (), lines, [MAX_NODES])
        data = loader.construct_document(node)
    except YamlProblem:
        raise
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise YamlProblem(f"not valid YAML: {err.problem or err.context}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as err:
        raise YamlProblem(f"not valid YAML: {err}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as err:
        raise YamlProblem(f"YAML could not be loaded: {type(err).__name__}: {err}") from None
    finally:
        loader.dispose()
    return Loaded(data=data, lines=lines)
