"""Keep everything PyPTO writes inside one work directory.

PyPTO 0.2.0 writes, by default (measured):

- ``./output/output_<ts>_<pid>_.../`` under the current directory: program.json,
  topo.json, generated kernels (kernel_aicore/, kernel_aicpu/),
  CostModelSimulationOutput/ and, when verifying, verify_<ts>/ with the CSVs.
  ``TILE_FWK_OUTPUT_DIR`` moves that root (read by libtile_fwk_interface).
- ``~/ascend/log/debug/...`` simulation logs; ``ASCEND_PROCESS_LOG_PATH`` moves them.
- ``~/.pypto/run/rundata_<ts>/rundata.json``; ``PYPTO_HOME`` moves ``~/.pypto``.

:func:`work_env` returns those variables for a work dir; :func:`isolated`
applies them (plus ``chdir``) in-process and restores everything afterwards.
:func:`capture_fds` redirects file descriptors 1 and 2 to files, because the
simulation summary is printed by a child process of the C++ runtime and never
passes through ``sys.stdout``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

OUTPUT_SUBDIR = "output"


def work_env(work_dir: Path) -> dict[str, str]:
    """Environment variables that send PyPTO's files into ``work_dir``."""
    work_dir = Path(work_dir).resolve()
    return {
        "TILE_FWK_OUTPUT_DIR": str(work_dir / OUTPUT_SUBDIR),
        "ASCEND_PROCESS_LOG_PATH": str(work_dir / "log"),
        "PYPTO_HOME": str(work_dir / "pypto_home"),
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
    }


@contextlib.contextmanager
def isolated(work_dir: Path) -> Iterator[Path]:
    """chdir into ``work_dir`` and set :func:`work_env` for the block; restore after."""
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    saved_env = {k: os.environ.get(k) for k in work_env(work_dir)}
    saved_cwd = os.getcwd()
    os.environ.update(work_env(work_dir))
    os.chdir(work_dir)
    try:
        yield work_dir
    finally:
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Captured:
    """Text captured from fds 1 and 2 (filled when the block exits)."""

    def __init__(self) -> None:
        self.stdout = ""
        self.stderr = ""

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr


@contextlib.contextmanager
def capture_fds(echo: bool = False) -> Iterator[Captured]:
    """Redirect OS-level fds 1 and 2 into temp files for the block.

    Catches output of C++ code and of child processes. With ``echo`` the
    captured text is written to the original fds afterwards.
    """
    captured = Captured()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            out.seek(0)
            err.seek(0)
            captured.stdout = out.read().decode("utf-8", "replace")
            captured.stderr = err.read().decode("utf-8", "replace")
            if echo:
                os.write(1, captured.stdout.encode())
                os.write(2, captured.stderr.encode())
