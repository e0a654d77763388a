"""All-or-nothing artifact writing: stage every file in one hidden folder, publish it in one step.

Under an exclusive lock (``flock`` on the folder that holds the target; a second writer waits, and
gets ``busy`` after :data:`LOCK_WAIT_S`):

1. staging folders (``.opdesign-staging-*``) that a killed run left are removed (one inside the
   target that was publishing file by file is rolled back first, from its journal);
2. every file is written into a new ``.opdesign-staging-<random>`` folder (``O_EXCL``);
3. ``before_publish`` runs (the CLI prints its messages there: a broken stdout stops the run with
   nothing published);
4. the staging folder is published: renamed to the target when there is none (``renameat2`` with
   ``RENAME_NOREPLACE`` where the kernel has it); exchanged with the target in one
   ``renameat2(RENAME_EXCHANGE)`` when the target holds nothing but opdesign artifacts; otherwise
   (other files in the target, or no ``renameat2``) opdesign's own files are renamed in one by one with
   a journal, and any failure puts the old files back.

Every folder and file is reached through descriptors (``dir_fd``), never by a second name resolution.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from opdesign.errors import InputError, OutputExistsError, PathOutsideRootError, ToolIOError
from opdesign.io.fdops import (
    RENAME_EXCHANGE,
    RENAME_NOREPLACE,
    exists,
    lock,
    open_dir,
    renameat2,
    rmtree_at,
    subdir,
    umask,
)
from opdesign.io.safefs import CLOEXEC, DIR_FLAGS, NOFOLLOW, Jail, Resolved

STAGING_PREFIX = ".opdesign-staging-"
#: Staging folders inside a target (file-by-file publish): only a writer of that target removes them.
INSIDE_PREFIX = STAGING_PREFIX + "in-"
JOURNAL = ".journal"


def _recover(target_fd: int, staging: str) -> None:
    """Roll back a file-by-file publish that a killed run left in ``staging`` (inside the target)."""
    try:
        with open(os.open(f"{staging}/{JOURNAL}", os.O_RDONLY | NOFOLLOW | CLOEXEC, dir_fd=target_fd), "rb") as fh:
            journal = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        journal = None
    if journal:
        _rollback(target_fd, staging, journal)
    rmtree_at(staging, target_fd)


def _rollback(target_fd: int, staging: str, journal: dict) -> None:
    for index, (rel, had_old) in enumerate(journal["files"]):
        base = os.path.basename(rel)
        folder = subdir(target_fd, rel, create=False)
        if folder is None:
            continue
        try:
            old = f"{staging}/.old/{index}"
            if exists(target_fd, old):
                os.rename(old, base, src_dir_fd=target_fd, dst_dir_fd=folder)
            elif not had_old and not exists(target_fd, f"{staging}/{rel}"):
                os.unlink(base, dir_fd=folder)
        except OSError:
            pass
        finally:
            os.close(folder)
    if journal.get("created_dirs"):
        for rel in reversed(journal["created_dirs"]):
            try:
                os.rmdir(rel, dir_fd=target_fd)
            except OSError:
                pass


def _clean_stale(fd: int, inside_target: bool) -> None:
    """Remove what killed runs left: staging folders beside targets in the folder ``fd`` (the lock holder's
    folder), or, with ``inside_target``, journaled ones inside the target ``fd`` (rolled back first)."""
    for entry in list(os.scandir(fd)):
        if inside_target and entry.name.startswith(INSIDE_PREFIX):
            _recover(fd, entry.name)
        elif not inside_target and entry.name.startswith(STAGING_PREFIX) and not entry.name.startswith(INSIDE_PREFIX):
            rmtree_at(entry.name, fd)


def _stage(files: dict[str, bytes], at_fd: int, mode: int, prefix: str = STAGING_PREFIX) -> str:
    """A new staging folder below ``at_fd`` holding ``files``; its name."""
    while True:
        name = prefix + secrets.token_hex(8)
        try:
            os.mkdir(name, 0o700, dir_fd=at_fd)
            break
        except FileExistsError:
            continue
    try:
        fd = os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=at_fd)
        try:
            os.fchmod(fd, mode)
            for rel, data in files.items():
                folder = subdir(fd, rel, create=True)
                try:
                    out = os.open(os.path.basename(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC,
                                  0o666, dir_fd=folder)
                    with open(out, "wb") as fh:
                        fh.write(data)
                finally:
                    os.close(folder)
        finally:
            os.close(fd)
    except BaseException:
        rmtree_at(name, at_fd)
        raise
    return name


def _artifact_dirs(target_fd: int, files: dict[str, bytes], display: str, jail: Jail | None,
                   target_res: Resolved | None) -> dict[str, int | None]:
    """Descriptor of each artifact folder inside an existing target (None: absent); symlinked ones
    are followed inside the jail only."""
    out: dict[str, int | None] = {}
    for rel in files:
        folder = os.path.dirname(rel)
        if folder in out:
            continue
        if not folder:
            out[folder] = os.dup(target_fd)
            continue
        where = f"{display}/{folder}"
        try:
            out[folder] = open_dir(folder, target_fd)
        except FileNotFoundError:
            out[folder] = None
        except OSError as err:
            if err.errno == errno.ENOTDIR:
                raise InputError(f"{where} exists and is not a directory", {"path": where}) from None
            if err.errno not in (errno.ELOOP, errno.EMLINK):
                raise
            if jail is None:  # the CLI follows a symlinked folder, as any tool writing there would
                out[folder] = os.open(folder, DIR_FLAGS, dir_fd=target_fd)
                continue
            try:
                res = jail.walk(folder, "out_dir", start=target_res, want="dir")
            except PathOutsideRootError:
                raise PathOutsideRootError(f"out_dir: {where} is a symlink that leaves the tool root",
                                           {"field": "out_dir", "path": where}) from None
            out[folder] = os.dup(res.fd)
            res.close()
    return out


def _only_artifacts(target_fd: int, files: dict[str, bytes]) -> bool:
    allowed: dict[str, set[str]] = {}
    for rel in files:
        head, _, tail = rel.partition("/")
        allowed.setdefault(head if tail else "", set()).add(tail or head)
    for entry in os.scandir(target_fd):
        if entry.name in allowed.get("", set()) and entry.is_file(follow_symlinks=False):
            continue
        if entry.name in allowed and entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, DIR_FLAGS | NOFOLLOW, dir_fd=target_fd)
            try:
                if all(e.name in allowed[entry.name] and e.is_file(follow_symlinks=False) for e in os.scandir(sub)):
                    continue
            finally:
                os.close(sub)
        return False
    return True


#: The header opdesign writes on line 3 of a kernel and a scaffold: with the op-named first line
#: (``"""<op>: SK-..`` / ``"""Numpy scaffold of <op>:``) it marks a file as opdesign's own.
MARKER = b"Generated by opdesign from the SPEC"


def owner(name: str, head: bytes) -> str | None:
    """The op whose generated kernel or scaffold this is (file ``name``, its first bytes ``head``), else None."""
    for suffix, opener in (("_kernel.py", '"""{op}: '), ("_scaffold.py", '"""Numpy scaffold of {op}: ')):
        op = name[: -len(suffix)] if name.endswith(suffix) else None
        if not op:
            continue
        lines = head.split(b"\n", 3)
        if (len(lines) > 2 and lines[0].startswith(opener.format(op=op).encode("utf-8"))
                and lines[2].startswith(MARKER)):
            return op
    return None


def _stale(target_fd: int, files: dict[str, bytes]) -> list[str]:
    """Kernels and scaffolds of another operator that opdesign wrote into the target (its header marker):
    ``new --force`` removes them with the publish, so a folder never holds two operators' artifacts."""
    found = []
    for entry in sorted(os.scandir(target_fd), key=lambda e: e.name):
        if entry.name in files or not entry.is_file(follow_symlinks=False):
            continue
        if not entry.name.endswith(("_kernel.py", "_scaffold.py")):
            continue
        try:
            fd = os.open(entry.name, os.O_RDONLY | NOFOLLOW | CLOEXEC, dir_fd=target_fd)
        except OSError:
            continue
        with open(fd, "rb") as fh:
            head = fh.read(4096)
        if owner(entry.name, head) is not None:
            found.append(entry.name)
    return found


def publish(files: dict[str, str], parent_fd: int | None, name: str | None, force: bool, display: str, *,
            target_fd: int | None = None, jail: Jail | None = None, target_res: Resolved | None = None,
            before_publish: Callable[[], None] | None = None, force_hint: str = "use --force") -> list[str]:
    """Publish ``files`` (relative path -> text) as folder ``name`` of ``parent_fd`` (or into the open
    folder ``target_fd`` when it has no parent inside the jail). Returns ``display/<rel>`` per file.
    ``force_hint`` ends the ``output_exists`` message: how the caller says force (a flag, a tool argument).

    Raises:
        OutputExistsError: an artifact exists and ``force`` is False (nothing written).
        BusyError: another writer kept the lock.  InputError / ToolIOError: a target of the wrong kind,
        or a write the file system refused (the old output is intact, nothing new is left).
    """
    try:
        data = {rel: text.encode("utf-8") for rel, text in files.items()}
    except UnicodeError as err:
        raise InputError(f"{display}: cannot write artifacts: {err}") from None
    shown = [f"{display}/{rel}" for rel in files]
    lock_fd = lock(parent_fd if parent_fd is not None else target_fd, display)
    opened: list[int] = []
    try:
        if parent_fd is not None:
            _clean_stale(parent_fd, inside_target=False)
            try:
                target_fd = open_dir(name, parent_fd)
                opened.append(target_fd)
            except FileNotFoundError:
                target_fd = None
            except OSError as err:
                if err.errno == errno.ENOTDIR:
                    raise InputError(f"{display} exists and is not a directory", {"path": display}) from None
                if err.errno in (errno.ELOOP, errno.EMLINK):
                    raise ToolIOError(f"{display}: replaced by a symlink while writing (refused)",
                                      {"path": display}) from None
                raise
        if target_fd is None:
            staging = _stage(data, parent_fd, 0o777 & ~umask())
            try:
                if before_publish is not None:
                    before_publish()
                if not renameat2(parent_fd, staging, parent_fd, name, RENAME_NOREPLACE):
                    if exists(parent_fd, name):
                        raise OutputExistsError(f"{display} appeared while writing (nothing written)", [display])
                    os.rename(staging, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            except BaseException:
                rmtree_at(staging, parent_fd)
                raise
            return shown
        _clean_stale(target_fd, inside_target=True)
        dirs = _artifact_dirs(target_fd, data, display, jail, target_res)
        opened += [fd for fd in dirs.values() if fd is not None]
        existing, had = [], {}
        for rel in data:
            folder = dirs[os.path.dirname(rel)]
            had[rel] = folder is not None and exists(folder, os.path.basename(rel))
            if had[rel]:
                info = os.stat(os.path.basename(rel), dir_fd=folder, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise InputError(f"{display}/{rel} is a directory", {"path": f"{display}/{rel}"})
                existing.append(f"{display}/{rel}")
        if existing and not force:
            raise OutputExistsError(f"refusing to overwrite {', '.join(existing)} ({force_hint})", existing)
        stale = _stale(target_fd, data) if force else []
        if parent_fd is not None and not stale and _only_artifacts(target_fd, data):
            staging = _stage(data, parent_fd, stat.S_IMODE(os.fstat(target_fd).st_mode))
            try:
                if before_publish is not None:
                    before_publish()
                if renameat2(parent_fd, staging, parent_fd, name, RENAME_EXCHANGE):
                    rmtree_at(staging, parent_fd)  # now the old output
                    return shown
            except BaseException:
                rmtree_at(staging, parent_fd)
                raise
            rmtree_at(staging, parent_fd)
            before_publish = None  # already done
        _per_file(data, target_fd, dirs, had, before_publish, remove=stale)
        return shown
    except OSError as err:
        raise ToolIOError(f"{display}: cannot write artifacts: {err.strerror or err}"
                          + (" (nothing written)"), {"path": display}) from None
    finally:
        for fd in opened:
            os.close(fd)
        os.close(lock_fd)


def _per_file(data: dict[str, bytes], target_fd: int, dirs: dict[str, int | None], had: dict[str, bool],
              before_publish: Callable[[], None] | None, remove: list[str] = ()) -> None:
    """Rename the staged files into the target one by one, with a journal; any failure rolls back.
    ``remove``: top-level files of the target moved out with the publish (another operator's artifacts),
    journalled like the replaced ones, so a rollback puts them back."""
    staging = _stage(data, target_fd, 0o700, INSIDE_PREFIX)
    journal = {"files": [[rel, had[rel]] for rel in data] + [[rel, True] for rel in remove], "created_dirs": []}
    try:
        if before_publish is not None:
            before_publish()
        for folder, fd in list(dirs.items()):
            if fd is None:
                journal["created_dirs"].append(folder)
        _write_journal(target_fd, staging, journal)
        for folder in journal["created_dirs"]:
            os.mkdir(folder, 0o777, dir_fd=target_fd)
            dirs[folder] = os.open(folder, DIR_FLAGS | NOFOLLOW, dir_fd=target_fd)
        os.mkdir(f"{staging}/.old", 0o700, dir_fd=target_fd)
        for index, rel in enumerate(data):
            folder, base = dirs[os.path.dirname(rel)], os.path.basename(rel)
            if had[rel]:
                os.rename(base, f"{staging}/.old/{index}", src_dir_fd=folder, dst_dir_fd=target_fd)
            os.rename(f"{staging}/{rel}", base, src_dir_fd=target_fd, dst_dir_fd=folder)
        for index, rel in enumerate(remove, start=len(data)):
            os.rename(rel, f"{staging}/.old/{index}", src_dir_fd=target_fd, dst_dir_fd=target_fd)
    except BaseException:
        _rollback(target_fd, staging, journal)
        rmtree_at(staging, target_fd)
        raise
    finally:
        for folder in journal["created_dirs"]:
            if dirs.get(folder) is not None:
                os.close(dirs.pop(folder))
    rmtree_at(staging, target_fd)


def _write_journal(target_fd: int, staging: str, journal: dict) -> None:
    fd = os.open(f"{staging}/{JOURNAL}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, 0o600,
                 dir_fd=target_fd)
    with open(fd, "w", encoding="utf-8") as fh:
        json.dump(journal, fh)


def write_artifacts(files: dict[str, str], out_dir: str | Path, force: bool = False,
                    before_publish: Callable[[], None] | None = None) -> list[Path]:
    """Write rendered files under ``out_dir`` (CLI and library use; symlinks followed): all or nothing.

    Missing parent folders are created (and removed again when the write fails).

    Raises:
        OutputExistsError: a target exists and ``force`` is False (nothing written).
        InputError / ToolIOError: a target or a parent of the wrong kind, or a write the file system refused.
        BusyError: another writer kept the folder's lock.
    """
    out = Path(out_dir)
    try:
        real = os.path.realpath(out)
    except (OSError, ValueError) as err:
        raise InputError(f"{out}: unusable output path: {getattr(err, 'strerror', None) or err}") from None
    parent, name = os.path.split(real)
    if not name:
        raise InputError(f"{out}: cannot write artifacts into the file system root")
    created: list[str] = []
    try:
        probe = parent
        while not os.path.lexists(probe):
            created.append(probe)
            probe = os.path.dirname(probe)
        for folder in reversed(created):
            os.mkdir(folder)
        parent_fd = os.open(parent, DIR_FLAGS)
    except OSError as err:
        _remove_dirs(created)
        if err.errno in (errno.ENOTDIR, errno.EEXIST):
            raise InputError(f"{out}: cannot write artifacts: a parent exists and is not a directory") from None
        raise InputError(f"{out}: unusable output path: {err.strerror or err}") from None
    try:
        publish(files, parent_fd, name, force, str(out), before_publish=before_publish)
    except BaseException:
        _remove_dirs(created)
        raise
    finally:
        os.close(parent_fd)
    return [out / rel for rel in files]


def _remove_dirs(created: list[str]) -> None:
    for folder in created:
        try:
            os.rmdir(folder)
        except OSError:
            pass


# --- Where a design is written: the one source/target abstraction of the CLI and the agent ----------


class FolderTarget:
    """A plain folder (the CLI, library use): symlinks followed, missing parents created
    (:func:`write_artifacts`); ``out_dir`` None is ``./<default name>``."""

    def __init__(self, out_dir: str | Path | None = None) -> None:
        self.out_dir = out_dir
        self.display = ""

    def write(self, files: dict[str, str], default_name: str, force: bool,
              before_publish: Callable[[list[str]], None] | None = None) -> list[str]:
        """Write ``files`` all or nothing; the written paths (``out/rel``)."""
        out = Path(self.out_dir) if self.out_dir is not None else Path(default_name)
        self.display = str(out)
        paths = [str(out / rel) for rel in files]
        hook = (lambda: before_publish(paths)) if before_publish is not None else None
        return [str(path) for path in write_artifacts(files, out, force=force, before_publish=hook)]


class RootTarget:
    """A folder confined to a root (the agent tools): ``resolve(name)`` walks the root to the target
    folder (creating missing parents inside it); folders the walk created are removed again when
    publishing fails."""

    def __init__(self, resolve: Callable[[str], Resolved], jail: Jail, out_dir: str | None = None,
                 force_hint: str = "use --force") -> None:
        self.resolve, self.jail, self.out_dir, self.force_hint = resolve, jail, out_dir, force_hint
        self.display = ""

    def write(self, files: dict[str, str], default_name: str, force: bool,
              before_publish: Callable[[list[str]], None] | None = None) -> list[str]:
        """Publish ``files`` all or nothing; the written paths relative to the root (``dir/rel``)."""
        out = self.resolve(self.out_dir if self.out_dir is not None else default_name)
        try:
            if out.kind == "missing":
                parent_fd, name, target_fd = out.stack[-1], out.name, None
            elif out.names:
                parent_fd, name, target_fd = out.stack[-2], out.names[-1], None
            else:  # the root itself
                parent_fd, name, target_fd = None, None, out.fd
            self.display = "/".join(out.names + ([out.name] if out.name else [])) or "."
            paths = [f"{self.display}/{rel}" for rel in files]
            hook = (lambda: before_publish(paths)) if before_publish is not None else None
            return publish(files, parent_fd, name, force, self.display, target_fd=target_fd, jail=self.jail,
                           target_res=out if out.kind == "dir" else None, force_hint=self.force_hint,
                           before_publish=hook)
        except BaseException:
            self.jail.remove_created(out)
            raise
        finally:
            out.close()
