"""pass_options / runtime_options by their documented meaning (``constraints/pypto_options.yaml``): the doc page
each option row follows, the meaning it gives, and the framework's default, so that a design marks a value equal
to the default as the default."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict

from opdesign.io.paths import data_dir
from opdesign.io.yamlload import safe_load


class OptionDoc(BaseModel):
    """One option as PyPTO's docs define it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc: str
    meaning: str
    default: Any
    default_source: str


@cache
def option_docs() -> dict[str, OptionDoc]:
    """``{"pass_options.cube_nbuffer_setting": OptionDoc, ...}`` from constraints/pypto_options.yaml."""
    data = safe_load((data_dir("constraints") / "pypto_options.yaml").read_text(encoding="utf-8"))
    return {key: OptionDoc(**entry) for key, entry in data["options"].items()}


def is_default(key: str, value: Any) -> bool:
    """The value is the framework's documented default of ``key`` (False for an undocumented key)."""
    entry = option_docs().get(key)
    return entry is not None and _norm(value) == _norm(entry.default)


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted((int(k), v) for k, v in value.items())
    return value
