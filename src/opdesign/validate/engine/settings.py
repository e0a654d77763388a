"""The configuration of ``opdesign validate``, found and read as ruff finds and reads its own.

Discovery: for each checked path, the folder it is in (a folder: itself), then each parent up to the
file-system root; in each folder, ``opdesign.toml`` first (its top-level keys are the settings), then
``pyproject.toml`` when it has a ``[tool.opdesign]`` table (a ``pyproject.toml`` without one is passed
over). The first found wins; nothing is merged. No file found: the defaults (every rule, the pinned
PyPTO release). ``opdesign validate --show-settings PATH`` prints what was resolved and from where.

Keys (as ruff spells them):

- ``select``: rule ids or id prefixes to run (``["OD-PC", "C-TILE-02"]``; default: all);
- ``ignore``: rule ids or prefixes not to report (applied after ``select``);
- ``per-file-ignores``: a table ``"glob" = ["ID", ...]``; a glob with ``/`` matches the path relative
  to the configuration file's folder, one without matches the file name (``"*_impl.py"``);
- ``target-pypto``: the PyPTO release or commit kernels are checked against (``"0.2.0"``, a commit
  prefix of a shipped manifest); ``--target-pypto`` overrides it;
- ``exclude``: globs (same matching as ``per-file-ignores``) of paths not checked at all.

An unknown key, a value of the wrong type, an unknown rule id or prefix and an unknown target are
a :class:`opdesign.errors.ConfigError` naming the file and the key (exit code 2). Findings of
unusable input (OD-DOC-01) are never filtered: they decide exit code 2.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from opdesign.errors import ConfigError, InputError

CONFIG_FILES = ("opdesign.toml", "pyproject.toml")
KEYS = ("select", "ignore", "per-file-ignores", "target-pypto", "exclude")
#: never filtered: unusable input decides exit code 2
UNFILTERED = frozenset({"OD-DOC-01"})


@dataclass(frozen=True)
class Settings:
    """Resolved settings (defaults when ``source`` is None)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    target_pypto: str | None = None
    exclude: tuple[str, ...] = ()
    source: Path | None = None  # the file the settings came from
    target_from: str = "default"  # default | configuration | command line
    _rule_cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @property
    def root(self) -> Path | None:
        """The folder of the configuration file (globs are relative to it)."""
        return self.source.parent if self.source is not None else None

    def with_target(self, target: str | None) -> Settings:
        """These settings with ``target-pypto`` from the command line (None: unchanged)."""
        if target is None:
            return self
        _check_target(target, "--target-pypto")
        return replace(self, target_pypto=target, target_from="command line", _rule_cache={})

    def digest(self) -> str:
        """What the findings depend on (the cache key's share of the settings)."""
        data = {"select": self.select, "ignore": self.ignore, "per_file_ignores": self.per_file_ignores,
                "target": self.target_pypto, "root": str(self.root) if self.per_file_ignores else None}
        return hashlib.blake2b(json.dumps(data, sort_keys=True).encode(), digest_size=16).hexdigest()

    def _relative(self, path: str) -> str:
        given = Path(path)
        if self.root is None:
            return given.as_posix()
        try:
            return given.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError):
            return given.as_posix()

    def _matches(self, pattern: str, path: str) -> bool:
        rel = self._relative(path)
        if "/" in pattern.rstrip("/"):
            return fnmatchcase(rel, pattern.rstrip("/")) or fnmatchcase(rel, pattern.rstrip("/") + "/*")
        return any(fnmatchcase(part, pattern.rstrip("/")) for part in Path(rel).parts)

    def excluded(self, path: str) -> bool:
        """True when ``exclude`` names the path (or a folder above it)."""
        return any(self._matches(p, path) for p in self.exclude)

    def reports(self, rule_id: str, file: str) -> bool:
        """True when a finding of ``rule_id`` in ``file`` is reported under these settings."""
        if rule_id in UNFILTERED:
            return True
        key = (rule_id, file)
        hit = self._rule_cache.get(key)
        if hit is None:
            hit = (self.select is None or _selected(rule_id, self.select)) and not _selected(rule_id, self.ignore) \
                and not any(_selected(rule_id, ids) for glob, ids in self.per_file_ignores if self._matches(glob, file))
            self._rule_cache[key] = hit
        return hit

    def describe(self) -> str:
        """The resolved settings as text (``--show-settings``)."""
        where = f"{self.source}" + (" ([tool.opdesign])" if self.source and self.source.name == "pyproject.toml"
                                    else "") if self.source else "none found: defaults"
        lines = [f"settings file: {where}",
                 "discovery: from the checked path's folder upward, in each folder opdesign.toml, then "
                 "pyproject.toml with [tool.opdesign]; the first found wins",
                 f"select = {json.dumps(list(self.select)) if self.select is not None else '(all rules)'}",
                 f"ignore = {json.dumps(list(self.ignore))}",
                 "per-file-ignores = {" + ", ".join(f"{json.dumps(g)} = {json.dumps(list(ids))}"
                                                    for g, ids in self.per_file_ignores) + "}",
                 f"target-pypto = {json.dumps(self.target_pypto) if self.target_pypto else '(pinned release)'}"
                 f" ({self.target_from})",
                 f"exclude = {json.dumps(list(self.exclude))}"]
        return "\n".join(lines) + "\n"


def _selected(rule_id: str, patterns: tuple[str, ...]) -> bool:
    return any(rule_id == p or (rule_id.startswith(p) and (p.endswith("-") or rule_id[len(p)] in "-0123456789"))
               for p in patterns)


def _known_ids() -> set[str]:
    from opdesign.validate.engine.collect import all_rules

    return set(all_rules())


def _check_target(target: str, key: str) -> None:
    from opdesign.catalog.pypto_api import manifest_file

    try:
        manifest_file(target)
    except InputError as err:
        raise ConfigError(err.message.replace("target-pypto:", f"{key}:", 1)) from None


def _ids(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of rule ids (strings), got {value!r}")
    known = _known_ids()
    for rule_id in value:
        if rule_id != "ALL" and not any(_selected(k, (rule_id,)) for k in known):
            raise ConfigError(f"{where}: unknown rule id {rule_id!r} (`opdesign rules` lists them)")
    return tuple(value)


def _globs(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: expected a list of glob strings, got {value!r}")
    return tuple(value)


def parse(table: Any, source: Path) -> Settings:
    """Settings from the ``[tool.opdesign]`` table (or an ``opdesign.toml``) read from ``source``."""
    section = f"{source} [tool.opdesign]" if source.name == "pyproject.toml" else str(source)
    if not isinstance(table, dict):
        raise ConfigError(f"{section}: expected a table of settings, got {type(table).__name__}")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{section}: unknown key {unknown[0]!r} (known keys: {', '.join(KEYS)})",
                          {"file": str(source), "key": unknown[0]})
    select = table.get("select")
    selected = None if select is None else _ids(select, f"{section}: select")
    if selected is not None and "ALL" in selected:
        selected = None
    ignore = _ids(table.get("ignore", []), f"{section}: ignore")
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{section}: per-file-ignores: expected a table \"glob\" = [ids], got {pfi!r}")
    per_file = tuple((glob, _ids(ids, f"{section}: per-file-ignores.{glob}")) for glob, ids in sorted(pfi.items()))
    target = table.get("target-pypto")
    if target is not None:
        if not isinstance(target, str) or not target:
            raise ConfigError(f"{section}: target-pypto: expected a release or commit string, got {target!r}")
        _check_target(target, f"{section}: target-pypto")
    exclude = _globs(table.get("exclude", []), f"{section}: exclude")
    return Settings(select=selected, ignore=ignore, per_file_ignores=per_file, target_pypto=target,
                    exclude=exclude, source=source, target_from="configuration" if target else "default")


def read_file(path: Path) -> Settings | None:
    """The settings in ``path`` (None: a ``pyproject.toml`` without ``[tool.opdesign]``)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read: {err}") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        if not isinstance(tool, dict) or "opdesign" not in tool:
            return None
        return parse(tool["opdesign"], path)
    return parse(data, path)


@cache
def _for_folder(folder: Path) -> Settings:
    for name in CONFIG_FILES:
        candidate = folder / name
        if candidate.is_file():
            found = read_file(candidate)
            if found is not None:
                return found
    parent = folder.parent
    return Settings() if parent == folder else _for_folder(parent)


def discover(path: str | Path) -> Settings:
    """The settings that apply to ``path`` (see the module docstring for the order)."""
    given = Path(path)
    try:
        folder = given.resolve()
    except (OSError, RuntimeError):
        folder = given.absolute()
    if not folder.is_dir():
        folder = folder.parent
    return _for_folder(folder)


def clear() -> None:
    """Forget discovered settings (a test that writes configuration files)."""
    _for_folder.cache_clear()
