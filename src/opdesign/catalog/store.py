"""Loaded catalog data kept between processes, keyed by a hash of its source files.

Reading the cards and tables means parsing YAML and validating pydantic models, every process.
:func:`load_cached` keeps the loaded object as a pickle under ``cache_root()/catalog`` whose file
name is a digest of everything the object is made from: the bytes and relative names of the source
files, the code that builds it (``models.py`` / ``loader.py`` / ``pypto_api.py``) and the Python
version. An edited card is another digest, so it is read again, never served stale. A cache file
that is missing, unreadable or damaged is rebuilt; writes go to a temporary file renamed into place
(atomic), and a cache folder that cannot be written only costs the rebuild.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from opdesign.io.paths import cache_root

T = TypeVar("T")
#: the modules whose code shapes a cached object (their bytes are part of every key)
_CODE = tuple(Path(__file__).with_name(name) for name in ("models.py", "loader.py", "pypto_api.py", "store.py"))
#: bumped when the layout of the cache files changes
_FORMAT = b"opdesign-catalog-store-1"


def source_key(kind: str, root: Path, files: Iterable[Path]) -> str:
    """Digest of ``kind``, the Python version, the building code and each file (name relative to
    ``root``, then its bytes)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(_FORMAT)
    h.update(f"{kind}\x00{sys.version}\x00{pickle.HIGHEST_PROTOCOL}".encode())
    for file in (*_CODE, *sorted(files)):
        data = file.read_bytes()
        name = file.name if file in _CODE else file.relative_to(root).as_posix()
        h.update(name.encode("utf-8", "surrogatepass") + b"\x00" + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def cache_file(kind: str, key: str) -> Path:
    """Where the object of ``kind`` with digest ``key`` is kept."""
    return cache_root() / "catalog" / f"{kind}-{key}.pickle"


def load_cached(kind: str, root: Path, files: Iterable[Path], build: Callable[[], T]) -> T:
    """The object ``build()`` makes from ``files`` (under ``root``): from the cache when its digest is
    there, else built and stored. ``build``'s errors propagate (nothing is stored)."""
    try:
        path = cache_file(kind, source_key(kind, root, files))
    except OSError:  # a source (e.g. the building code in a .pyc-only install) cannot be read: no cache
        return build()
    try:
        return pickle.loads(path.read_bytes())  # noqa: S301 - our own cache file, named by its sources' digest
    except FileNotFoundError:
        pass
    except Exception:  # noqa: BLE001 - a damaged or foreign cache file is rebuilt
        pass
    value = build()
    _store(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return value


def _store(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a folder that cannot be written is left alone."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when a store is written: a read loads no tempfile / shutil

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass
