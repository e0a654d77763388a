"""Every SIM result kept (issue 32 deliver 4): a cache keyed by what decides a SIM figure.

The key is the SHA-256 of: the kernel text's own SHA-256, the shape the run used (the config's or the
quick shape, as a sorted dict), the quick flag, the PyPTO and torch versions (from the installed
distributions' metadata: no import) and the platform (the machine, and the SoC and digest of the
platform file PyPTO 0.2.0 simulates: ``pypto/lib/configs/A2A3.ini``). Only runs that gave a SIM time
are kept: a failure (a timeout, a crash) is measured again next time.

Location: ``$OPDESIGN_CACHE_DIR/sim/`` (:func:`opdesign.io.paths.cache_root`; default
``~/.cache/opdesign/sim``), one JSON file per key, written whole (a temp file then ``os.replace``).
Size limit: ``$OPDESIGN_SIM_CACHE_MB`` (default :data:`DEFAULT_LIMIT_MB` MiB); past it the least
recently used entries are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as _platform
import time
from functools import cache
from pathlib import Path
from typing import Any

from opdesign.io.paths import cache_root

ENV_LIMIT_MB = "OPDESIGN_SIM_CACHE_MB"
DEFAULT_LIMIT_MB = 64
SUBDIR = "sim"


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


@cache
def environment() -> dict[str, str]:
    """What besides the kernel and shape decides a SIM figure: PyPTO / torch versions, the platform."""
    from importlib import util

    soc, digest = "none", "none"
    found = util.find_spec("pypto")
    if found is not None and found.origin:
        ini = Path(found.origin).parent / "lib" / "configs" / "A2A3.ini"
        if ini.is_file():
            data = ini.read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:16]
            soc = next((line.split("=", 1)[1].strip() for line in data.decode("utf-8", "replace").splitlines()
                        if line.startswith("SoC_version=")), "unknown")
    return {"pypto": _version("pypto"), "torch": _version("torch"),
            "platform": f"{_platform.machine()}/{soc}/{digest}"}


def kernel_hash(kernel_text: str) -> str:
    return hashlib.sha256(kernel_text.encode("utf-8")).hexdigest()


def sim_key(kernel_text: str, shape: dict[str, Any], quick: bool, env: dict[str, str] | None = None) -> str:
    """The cache key of one SIM run (see the module docstring)."""
    parts = {"kernel": kernel_hash(kernel_text), "shape": dict(sorted(shape.items())), "quick": bool(quick),
             **(env or environment())}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class SimCache:
    """``get(key)`` / ``put(key, record)`` over one folder, pruned to ``limit_bytes``."""

    def __init__(self, root: Path | None = None, limit_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root() / SUBDIR
        if limit_bytes is None:
            mb = os.environ.get(ENV_LIMIT_MB)
            try:
                limit_bytes = int(float(mb) * 2**20) if mb else DEFAULT_LIMIT_MB * 2**20
            except ValueError:
                limit_bytes = DEFAULT_LIMIT_MB * 2**20
        self.limit_bytes = limit_bytes
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.misses += 1
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        self.hits += 1
        return record

    def put(self, key: str, record: dict[str, Any]) -> None:
        if record.get("sim_us") is None:
            return  # failures are measured again
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**record, "key": key, "stored": round(time.time(), 3)}, sort_keys=True),
                       encoding="utf-8")
        os.replace(tmp, path)
        self.prune()

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*/*.json")) if self.root.is_dir() else []

    def prune(self) -> int:
        """Remove least recently used entries until the folder is within the limit; returns how many."""
        files = []
        for p in self.entries():
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in files)
        removed = 0
        for _, size, path in sorted(files, key=lambda f: (f[0], str(f[2]))):
            if total <= self.limit_bytes:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        return removed
