"""The API surface of the pinned PyPTO release (and of later source commits), as data (no PyPTO import).

``constraints/pypto_api.yaml`` is generated from an installed release by
``scripts/gen_pypto_api.py`` (the pinned release, 0.2.0: the default target);
``constraints/pypto_api_<commit>.yaml`` files are generated from the public source at a commit by
static reading (``scripts/gen_pypto_api_source.py``; they record the commit and its date, and what
static reading misses is said there). ``constraints/pypto_api_notes.yaml`` is
hand-written: forms seen in designs that the release lacks, with the real form.

A target (``--target-pypto``, the ``target-pypto`` setting) names one manifest: its release
(``0.2.0``, also ``r0.2.0`` / ``v0.2.0``) or a prefix of at least 7 hex digits of its commit.
:func:`later_surfaces` gives the manifests newer than a target, so that a name a kernel uses which
the target lacks but a later commit has is reported as "added later", not as a typo.
The planner asks it what the release can do (e.g. SK-16 single pass needs
``pypto.atomic_add``); the validator checks kernel code against it
(:mod:`opdesign.validate.analysis.api_surface`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from opdesign.catalog.store import load_cached
from opdesign.io.paths import data_dir

#: the release opdesign pins (the manifest introspected from its wheel); the default target
PINNED_MANIFEST = "pypto_api.yaml"
_COMMIT_FILE = re.compile(r"pypto_api_([0-9a-f]{7,40})\.yaml")
_HEX = re.compile(r"[0-9a-fA-F]{7,40}")


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
    commit: str | None = None  # the source commit a statically read manifest was made from (None: a wheel)
    commit_date: str = ""  # its date (YYYY-MM-DD)

    @property
    def label(self) -> str:
        """How messages name this target: ``0.2.0`` or ``commit 883e7dfb0 (2026-08-22)``."""
        if self.commit is None:
            return self.release
        return f"commit {self.commit[:9]}" + (f" ({self.commit_date})" if self.commit_date else "")

    @property
    def target(self) -> str:
        """The value of ``--target-pypto`` that selects this manifest."""
        return self.release if self.commit is None else self.commit[:9]

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


def load_api_surface(target: str | None = None) -> ApiSurface:
    """The manifest of ``target`` (None: the pinned release) with the notes, loaded once per process
    (and kept between processes keyed by the files' hash, :mod:`opdesign.catalog.store`).

    Raises :class:`opdesign.errors.InputError` for a target no shipped manifest has."""
    return _load_manifest(manifest_file(target))


def _clear() -> None:
    _load_manifest.cache_clear()
    manifest_file.cache_clear()


load_api_surface.cache_clear = _clear  # type: ignore[attr-defined]  # as a functools.cache function


def manifest_files() -> list[str]:
    """The shipped manifests: the pinned release first, then the source commits by file name."""
    folder = data_dir("constraints")
    commits = sorted(p.name for p in folder.glob("pypto_api_*.yaml") if _COMMIT_FILE.fullmatch(p.name))
    return [PINNED_MANIFEST, *commits]


def known_targets() -> list[str]:
    """The values ``--target-pypto`` accepts (release, then commit prefixes), for messages."""
    return [_load_manifest(name).target for name in manifest_files()]


@cache
def manifest_file(target: str | None) -> str:
    """The manifest file of a target (see the module docstring)."""
    if target is None:
        return PINNED_MANIFEST
    value = str(target).strip()
    release = value[1:] if value[:1] in ("r", "v") and value[1:2].isdigit() else value
    for name in manifest_files():
        surface = _load_manifest(name)
        if surface.commit is None and release == surface.release:
            return name
        if surface.commit is not None and _HEX.fullmatch(value) and surface.commit.startswith(value.lower()):
            return name
    from opdesign.errors import InputError

    raise InputError(f"target-pypto: no API manifest for {value!r}; known: {', '.join(known_targets())} "
                     "(a later commit needs its manifest: scripts/gen_pypto_api_source.py)")


def check_target(target: str | None) -> str | None:
    """``target`` unchanged when a shipped manifest has it (None: the pinned release), else InputError."""
    if target is not None:
        manifest_file(target)
    return target


def later_surfaces(surface: ApiSurface) -> list[ApiSurface]:
    """The manifests newer than ``surface`` (commits after it by date; every commit manifest is newer
    than the pinned release), oldest first."""
    out = []
    for name in manifest_files():
        other = _load_manifest(name)
        if other.commit is None or other.commit == surface.commit:
            continue
        if surface.commit is None or other.commit_date > surface.commit_date:
            out.append(other)
    return sorted(out, key=lambda s: (s.commit_date, s.commit or ""))


@cache
def _load_manifest(name: str) -> ApiSurface:
    folder = data_dir("constraints")
    files = [folder / name, folder / "pypto_api_notes.yaml"]
    kind = "pypto_api" if name == PINNED_MANIFEST else f"pypto_api-{name.removesuffix('.yaml')}"
    return load_cached(kind, folder, files, lambda: _read_api_surface(name))


def _read_api_surface(name: str = PINNED_MANIFEST) -> ApiSurface:
    manifest, notes = _load(name), _load("pypto_api_notes.yaml")
    return ApiSurface(release=str(manifest["release"]), modules=manifest["modules"],
                      value_classes=manifest["value_classes"], missing=notes["missing"],
                      method_notes=notes["methods"], non_tensor=frozenset(notes["non_tensor_results"]),
                      runtime_limits=notes.get("runtime_limits", {}),
                      reexported_at_top=frozenset(notes.get("reexported_at_top", [])),
                      runtime_options=frozenset(notes.get("runtime_options", [])),
                      commit=manifest.get("commit"), commit_date=str(manifest.get("commit_date", "")))


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
