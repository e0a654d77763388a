"""Safe, bounded YAML loading with line numbers for the validator.

Front matter and interface files come from anywhere (people, agents, fuzzers),
so loading is defensive:

- only the safe constructors of PyYAML (``SafeLoader``): no Python object
  tags; any unknown tag is a :class:`YamlProblem`;
- at most :data:`MAX_ALIASES` aliases and :data:`MAX_DEPTH` nesting levels,
  counted on the event stream before any node is composed, and at most
  :data:`MAX_NODES` nodes visited with aliases expanded ("billion laughs"
  documents are refused, not expanded); libyaml is used when available;
- every node's 1-based line is kept by path (``("modules", 0, "inputs")``), so
  findings can point at the YAML line (PyYAML's compose gives node marks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent
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


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available, same safe constructors


def _check_events(text: str) -> None:
    """Count aliases and nesting on the event stream (iterative) before anything is composed."""
    aliases = depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise YamlProblem(f"more than {MAX_ALIASES} YAML aliases (refused)", event.start_mark.line + 1)
        elif isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlProblem(f"YAML nested deeper than {MAX_DEPTH} levels (refused)", event.start_mark.line + 1)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


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
    loader = None
    try:
        _check_events(text)
        loader = _LOADER(text)
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
        if loader is not None:
            loader.dispose()
    return Loaded(data=data, lines=lines)
