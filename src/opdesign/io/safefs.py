"""Files by handle: bounded reads of regular files, and a root jail resolved on open file descriptors.

Every read opens the file once (``O_NONBLOCK``, so a FIFO never blocks the open), checks the open
descriptor (``fstat``: a regular file, at most ``limit`` bytes) and reads at most ``limit + 1`` bytes
from it, so a file that grows, a FIFO, ``/dev/zero`` or a folder is refused before it is read.

:class:`Jail` resolves a path one component at a time from an open descriptor of the root
(``openat`` with ``O_NOFOLLOW``; a symlink is read with ``readlinkat`` and its target walked from the
descriptors already held, ``..`` pops the held stack), so the check that a path stays inside the
root and the use of the file are the same descriptor: swapping a component for a symlink between
the check and the use cannot lead outside.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from opdesign.errors import InputError, NotFoundError, PathOutsideRootError, TooLargeError, ToolIOError

CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC
#: Symlinks followed while resolving one path (as the kernel's MAXSYMLINKS).
MAX_LINKS = 40
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)


def _details(name: str, fieldname: str | None) -> dict:
    return {"field": fieldname, "path": name} if fieldname else {"path": name}


def read_fd(fd: int, limit: int, name: str, fieldname: str | None = None) -> bytes:
    """At most ``limit`` bytes of the regular file open on ``fd``; refuse anything else before reading it.

    Raises:
        InputError: not a regular file (folder, FIFO, device, socket).
        TooLargeError: the file is (or grows while read to) more than ``limit`` bytes.
    """
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{name}: is a folder, not a file", _details(name, fieldname))
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{name}: not a regular file", _details(name, fieldname))
    too_large = TooLargeError(f"{name}: larger than the limit of {limit} bytes",
                              {**_details(name, fieldname), "limit": limit})
    if info.st_size > limit:
        raise too_large
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise too_large
    return b"".join(chunks)


def open_error(err: OSError, name: str, fieldname: str | None = None) -> Exception:
    """The opdesign error for an ``open`` that failed with ``err``."""
    if err.errno in _LINK_ERRNOS:
        return NotFoundError(f"{name}: symlink loop (too many levels of symbolic links)", _details(name, fieldname))
    if err.errno in (errno.ENOENT, errno.ENOTDIR):
        return NotFoundError(f"{name}: does not exist", _details(name, fieldname))
    if err.errno == errno.ENAMETOOLONG:
        return InputError(f"{name}: path too long", _details(name, fieldname))
    return ToolIOError(f"{name}: cannot open: {err.strerror or err}", _details(name, fieldname))


def read_regular(path: str | Path, limit: int, fieldname: str | None = None, dir_fd: int | None = None) -> bytes:
    """Open ``path`` once (symlinks followed; not a jail) and return its bytes (:func:`read_fd`).

    Raises:
        NotFoundError: missing, or a symlink loop.  InputError: not a regular file or unusable path.
        TooLargeError: over ``limit`` bytes.  ToolIOError: any other refusal of the file system.
    """
    name = str(path)
    if "\x00" in name:
        raise InputError(f"{name!r}: not a usable path (NUL character)", _details(name, fieldname))
    try:
        fd = os.open(path, os.O_RDONLY | NONBLOCK | CLOEXEC, dir_fd=dir_fd)
    except OSError as err:
        raise open_error(err, name, fieldname) from None
    try:
        return read_fd(fd, limit, name, fieldname)
    except OSError as err:
        raise ToolIOError(f"{name}: cannot read: {err.strerror or err}", _details(name, fieldname)) from None
    finally:
        os.close(fd)


class Resolved:
    """A path resolved inside a jail. ``stack`` holds open descriptors of the root and each folder down to
    the parent of the last component (the last one is the target itself when ``kind`` is ``dir``).

    ``kind``: ``file`` (``fd`` open on it), ``dir`` (``fd`` is ``stack[-1]``), ``missing`` (``name`` is the
    absent last component, in folder ``stack[-1]``). ``names`` are the components below the root.
    """

    __slots__ = ("stack", "names", "kind", "fd", "name", "created")

    def __init__(self, stack: list[int], names: list[str], kind: str, fd: int | None = None, name: str | None = None,
                 created: list[str] | None = None) -> None:  # a plain class: the golden read loads no dataclasses
        self.stack = stack
        self.names = names
        self.kind = kind
        self.fd = fd
        self.name = name
        self.created = [] if created is None else created

    @property
    def rel(self) -> str:
        return "/".join(self.names) or "."

    def close(self) -> None:
        for fd in set(self.stack) | ({self.fd} if self.fd is not None else set()):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stack, self.fd = [], None

    def __enter__(self) -> Resolved:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Jail:
    """A root folder; :meth:`walk` resolves paths below it on descriptors and refuses any way out."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(os.path.realpath(path))

    def _outside(self, value: str, fieldname: str) -> PathOutsideRootError:
        return PathOutsideRootError(f"{fieldname}: {value!r} resolves outside the tool root",
                                    {"field": fieldname, "path": value})

    def _parts(self, target: str, value: str, fieldname: str) -> tuple[bool, list[str]]:
        """(absolute, components below the root) of a path or link target."""
        if not target.startswith("/"):
            return False, target.split("/")
        root = str(self.path)
        if target.rstrip("/") == root:
            return True, []
        if not target.startswith(root + "/"):
            raise self._outside(value, fieldname)
        return True, target[len(root) + 1:].split("/")

    def walk(self, value: str, fieldname: str, *, start: Resolved | None = None, want: str = "any",
             create_parents: bool = False) -> Resolved:
        """Resolve ``value`` (relative to the root, or to ``start``'s folder) component by component.

        ``want``: ``file`` (a regular file), ``dir`` (an existing folder), ``out`` (a folder or an absent
        name; with ``create_parents`` missing parent folders are created and listed in ``created``), or
        ``any`` (file or folder). A file is opened ``O_NONBLOCK`` and never read here.

        Raises:
            InputError: empty or NUL-containing path, a parent that is not a folder, a wrong kind.
            PathOutsideRootError: the path, or a symlink on the way, leads outside the root.
            NotFoundError: a missing component, or a symlink loop.
        """
        if not value or "\x00" in value:
            raise InputError(f"{fieldname}: not a usable path: {value!r}", {"field": fieldname})
        if start is not None:
            stack, names = [os.dup(fd) for fd in start.stack], list(start.names)
        else:
            try:
                stack, names = [os.open(self.path, DIR_FLAGS)], []
            except OSError as err:
                raise open_error(err, str(self.path), fieldname) from None
        result = Resolved(stack, names, "dir")
        try:
            absolute, parts = self._parts(value, value, fieldname)
            if absolute:
                self._reset(result)
            self._walk(result, parts, value, fieldname, want, create_parents)
        except BaseException:
            self.remove_created(result)
            result.close()
            raise
        return result

    @staticmethod
    def _reset(result: Resolved) -> None:
        for fd in result.stack[1:]:
            os.close(fd)
        del result.stack[1:]
        result.names.clear()

    def _walk(self, res: Resolved, parts: list[str], value: str, fieldname: str, want: str,
              create_parents: bool) -> None:
        pending, links = list(reversed(parts)), 0
        while pending:
            comp = pending.pop()
            if comp in ("", "."):
                continue
            if comp == "..":
                if len(res.stack) == 1:
                    raise self._outside(value, fieldname)
                os.close(res.stack.pop())
                res.names.pop()
                continue
            last = not any(p not in ("", ".") for p in pending)
            here = res.stack[-1]
            try:
                fd = os.open(comp, os.O_RDONLY | NOFOLLOW | NONBLOCK | CLOEXEC, dir_fd=here)
            except OSError as err:
                if err.errno in _LINK_ERRNOS or (err.errno == errno.ENXIO):
                    target = self._readlink(comp, here)
                    if target is None:  # not a link (ENXIO: a socket or unopenable device)
                        raise InputError(f"{fieldname}: {value!r} is not a regular file or folder",
                                         {"field": fieldname, "path": value}) from None
                    links += 1
                    if links > MAX_LINKS:
                        raise NotFoundError(f"{fieldname}: {value!r}: symlink loop (too many levels of "
                                            "symbolic links)", {"field": fieldname, "path": value}) from None
                    absolute, more = self._parts(target, value, fieldname)
                    if absolute:
                        self._reset(res)
                    pending.extend(reversed(more))
                    continue
                if err.errno == errno.ENOENT:
                    if last and want == "out":
                        res.kind, res.name = "missing", comp
                        return
                    if want == "out" and create_parents:
                        try:
                            os.mkdir(comp, 0o777, dir_fd=here)
                        except FileExistsError:
                            pass
                        except OSError as mk:
                            raise ToolIOError(f"{fieldname}: cannot create {'/'.join(res.names + [comp])}: "
                                              f"{mk.strerror}", {"field": fieldname, "path": value}) from None
                        else:
                            res.created.append("/".join(res.names + [comp]))
                        pending.append(comp)
                        continue
                    raise NotFoundError(f"{fieldname}: {value!r} does not exist",
                                        {"field": fieldname, "path": value}) from None
                raise open_error(err, value, fieldname) from None
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                res.stack.append(fd)
                res.names.append(comp)
                continue
            if not last:
                os.close(fd)
                raise InputError(f"{fieldname}: {value!r}: {'/'.join(res.names + [comp])} is not a folder",
                                 {"field": fieldname, "path": value})
            res.names.append(comp)
            res.kind, res.fd = "file", fd
            if want in ("dir", "out"):
                raise InputError(f"{fieldname}: {value!r} is not a folder", {"field": fieldname, "path": value})
            return
        res.kind, res.fd = "dir", res.stack[-1]
        if want == "file":
            raise InputError(f"{fieldname}: {value!r} is a folder, not a file", {"field": fieldname, "path": value})

    @staticmethod
    def _readlink(name: str, dir_fd: int) -> str | None:
        try:
            return os.readlink(name, dir_fd=dir_fd)
        except OSError:
            return None

    def remove_created(self, res: Resolved) -> None:
        """Remove the folders :meth:`walk` created (deepest first), when they are still empty."""
        for rel in reversed(res.created):
            try:
                os.rmdir(self.path / rel)
            except OSError:
                pass

    def read(self, value: str, fieldname: str, limit: int, start: Resolved | None = None) -> tuple[bytes, Resolved]:
        """Bytes of the regular file ``value`` inside the root (at most ``limit``) and its resolution."""
        res = self.walk(value, fieldname, start=start, want="file")
        try:
            return read_fd(res.fd, limit, value, fieldname), res
        except OSError as err:
            res.close()
            raise ToolIOError(f"{fieldname}: cannot read {value!r}: {err.strerror or err}",
                              {"field": fieldname, "path": value}) from None
        except BaseException:
            res.close()
            raise
