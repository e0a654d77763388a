"""Version-pinned fix so PyPTO 0.2.0 pass verification sees the real inputs on a CPU.

What goes wrong (pypto 0.2.0, ``pypto/frontend/parser/entry.py``): with
``verify_options={"enable_pass_verify": True}`` the jit path calls
``JitCallableWrapper._setup_verify_data(pto_tensors)``. It builds fresh host
tensors and fills them with ``pypto_impl.CopyToHost(device, host)``. In SIM
mode the "device" tensors already are CPU torch tensors and the copy leaves
the host buffers zero, so the calculator executes every pass on all-zero
inputs and the ``tensor_graph`` vs golden row fails even for ``out = x + y``.

The fix hands the verifier the caller's CPU buffers directly, with the
framework's own helpers::

    pypto_impl.SetVerifyData(pypto.runtime._pto_to_tensor_data(pto_tensors), [],
                             pypto.runtime._pto_verify_datas.get_data())

after the calculator library is loaded (from the opdesign cache, see
:mod:`.cache`). :func:`verify_data_fix` installs that replacement only for the
duration of a ``with`` block and puts the original back afterwards. It refuses
to run on any other pypto release, because it relies on private names.
The installed package's files are never modified.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ._lazy import SUPPORTED_PYPTO, UnsupportedRelease, import_pypto, require_supported_release
from .cache import ensure_calculator

_PATCH_LOCK = threading.Lock()
_PRIVATE_NAMES = (
    ("pypto.frontend.parser.entry", "JitCallableWrapper"),
    ("pypto.runtime", "_pto_to_tensor_data"),
    ("pypto.runtime", "_pto_verify_datas"),
    ("pypto", "pypto_impl"),
)


def _check_private_surface() -> None:
    """Fail early, with a clear message, when a private hook the fix needs is missing."""
    import importlib

    for module_name, attr in _PRIVATE_NAMES:
        module = importlib.import_module(module_name)
        if not hasattr(module, attr):
            raise UnsupportedRelease(
                f"{module_name}.{attr} is missing; the verify-data fix was written for "
                f"pypto=={SUPPORTED_PYPTO} and cannot be applied to this installation"
            )
    wrapper = importlib.import_module("pypto.frontend.parser.entry").JitCallableWrapper
    if not hasattr(wrapper, "_setup_verify_data"):
        raise UnsupportedRelease(
            "JitCallableWrapper._setup_verify_data is missing; the verify-data fix does not apply"
        )
    impl = importlib.import_module("pypto").pypto_impl
    if not hasattr(impl, "SetVerifyData"):
        raise UnsupportedRelease("pypto_impl.SetVerifyData is missing; the fix does not apply")


def _fixed_setup_verify_data(pto_tensors: list[Any]) -> None:
    """Replacement for ``JitCallableWrapper._setup_verify_data`` (pypto 0.2.0).

    Same contract as the original: a no-op unless pass verification is on;
    otherwise register (inputs/outputs, no separate outputs, goldens) with the
    backend, but using the caller's buffers instead of zero-filled copies.
    """
    pypto = import_pypto()
    if not pypto.get_verify_options().get("enable_pass_verify"):
        return
    ensure_calculator()
    from pypto import runtime as pto_runtime  # type: ignore[import-not-found]

    pypto.pypto_impl.SetVerifyData(
        pto_runtime._pto_to_tensor_data(pto_tensors),
        [],
        pto_runtime._pto_verify_datas.get_data(),
    )


@contextlib.contextmanager
def verify_data_fix() -> Iterator[Callable[[list[Any]], None]]:
    """Patch ``JitCallableWrapper._setup_verify_data`` for the duration of the block.

    Raises :class:`UnsupportedRelease` if the installed pypto is not
    ``SUPPORTED_PYPTO`` or lacks a private name the fix uses. Nested or
    concurrent use in one process is serialised by a lock; the original method
    is restored even when the block raises.
    """
    require_supported_release()
    import_pypto()
    _check_private_surface()
    from pypto.frontend.parser.entry import JitCallableWrapper  # type: ignore[import-not-found]

    with _PATCH_LOCK:
        original = JitCallableWrapper.__dict__["_setup_verify_data"]
        JitCallableWrapper._setup_verify_data = staticmethod(_fixed_setup_verify_data)
        try:
            yield _fixed_setup_verify_data
        finally:
            JitCallableWrapper._setup_verify_data = original


def is_patched() -> bool:
    """True while :func:`verify_data_fix` is active (for tests)."""
    from pypto.frontend.parser.entry import JitCallableWrapper  # type: ignore[import-not-found]

    current = JitCallableWrapper.__dict__.get("_setup_verify_data")
    return getattr(current, "__func__", None) is _fixed_setup_verify_data
