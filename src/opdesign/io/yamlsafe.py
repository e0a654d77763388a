"""Safe, strict, bounded YAML loading with line numbers: the one loader of every user YAML input.

The SPEC (:func:`opdesign.spec.load_spec`), the DESIGN.md front matter (the
``opdesign:`` block included) and the interface file come from anywhere
(people, agents, fuzzers), so loading is defensive and strict:

- only the safe constructors of PyYAML (``SafeLoader``): no Python object
  tags; any unknown tag is a :class:`YamlProblem`;
- at most :data:`MAX_ALIASES` aliases and :data:`MAX_DEPTH` nesting levels,
  counted on the event stream before any node is composed, and at most
  :data:`MAX_NODES` nodes visited with aliases expanded ("billion laughs"
  documents are refused, not expanded); libyaml is used when available;
- a key repeated in one mapping is refused (PyYAML keeps the last one silently),
  naming the key, its line and the line of its first occurrence;
- YAML 1.1 numbers that read as something else than they look are refused with
  their line: base 60 (``seq_q: 16:40`` is 1000, ``1:30.5`` is 90.5) and octal
  with a leading zero (``010`` is 8); quote the text or write the number;
- every node's 1-based line is kept by path (``("modules", 0, "inputs")``), so
  findings can point at the YAML line (PyYAML's compose gives node marks).
"""

from __future__ import annotations

import re
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

    def __init__(self, message: str, line: int | None = None, shifted: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.shifted = shifted  # ``line`` is already a file line


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


_INT_TAG, _FLOAT_TAG, _MERGE_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:merge"
_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")


def _check_scalar(node: ScalarNode, offset: int) -> None:
    """Refuse plain YAML 1.1 numbers whose value differs from what they look like."""
    if node.style or node.tag not in (_INT_TAG, _FLOAT_TAG):  # plain: None (PyYAML) or "" (libyaml)
        return
    line = node.start_mark.line + 1 + offset
    if ":" in node.value:
        raise YamlProblem(f"{node.value!r} is a YAML 1.1 base-60 number (read as "
                          f"{_sexagesimal(node.value)}): quote it or write the number", line, True)
    if node.tag == _INT_TAG and _OCTAL.match(node.value) and node.value.strip("+-_0"):
        raise YamlProblem(f"{node.value!r} is a YAML 1.1 octal number (read as {int(node.value.replace('_', ''), 8)}):"
                          " quote it or drop the leading zero", line, True)


def _sexagesimal(text: str) -> str:
    sign = -1 if text.startswith("-") else 1
    value = 0.0
    for part in text.lstrip("+-").replace("_", "").split(":"):
        value = value * 60 + float(part)
    value *= sign
    return str(int(value)) if value.is_integer() and "." not in text else repr(value)


def _check_keys(node: MappingNode, offset: int) -> None:
    """Refuse a key written twice in one mapping (merge keys ``<<`` may override)."""
    first: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
            continue
        line = key.start_mark.line + 1 + offset
        name = (key.tag, key.value)
        if name in first:
            raise YamlProblem(f"duplicate key {key.value!r} (first at line {first[name]}): a key may appear once "
                              "per mapping", line, True)
        first[name] = line


def _record(node: Node, path: Path, lines: dict[Path, int], budget: list[int], offset: int,
            inside: frozenset[int] = frozenset()) -> None:
    """Record the line of every node; ``inside`` holds the collections that contain this one (a cycle: an
    alias used inside its own anchor, ``a: &x [*x]``, would recurse without end)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise YamlProblem(f"YAML expands to more than {MAX_NODES} nodes (refused)")
    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in inside:
        raise YamlProblem("recursive alias: the anchor on this line is used inside its own value",
                          node.start_mark.line + 1)
    if isinstance(node, ScalarNode):
        _check_scalar(node, offset)
    elif isinstance(node, MappingNode):
        _check_keys(node, offset)
        inside |= {id(node)}
        for key, value in node.value:
            name = key.value if isinstance(key, ScalarNode) else repr(key.start_mark.line)
            lines.setdefault(path + (str(name),), key.start_mark.line + 1)
            _record(value, path + (str(name),), lines, budget, offset, inside)
    elif isinstance(node, SequenceNode):
        inside |= {id(node)}
        for i, item in enumerate(node.value):
            _record(item, path + (i,), lines, budget, offset, inside)


def load(text: str, first_line: int = 1) -> Loaded:
    """Load one YAML document safely; raise :class:`YamlProblem` with a message and line.

    Mapping keys are addressed by their string form in :attr:`Loaded.lines`
    (``("opdesign", "cube_tiles", "C1", "m")``), sequence items by index; those lines count from 1.
    ``first_line`` is the file line of the text's first line (front matter: 2): the lines of a
    :class:`YamlProblem`, the one it is raised at and any it names, are file lines.
    """
    offset = first_line - 1
    loader = None
    try:
        _check_events(text)
        loader = _LOADER(text)
        node = loader.get_single_node()
        if node is None:
            return Loaded(data=None)
        lines: dict[Path, int] = {}
        _record(node, (), lines, [MAX_NODES], offset)
        data = loader.construct_document(node)
    except YamlProblem as err:
        if err.line is not None and not err.shifted:
            err.line += offset
        raise
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise YamlProblem(f"not valid YAML: {err.problem or err.context}", mark.line + 1 + offset if mark else None,
                          shifted=True) from None
    except yaml.YAMLError as err:
        raise YamlProblem(f"not valid YAML: {err}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as err:
        raise YamlProblem(f"YAML could not be loaded: {type(err).__name__}: {err}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return Loaded(data=data, lines=lines)
