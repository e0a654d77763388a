"""Run and verify real PyPTO kernels on a CPU-only machine (optional extra).

Importable without PyPTO: every submodule imports ``pypto``/``torch`` lazily
and raises :class:`ExtraMissing` when they are absent.

- :mod:`.cache`   build the CPU calculator once per user and reuse it;
- :mod:`.adapter` version-pinned fix so pass verification sees real inputs;
- :mod:`.runner`  compile + SIM + verify one kernel config, structured result;
- :mod:`.worker`  the same in a child process (``python -m opdesign.pypto_run.worker``).
"""

from ._lazy import INSTALL_HINT, SUPPORTED_PYPTO, ExtraMissing, UnsupportedRelease

__all__ = ["INSTALL_HINT", "SUPPORTED_PYPTO", "ExtraMissing", "UnsupportedRelease"]
