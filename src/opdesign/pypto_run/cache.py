"""Build PyPTO's CPU calculator once per user and reuse it.

PyPTO 0.2.0 ships the pass-verification "calculator" as C++ sources
(``pypto/lib/calculator``). ``BuildOnlineManager.build_and_load_calculator``
(``pypto/_utils.py``) compiles it with cmake into a fresh temporary directory
on every process, loads ``libtile_fwk_calculator.so`` with
``ctypes.CDLL(..., RTLD_GLOBAL)`` and sets ``calculator_loaded = True`` on the
singleton manager; later calls return at once when that flag is set.

This module keeps one built library per (pypto version, torch version, C++ ABI,
python version, calculator source digest) under the opdesign cache folder and
makes PyPTO use it: it loads the cached ``.so`` the same way and sets the same
flag, so the framework never rebuilds. Concurrent builders are serialised by an
exclusive ``fcntl.flock`` on a lock file; the build runs in a temporary folder
inside the cache and the library is moved into place with ``os.replace``.

Command line: ``python -m opdesign.pypto_run.cache [--rebuild]`` builds (if
needed), loads and prints the path and timings as JSON.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from opdesign.io.paths import ENV_CACHE_DIR, cache_root  # noqa: F401  (ENV_CACHE_DIR: the documented name)

from ._lazy import import_pypto, import_torch, require_supported_release

LIB_NAME = "libtile_fwk_calculator.so"


@dataclass
class CalculatorInfo:
    """Where the calculator library is and what loading it cost."""

    path: str
    key: str
    built: bool  # True when this call compiled it
    build_seconds: float  # compile time (0 when reused)
    load_seconds: float  # ctypes load (+ lock wait) time
    already_loaded: bool  # the process had a calculator before this call


def _source_digest(src_dir: Path) -> str:
    """Short hash over the calculator sources (names, sizes, mtimes are not enough across installs)."""
    h = hashlib.sha256()
    for path in sorted(p for p in src_dir.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(src_dir)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def calculator_key() -> str:
    """Cache key of the calculator for the installed pypto/torch/python."""
    version = require_supported_release()
    torch = import_torch()
    pypto = import_pypto()
    src = Path(pypto.__file__).parent / "lib" / "calculator"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    torch_v = str(torch.__version__).replace("+", "_")
    return f"pypto-{version}_torch-{torch_v}_abi{abi}_{py}_src-{_source_digest(src)}"


def calculator_path(key: str | None = None) -> Path:
    """Path the cached library has (or will have) for ``key`` (default: this environment)."""
    return cache_root() / "calculator" / (key or calculator_key()) / LIB_NAME


def _build_into(dest_dir: Path) -> float:
    """Compile the calculator with PyPTO's own cmake helpers; install the .so into ``dest_dir``.

    Returns the build time in seconds. Uses the private helper classes of
    ``BuildOnlineManager`` so the flags are exactly the framework's (pinned release).
    """
    from pypto._utils import BuildOnlineManager  # type: ignore[import-not-found]

    mgr = BuildOnlineManager()
    torch_ctx = mgr._TorchContext()
    cmake_ctx = mgr._CMakeContext()
    dest_dir.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".build-", dir=dest_dir.parent) as tmp:
        ctx = mgr._CMakeContext.CompileContext(
            src_dir=Path(mgr.pkg_lib_dir, "calculator"), tmp_dir=Path(tmp)
        )
        ctx.cfg_cmd_ext = (
            f"-DPY3_MOD_TORCH_VERSION={torch_ctx.torch_version}"
            f" -DPY3_MOD_TORCH_ROOT_PATH={torch_ctx.torch_root_dir}"
            f" -DPY3_MOD_TORCH_C_GLIBCXX_USE_CXX11_ABI={torch_ctx.torch_c_use_cxx11_abi}"
        )
        ctx.build_job_num = max(1, os.cpu_count() or 1)
        install = cmake_ctx.compile(ctx=ctx)
        built = Path(install, "lib", LIB_NAME)
        if not built.exists():
            raise RuntimeError(f"calculator build produced no {built}")
        dest_dir.mkdir(parents=True, exist_ok=True)
        staged = dest_dir / f".{LIB_NAME}.{os.getpid()}.tmp"
        shutil.copy2(built, staged)
        os.replace(staged, dest_dir / LIB_NAME)
        meta = {"built_at": time.time(), "seconds": time.perf_counter() - start}
        (dest_dir / "build.json").write_text(json.dumps(meta, indent=1))
    return time.perf_counter() - start


def ensure_calculator(rebuild: bool = False) -> CalculatorInfo:
    """Make sure this process has the calculator loaded, building it into the cache at most once.

    Safe against concurrent callers in other processes (exclusive flock). After
    this returns, ``pypto``'s own ``build_and_load_calculator()`` is a no-op.
    """
    pypto = import_pypto()
    from pypto._utils import BuildOnlineManager  # type: ignore[import-not-found]

    del pypto
    mgr = BuildOnlineManager()
    key = calculator_key()
    path = calculator_path(key)
    if mgr.calculator_loaded and not rebuild:
        return CalculatorInfo(str(path), key, False, 0.0, 0.0, True)
    start = time.perf_counter()
    build_seconds = 0.0
    built = False
    if rebuild or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = path.parent.parent / f"{key}.lock"
        with open(lock_path, "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                if rebuild or not path.exists():  # another process may have built it meanwhile
                    build_seconds = _build_into(path.parent)
                    built = True
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    load_start = time.perf_counter()
    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    mgr.calculator_loaded = True
    load_seconds = time.perf_counter() - load_start
    if not built:
        load_seconds = time.perf_counter() - start
    return CalculatorInfo(str(path), key, built, build_seconds, load_seconds, False)


def main(argv: list[str] | None = None) -> int:
    """CLI: build/load the cached calculator and print a JSON summary."""
    args = sys.argv[1:] if argv is None else argv
    t0 = time.perf_counter()
    info = ensure_calculator(rebuild="--rebuild" in args)
    out = asdict(info)
    out["total_seconds"] = time.perf_counter() - t0
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
