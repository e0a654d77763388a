"""Lazy access to the optional PyPTO stack (``pypto`` + ``torch``).

Nothing in :mod:`opdesign.pypto_run` imports ``pypto`` or ``torch`` at module
import time, so the package stays importable on a machine without the extra.
Functions that need the framework call :func:`import_pypto` (or
:func:`import_torch`), which raise :class:`ExtraMissing` with an install hint.
"""

from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = "pip install 'opdesign[pypto]'"

#: The only PyPTO release whose private hooks this package knows.
SUPPORTED_PYPTO = "0.2.0"


class ExtraMissing(ImportError):
    """The optional PyPTO extra (pypto, torch, sympy) is not installed."""

    def __init__(self, missing: str, cause: BaseException | None = None) -> None:
        detail = f": {cause}" if cause is not None else ""
        super().__init__(
            f"the PyPTO runner needs the '{missing}' package, which could not be "
            f"imported{detail}. Install the extra with: {INSTALL_HINT} "
            f"(PyPTO {SUPPORTED_PYPTO}, torch 2.8.0 for the calculator build)"
        )
        self.missing = missing


class UnsupportedRelease(RuntimeError):
    """The installed PyPTO release is not the one the private overrides target."""


def import_torch() -> ModuleType:
    """Import ``torch`` or raise :class:`ExtraMissing`."""
    try:
        return importlib.import_module("torch")
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise ExtraMissing("torch", exc) from exc


def import_pypto() -> ModuleType:
    """Import ``pypto`` (torch first, as the framework wants) or raise :class:`ExtraMissing`."""
    import_torch()
    try:
        return importlib.import_module("pypto")
    except ImportError as exc:
        raise ExtraMissing("pypto", exc) from exc


def pypto_version() -> str:
    """Version string of the installed ``pypto`` distribution (no import of pypto itself)."""
    from importlib import metadata

    try:
        return metadata.version("pypto")
    except metadata.PackageNotFoundError as exc:
        raise ExtraMissing("pypto", exc) from exc


def require_supported_release() -> str:
    """Return the installed version, or raise :class:`UnsupportedRelease` if it is not pinned."""
    version = pypto_version()
    if version != SUPPORTED_PYPTO:
        raise UnsupportedRelease(
            f"opdesign.pypto_run overrides private PyPTO hooks that were checked only "
            f"against pypto=={SUPPORTED_PYPTO}; the installed release is {version}. "
            f"Install pypto=={SUPPORTED_PYPTO} or re-validate the adapter for {version}."
        )
    return version
