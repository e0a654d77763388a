"""Findings and reports of ``opdesign validate`` (pydantic models, serialised as-is to JSON)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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

    @classmethod
    def build(cls, files: list[str], findings: list[Finding]) -> Report:
        ordered = sorted(set(findings), key=lambda f: (f.file, f.line, f.rule, f.message))
        counts = {level: sum(1 for f in ordered if f.level == level) for level in LEVELS}
        return cls(files=list(dict.fromkeys(files)), findings=ordered, summary=Summary(**counts))  # a path given twice counts once, as its findings do

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
