"""Descriptor-relative file operations for :mod:`opdesign.io.publish`: ``renameat2``, a tree removal
that never follows symlinks, the folder lock, folder walks below an open descriptor."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
import time

from opdesign.errors import BusyError
from opdesign.io.safefs import DIR_FLAGS, NOFOLLOW

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
#: How long a writer waits for another writer of the same folder before it answers ``busy``.
LOCK_WAIT_S = 60.0


def renameat2(src_fd: int, src: str, dst_fd: int, dst: str, flags: int) -> bool:
    """``renameat2``; False when the C library or the file system lacks it (caller falls back)."""
    func = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if func is None:
        return False
    if func(src_fd, src.encode(), dst_fd, dst.encode(), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), dst)


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def rmtree_at(name: str, dir_fd: int) -> None:
    """Remove ``name`` (a folder tree, never following symlinks) below ``dir_fd``; best effort."""
    try:
        fd = os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass
        return
    try:
        try:
            os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | stat.S_IRWXU)  # a read-only eval/ too
        except OSError:
            pass
        for entry in list(os.scandir(fd)):
            if entry.is_dir(follow_symlinks=False):
                rmtree_at(entry.name, fd)
            else:
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    pass
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass


def open_dir(name: str, dir_fd: int) -> int:
    """``openat(O_DIRECTORY | O_NOFOLLOW)``; a symlink raises ELOOP (Linux says ENOTDIR for it)."""
    try:
        return os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=dir_fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def lock(fd: int, display: str) -> int:
    lock_fd = os.open(".", DIR_FLAGS, dir_fd=fd)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock_fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(lock_fd)
                raise BusyError(f"{display}: another opdesign run is writing here; try again",
                                {"path": display}) from None
            time.sleep(0.005)


def subdir(base_fd: int, rel: str, create: bool) -> int | None:
    """Descriptor of the folder of ``rel`` below ``base_fd`` (created when ``create``); None when absent."""
    parts = rel.split("/")[:-1]
    fd = os.dup(base_fd)
    for part in parts:
        if create:
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
        try:
            nxt = os.open(part, DIR_FLAGS | NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
    return fd


def exists(dir_fd: int, rel: str) -> bool:
    try:
        os.stat(rel, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False
