"""Atomic artifact writing: every target checked first, each file written to a temporary file
beside it and renamed into place (``os.replace``); on failure nothing new is left behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from opdesign.errors import InputError, OutputExistsError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_artifacts(files: dict[str, str], out_dir: str | Path, force: bool = False) -> list[Path]:
    """Write rendered files under ``out_dir``: all or nothing, as far as the file system allows.

    Every target is checked before anything is written (a parent that is a
    file, a target that is a folder, an existing file without ``force``); then
    each file is written to a temporary file beside it and renamed into place
    with the usual ``0o666 & ~umask`` mode. If a write still fails, the files
    and folders this call created are removed again.

    Raises:
        OutputExistsError: a target exists and ``force`` is False (nothing written).
        InputError: a target or one of its parents is of the wrong kind, or a
            write failed (nothing new is left behind).
    """
    out = Path(out_dir)
    targets = [out / rel for rel in files]
    try:
        problems = []
        for target in targets:
            for parent in reversed(target.parents):
                if parent.exists() and not parent.is_dir():
                    problems.append(f"{parent} exists and is not a directory")
            if target.is_dir():
                problems.append(f"{target} is a directory")
        if problems:
            raise InputError(f"{out}: cannot write artifacts: {'; '.join(sorted(set(problems)))}")
        existing = [str(t) for t in targets if t.exists()]
    except OSError as err:  # e.g. a path component longer than the file system allows
        raise InputError(f"{out}: unusable output path: {err.strerror or err}") from None
    if existing and not force:
        raise OutputExistsError(f"refusing to overwrite {', '.join(existing)} (use --force)", details=existing)
    mode = 0o666 & ~_umask()
    created_dirs: list[Path] = []
    created_files: list[Path] = []
    try:
        for target, text in zip(targets, files.values()):
            for parent in reversed(target.parents):
                if not parent.exists():
                    parent.mkdir()
                    created_dirs.append(parent)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(text)
                os.chmod(tmp, mode)
                if not target.exists():
                    created_files.append(target)
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except (OSError, UnicodeError) as err:
        for path in created_files:
            path.unlink(missing_ok=True)
        for folder in reversed(created_dirs):
            shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"{out}: cannot write artifacts: {getattr(err, 'strerror', None) or err}") from None
    return targets
