"""The rule registry: one small :class:`Rule` per check, registered once with :func:`rule`.

A leaf module: the rule modules (here and in the skeleton packages) import it; collecting them
all is :mod:`opdesign.validate.engine.collect`'s job.

A rule has an id (a constraint or card id when it enforces exactly that one,
else ``OD-DOC-nn`` / ``OD-IF-nn`` / ``OD-NUM-nn`` / ``OD-PC-nn``), a level
(error / warning / info), the card or constraint it enforces (``source``), a
one-line message, an explanation (the check function's docstring), a bad and
a good example, and the check itself: ``check(ctx) -> iterable of Hit``.

Families: ``document``, ``interfaces``, ``numbers`` (need the ``opdesign:``
block: skipped, and reported as skipped, when it is absent) and ``pseudocode``.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opdesign.io.yamlsafe import Loaded
from opdesign.validate.model import Level
from opdesign.validate.parse.document import Document
from opdesign.validate.parse.pseudocode import Program

FAMILIES = ("document", "interfaces", "numbers", "pseudocode")
#: What a ``bad`` / ``good`` example is, so that a test can wrap it into a document and run the rule on
#: it (tests/rule_harness.py): pseudocode (the pseudocode fence), block (keys of the ``opdesign:``
#: block), interfaces (keys of eval/module_interfaces.yaml), markdown (one chapter, heading included),
#: document (the whole DESIGN.md) or api (a ``validate_text`` / ``validate_paths`` call).
EXAMPLE_KINDS = ("pseudocode", "block", "interfaces", "markdown", "document", "api", "kernel")
#: The kind of a family's examples unless the rule says otherwise.
DEFAULT_KIND = {"document": "markdown", "interfaces": "interfaces", "numbers": "block", "pseudocode": "pseudocode"}


@dataclass(frozen=True)
class Hit:
    """What a check reports: a line and a message; ``interfaces`` marks a line of the interface file.
    ``level`` lowers one finding below its rule's level (a card rule that real kernels contradict in
    a known case reports that case as a ``warning`` citing both); None: the rule's level."""

    line: int
    message: str
    interfaces: bool = False
    level: Level | None = None


@dataclass(frozen=True)
class Rule:
    id: str
    level: Level
    family: str
    source: str
    message: str
    explanation: str
    bad: str
    good: str
    check: Callable[[Context], Iterable[Hit]] = field(compare=False, repr=False)
    needs_block: bool = False
    example_kind: str = "markdown"
    on_kernel: bool = False  # also runs on a kernel .py (opdesign.validate.parse.kernel_source)
    attention_only: bool = False  # skipped on designs that are not attention (blockdata.is_attention_design)

    def as_row(self) -> dict[str, str]:
        """Row for ``opdesign rules``, same shape as ``catalog.rule_rows`` plus the family."""
        return {"id": self.id, "level": self.level, "text": self.message, "source": self.source,
                "kind": "check", "family": self.family}

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "level": self.level, "family": self.family, "source": self.source,
                "message": self.message, "explanation": self.explanation, "bad": self.bad, "good": self.good,
                "needs_block": self.needs_block, "on_kernel": self.on_kernel,
                "attention_only": self.attention_only}


_REGISTRY: dict[str, Rule] = {}


def _example(text: str) -> str:
    """A bad / good example as written: common indentation of all lines removed, outer blank lines dropped.

    (``inspect.cleandoc`` is for docstrings: it ignores the first line when measuring the indentation,
    so a snippet whose first line starts at column 0 lost the indentation of every other line.)
    """
    return textwrap.dedent(text).strip("\n")


def rule(rule_id: str, level: Level, family: str, source: str, message: str, *, bad: str, good: str,
         needs_block: bool = False, kind: str | None = None, kernel: bool | None = None,
         attention_only: bool = False,
         ) -> Callable[[Callable[[Context], Iterable[Hit]]], Callable[[Context], Iterable[Hit]]]:
    """Register the decorated check as rule ``rule_id``; its docstring is the explanation.

    ``kind`` says what the ``bad`` / ``good`` examples are (:data:`EXAMPLE_KINDS`; default: the
    family's, :data:`DEFAULT_KIND`). ``kernel`` says whether the rule also runs on a kernel ``.py``
    (default: pseudocode-family rules do, the others do not; see :mod:`opdesign.validate.parse.kernel_source`).
    ``attention_only``: the rule makes sense for attention operators only and is skipped on a design
    that says it is not one (a matmul, layernorm or plain softmax:
    :func:`opdesign.validate.analysis.blockdata.is_attention_design`).
    """
    if family not in FAMILIES:
        raise ValueError(f"{rule_id}: unknown family {family!r}")
    example_kind = kind or DEFAULT_KIND[family]
    if example_kind not in EXAMPLE_KINDS:
        raise ValueError(f"{rule_id}: unknown example kind {example_kind!r}")

    def register(check: Callable[[Context], Iterable[Hit]]) -> Callable[[Context], Iterable[Hit]]:
        if rule_id in _REGISTRY:
            raise ValueError(f"rule {rule_id} registered twice")
        _REGISTRY[rule_id] = Rule(id=rule_id, level=level, family=family, source=source, message=message,
                                  explanation=inspect.cleandoc(check.__doc__ or ""), bad=_example(bad),
                                  good=_example(good), check=check, needs_block=needs_block,
                                  example_kind=example_kind, attention_only=attention_only,
                                  on_kernel=family == "pseudocode" if kernel is None else kernel)
        return check

    return register


@dataclass(frozen=True)
class Condition:
    """An applicability or form condition a planner evaluates and DESIGN.md prints by id
    (``Plan.form_checks`` / ``Plan.skeleton_checks``); ``checked_by`` names the rule that re-checks it."""

    id: str
    text: str
    source: str
    checked_by: str | None = None


_CONDITIONS: dict[str, Condition] = {}


def condition(condition_id: str, text: str, source: str, checked_by: str | None = None) -> None:
    """Declare a planner condition id so that ``opdesign rules ID`` explains it (skeleton rule modules)."""
    if condition_id in _CONDITIONS:
        raise ValueError(f"condition {condition_id} declared twice")
    _CONDITIONS[condition_id] = Condition(condition_id, text, source, checked_by)


def conditions() -> list[Condition]:
    """The declared conditions, by id."""
    return [_CONDITIONS[k] for k in sorted(_CONDITIONS)]


def registered() -> dict[str, Rule]:
    """The rules registered so far, by id, in family order then id."""
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (FAMILIES.index(kv[1].family), kv[0])))


@dataclass
class Context:
    """Everything a check may look at for one DESIGN.md.

    ``interfaces`` is None when the interface file is missing, unreadable or
    was not given (``interfaces_state`` says which); ``block`` is the
    ``opdesign:`` mapping of the front matter or None; ``program`` is the
    pseudocode (None without a fenced block in the pseudocode chapter). With several kernel
    blocks, the engine runs each rule that reads ``program`` once per block (``program_read``
    records whether it did).
    """

    doc: Document
    interfaces: Loaded | None
    interfaces_state: str  # ok | missing | invalid | not_given
    interfaces_problem: str
    interfaces_problem_line: int
    program: Program | None
    program_read: bool = False
    #: set for a kernel ``.py``: the skeleton its module docstring names (None: not named)
    declared_skeleton: str | None = None
    #: set for a kernel ``.py``: its :class:`opdesign.validate.parse.kernel_source.KernelSource`
    kernel: Any = None
    #: the PyPTO release or commit the code is checked against (``--target-pypto``; None: the pinned release)
    target_pypto: str | None = None

    def __getattribute__(self, name: str) -> Any:
        if name == "program":
            object.__setattr__(self, "program_read", True)
        return object.__getattribute__(self, name)

    @property
    def front(self) -> dict[str, Any]:
        data = self.doc.front.data
        return data if isinstance(data, dict) else {}

    @property
    def block(self) -> dict[str, Any] | None:
        value = self.front.get("opdesign")
        return value if isinstance(value, dict) else None

    def block_line(self, *path: Any) -> int:
        return self.doc.front.line("opdesign", *path)

    @property
    def form(self) -> str | None:
        """``performance`` / ``baseline`` from the block, None without one."""
        block = self.block or {}
        form = block.get("form")
        return form if isinstance(form, str) else None

    def iface_line(self, *path: Any) -> int:
        return self.interfaces.line(*path) if self.interfaces else 1


# --- The skeletons, handed in by the caller -------------------------------------------------------
# The validator never imports ``opdesign.skeletons``: whoever runs it (``opdesign.workflows.validate``,
# which the CLI, the agent and the tests use) hands it the registered skeleton records once. A record
# is an ``opdesign.skeletons.base.Skeleton``: ``id``, ``rule_modules``, ``rederive_budgets``,
# ``rederive_expansion``, ``vector_rule`` ... (read by attribute, never compared by id).


@dataclass(frozen=True)
class Skeletons:
    """The registered skeletons (selection order) and the one assumed for a design that names none."""

    all: tuple[Any, ...]
    fallback: Any

    def find(self, skeleton_id: str | None) -> Any | None:
        """The registered skeleton with this id (exact spelling), or None."""
        return next((s for s in self.all if s.id == skeleton_id), None)


_HANDED: list[Skeletons] = []


def use_skeletons(skeletons: tuple[Any, ...], fallback: Any) -> None:
    """Hand the validator the registered skeletons (the caller's registry); a second call replaces them."""
    _HANDED[:] = [Skeletons(tuple(skeletons), fallback)]


def skeletons() -> Skeletons:
    """The skeletons handed in by :func:`use_skeletons`.

    Raises:
        RuntimeError: none were handed in (run the validator through ``opdesign.workflows.validate``).
    """
    if not _HANDED:
        raise RuntimeError("the validator has no skeletons: import opdesign.workflows.validate (it hands the "
                           "registered ones) or call opdesign.validate.api.use_skeletons")
    return _HANDED[0]
