"""The API surface of the pinned PyPTO release, as data (no PyPTO import).

``constraints/pypto_api.yaml`` is generated from an installed release by
``scripts/gen_pypto_api.py``; ``constraints/pypto_api_notes.yaml`` is
hand-written: forms seen in designs that the release lacks, with the real form.
The planner asks it what the release can do (e.g. SK-16 single pass needs
``pypto.atomic_add``); the validator checks kernel code against it
(:mod:`opdesign.validate.analysis.api_surface`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from opdesign.catalog.store import load_cached
from opdesign.io.paths import data_dir


@dataclass(frozen=True)
class ApiSurface:
    release: str
    modules: dict[str, dict[str, Any]]
    value_classes: dict[str, dict[str, Any]]
    missing: dict[str, str]
    method_notes: dict[str, str]
    non_tensor: frozenset[str]
    runtime_limits: dict[str, dict[str, Any]]
    reexported_at_top: frozenset[str] = frozenset()  # submodules whose names pypto itself exports
    runtime_options: frozenset[str] = frozenset()  # runtime_options names the release knows (empty: unchecked)

    def entry(self, dotted: str) -> dict[str, Any] | None:
        """Manifest entry of ``pypto.a.b`` (None when it does not exist or cannot be checked)."""
        module, _, name = dotted.rpartition(".")
        return self.modules.get(module, {}).get(name)

    def has(self, dotted: str) -> bool:
        """True when the release exports ``dotted`` (e.g. ``pypto.atomic_add``)."""
        return self.entry(dotted) is not None


def _load(name: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with (data_dir("constraints") / name).open(encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader


@cache
def load_api_surface() -> ApiSurface:
    """The shipped manifest and notes, loaded once per process (and kept between processes keyed by
    the two files' hash, :mod:`opdesign.catalog.store`)."""
    folder = data_dir("constraints")
    files = [folder / "pypto_api.yaml", folder / "pypto_api_notes.yaml"]
    return load_cached("pypto_api", folder, files, _read_api_surface)


def _read_api_surface() -> ApiSurface:
    manifest, notes = _load("pypto_api.yaml"), _load("pypto_api_notes.yaml")
    return ApiSurface(release=str(manifest["release"]), modules=manifest["modules"],
                      value_classes=manifest["value_classes"], missing=notes["missing"],
                      method_notes=notes["methods"], non_tensor=frozenset(notes["non_tensor_results"]),
                      runtime_limits=notes.get("runtime_limits", {}),
                      reexported_at_top=frozenset(notes.get("reexported_at_top", [])),
                      runtime_options=frozenset(notes.get("runtime_options", [])))


@cache
def api_release() -> str:
    """``load_api_surface().release`` without loading the manifest: its top-level ``release:`` line
    (the generator writes it on one line); the whole manifest when that line is not there."""
    with (data_dir("constraints") / "pypto_api.yaml").open(encoding="utf-8") as fh:
        line = next((raw for raw in fh if raw.startswith("release:")), None)
    value = yaml.load(line, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if line else None  # noqa: S506
    if not isinstance(value, dict) or set(value) != {"release"} or value["release"] is None:
        return load_api_surface().release
    return str(value["release"])
