"""Validate many paths: settings per path, ``-j N`` worker processes, and the on-disk findings cache.

:func:`validate_paths` is what ``opdesign validate`` runs. Each argument (a DESIGN.md, a kernel ``.py``
or an operator folder) is one task; the tasks run in argument order, or over ``jobs`` worker processes
(:class:`concurrent.futures.ProcessPoolExecutor`, results collected in argument order, so the report
is the same for any ``jobs``). The settings of each path are discovered (:mod:`opdesign.validate.engine.settings`);
its findings are filtered by them (``select`` / ``ignore`` / ``per-file-ignores``); ``exclude`` drops
paths.

The cache (``.opdesign_cache/`` in the root, as ruff keeps ``.ruff_cache/``): one JSON file per task,
named by a digest of everything its findings depend on: the path as given, the bytes of every file
the task reads (the DESIGN.md, its ``eval/module_interfaces.yaml`` or the fact that it is missing,
each kernel ``.py`` of a folder), the resolved settings, the rule-set version (the size and mtime of
every opdesign module and shipped data file, :func:`ruleset_version`) and the opdesign version. The
root is the folder of the configuration file, else the working directory; a path outside the root is
not cached, and nothing is written when the root (or an existing cache folder) is not writable. Files
are written to a temporary name and renamed (atomic); a damaged entry is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from opdesign.validate import engine
from opdesign.validate.engine.settings import Settings, discover
from opdesign.validate.model import UNUSABLE_RULE, Finding, Report, SuppressedFinding
from opdesign.validate.parse.textinput import Unusable

CACHE_DIR = ".opdesign_cache"
_FORMAT = "opdesign-validate-cache-1"
#: below this many tasks a run stays in one process (starting workers costs more)
MIN_PARALLEL_TASKS = 4


def default_jobs() -> int:
    """``-j`` of the command line: every core; 1 under pytest."""
    if "PYTEST_CURRENT_TEST" in os.environ:
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def default_cache() -> bool:
    """The cache is on for the command line, off under pytest (a test asks for it)."""
    return "PYTEST_CURRENT_TEST" not in os.environ


@cache
def ruleset_version() -> str:
    """Digest of the code and data the rules are made of: name, size and mtime of every ``.py`` of the
    opdesign package and every file of its shipped data folders (a changed rule or manifest is another
    version), with the opdesign and Python versions."""
    from opdesign.io.paths import DATA_NAMES, data_dir
    from opdesign.validate.output import _version

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{_FORMAT}\x00{_version()}\x00{sys.version}".encode())
    package = Path(engine.__file__).resolve().parents[1]
    roots = [package] + [data_dir(name) for name in DATA_NAMES]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                st = path.stat()
                h.update(f"{path.relative_to(root).as_posix()}\x00{st.st_size}\x00{st.st_mtime_ns}\x00".encode())
    return h.hexdigest()


def _inputs(given: str) -> list[Path]:
    """The files one argument's findings are read from (as :func:`engine._validate_file` reads them)."""
    path = Path(given)
    if path.suffix == ".py" and not path.is_dir():
        return [path]
    found: list[Path] = []
    if path.is_dir():
        found += engine._kernel_files(path)
        path = path / engine.DESIGN_NAME
    return [path, path.parent.joinpath(*engine.INTERFACES_PATH), *found]


def _read_all(paths: list[Path]) -> dict[Path, bytes | Unusable]:
    out: dict[Path, bytes | Unusable] = {}
    for path in paths:
        try:
            out[path] = engine._read_bytes(path)
        except Unusable as err:
            out[path] = err
    return out


def _key(given: str, data: dict[Path, bytes | Unusable], settings: Settings) -> str:
    h = hashlib.blake2b(digest_size=20)
    for part in (_FORMAT, ruleset_version(), settings.digest(), given):
        h.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    for path, value in data.items():
        h.update(str(path).encode("utf-8", "surrogatepass") + b"\x00")
        if isinstance(value, Unusable):
            h.update(b"\x02" + str(value).encode("utf-8", "surrogatepass"))
        else:
            h.update(b"\x01" + len(value).to_bytes(8, "little") + value)
    return h.hexdigest()


def cache_folder(given: str, settings: Settings) -> Path | None:
    """Where the findings of ``given`` may be cached: ``<root>/.opdesign_cache``, or None (outside the
    root, a root or cache folder that is not writable)."""
    root = (settings.root or Path.cwd()).resolve()
    try:
        Path(given).resolve().relative_to(root)
    except (ValueError, OSError):
        return None
    folder = root / CACHE_DIR
    if folder.exists():
        return folder if folder.is_dir() and os.access(folder, os.W_OK) else None
    return folder if os.access(root, os.W_OK) else None


def _load(file: Path) -> tuple[list[str], list[Finding]] | None:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        findings = [SuppressedFinding(**f) if "suppressed_by" in f else Finding(**f) for f in data["findings"]]
        return list(data["files"]), findings
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(folder: Path, file: Path, files: list[str], findings: list[Finding]) -> None:
    try:
        if not folder.exists():
            folder.mkdir()
            (folder / ".gitignore").write_text("# created by opdesign validate\n*\n", encoding="utf-8")
            (folder / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n"
                                                 "# opdesign validate's findings cache\n", encoding="utf-8")
        file.parent.mkdir(exist_ok=True)
        text = json.dumps({"files": files, "findings": [f.model_dump() for f in findings]}, ensure_ascii=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a cache that cannot be written only costs the recomputation


def _filter(files: list[str], findings: list[Finding], settings: Settings) -> tuple[list[str], list[Finding]]:
    if settings.exclude:
        files = [f for f in files if not settings.excluded(f)]
        findings = [f for f in findings if f.rule == UNUSABLE_RULE or not settings.excluded(f.file)]
    if settings.select is not None or settings.ignore or settings.per_file_ignores:
        findings = [f for f in findings if settings.reports(f.rule, f.file)]
    return files, findings


def run_task(given: str, settings: Settings, use_cache: bool) -> tuple[list[str], list[Finding]]:
    """(files, findings) of one argument under its settings, from the cache when it has them."""
    folder = cache_folder(given, settings) if use_cache else None
    if folder is None:
        return _filter(*engine._validate_file(given, settings.target_pypto), settings)
    data = _read_all(_inputs(given))
    key = _key(given, data, settings)
    file = folder / key[:2] / f"{key}.json"
    hit = _load(file) if file.is_file() else None
    if hit is not None:
        return hit
    engine._PRELOADED.update(data)  # the bytes the key was made of are the bytes checked
    try:
        files, findings = _filter(*engine._validate_file(given, settings.target_pypto), settings)
    finally:
        engine._PRELOADED.clear()
    _store(folder, file, files, findings)
    return files, findings


def _run_chunk(tasks: list[tuple[str, Settings, bool]]) -> list[tuple[list[str], list[Finding]]]:
    return [run_task(*task) for task in tasks]


def validate_paths(paths: Iterable[str | Path], *, target_pypto: str | None = None, jobs: int = 1,
                  use_cache: bool = False, settings: Settings | None = None) -> Report:
    """Validate DESIGN.md files, kernel ``.py`` files or operator directories.

    Each DESIGN.md is checked with the ``eval/module_interfaces.yaml`` beside it; a directory means
    its DESIGN.md and its ``*_kernel.py`` / ``*_impl.py`` files (each finding names its file).
    ``Report.exit_code`` is 2 when an input is unusable, else 1 with any error-level finding, else 0.
    Each path is checked under the configuration found for it (``settings`` forces one), against
    ``target_pypto`` when given (over the configuration's); ``jobs`` and ``use_cache``: see the module
    docstring. The report is the same for every ``jobs``.
    """
    tasks: list[tuple[str, Settings, bool]] = []
    for given in paths:
        resolved = (settings or discover(given)).with_target(target_pypto)
        if resolved.exclude and resolved.excluded(str(given)):
            continue
        tasks.append((str(given), resolved, use_cache))
    if jobs > 1 and len(tasks) >= MIN_PARALLEL_TASKS:
        results = _parallel(tasks, jobs)
    else:
        results = _run_chunk(tasks)
    files: list[str] = []
    findings: list[Finding] = []
    for names, found in results:
        files += names
        findings += found
    return Report.build(files, findings)


def _parallel(tasks: list[tuple[str, Settings, bool]], jobs: int) -> list[tuple[list[str], list[Finding]]]:
    from concurrent.futures import ProcessPoolExecutor

    workers = min(jobs, len(tasks))
    size = max(1, min(64, len(tasks) // (workers * 4)))  # chunks: few round trips, balanced ends
    chunks = [tasks[i:i + size] for i in range(0, len(tasks), size)]
    out: list[tuple[list[str], list[Finding]]] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for part in pool.map(_run_chunk, chunks):
            out += part
    return out
