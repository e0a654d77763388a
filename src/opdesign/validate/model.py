"""Findings and reports of ``opdesign validate`` (pydantic models, serialised as-is to JSON)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

Level = Literal["error", "warning", "info"]
LEVELS: tuple[Level, ...] = ("error", "warning", "info")


class Finding(BaseModel):
    """One rule violation (or one info note) at a 1-based line of a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str = Field(description="rule id, e.g. C-TILE-02 or OD-DOC-05 (see `opdesign rules`)")
    level: Level
    message: str
    file: str = Field(description="the path as given (DESIGN.md or its eval/module_interfaces.yaml)")
    line: int = Field(ge=1, description="1-based line; 1 when the finding concerns the whole file")


class SuppressedFinding(Finding):
    """A finding a disable comment suppressed: :meth:`Report.build` keeps it out of the findings and the
    summary; SARIF lists it with a ``suppressions`` entry (kind ``inSource``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suppressed_by: str = Field(description="the comment that suppressed it, with its line")


class Summary(BaseModel):
    """Number of findings per level."""

    model_config = ConfigDict(extra="forbid")

    error: int = 0
    warning: int = 0
    info: int = 0


class Report(BaseModel):
    """Result of validating one or more DESIGN.md files.

    ``files`` lists the DESIGN.md paths looked at (usable or not); ``findings``
    are sorted by file, line and rule id.
    """

    model_config = ConfigDict(extra="forbid")

    files: list[str]
    findings: list[Finding]
    summary: Summary
    #: findings suppressed by a disable comment (:class:`SuppressedFinding`): not in ``findings``, not in
    #: JSON; SARIF lists them as suppressed results
    _suppressed: list[SuppressedFinding] = PrivateAttr(default_factory=list)

    @classmethod
    def build(cls, files: list[str], findings: list[Finding]) -> Report:
        """A report of ``findings`` (the :class:`SuppressedFinding` among them go to :attr:`suppressed`)."""
        key = lambda f: (f.file, f.line, f.rule, f.message)  # noqa: E731
        kept = [f for f in findings if not isinstance(f, SuppressedFinding)]
        ordered = sorted(set(kept), key=key)
        counts = {level: sum(1 for f in ordered if f.level == level) for level in LEVELS}
        # a path given twice counts once, as its findings do
        report = cls(files=list(dict.fromkeys(files)), findings=ordered, summary=Summary(**counts))
        if len(kept) != len(findings):
            report._suppressed = sorted({f for f in findings if isinstance(f, SuppressedFinding)}, key=key)
        return report

    @property
    def suppressed(self) -> list[SuppressedFinding]:
        """Findings a disable comment suppressed, sorted like :attr:`findings`."""
        return list(self._suppressed)

    @property
    def unusable_inputs(self) -> list[str]:
        """Files that could not be read as a UTF-8 text document (rule OD-DOC-01)."""
        return [f.file for f in self.findings if f.rule == UNUSABLE_RULE]

    @property
    def exit_code(self) -> int:
        """2 when an input is unusable, else 1 when any error-level finding, else 0."""
        if self.unusable_inputs:
            return 2
        return 1 if self.summary.error else 0


#: The rule id of "input unusable" findings (exit code 2).
UNUSABLE_RULE = "OD-DOC-01"
