"""``opdesign verify DIR``: run a design folder's generated kernel with PyPTO and report.

The library function behind the CLI command and the ``verify_design`` agent
tool. It finds ``DIR/<op_name>_kernel.py``, runs :func:`.selfcheck.run` on it
(compile + SIM + pass verification per typical config, each in a child process)
and returns a :class:`VerifyReport`. Missing extra -> ``extra_missing`` (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from opdesign.errors import ExtraMissingError, InputError, NotFoundError

KERNEL_SUFFIX = "_kernel.py"


class VerifyCheck(BaseModel):
    status: Literal["PASS", "FAILED", "SKIPPED"] = Field(
        description="pass verification against the torch golden; SKIPPED only with no_verify")
    max_abs_diff: float | None = Field(description="largest |kernel - golden| over the outputs, or null")
    max_rel_diff: float | None = Field(description="largest relative difference, or null")
    failed_passes: list[str] = Field(description="compiler passes whose verification failed")


class ConfigResult(BaseModel):
    name: str = Field(description="typical config of the SPEC")
    compiled: bool
    sim_us: float | None = Field(description="simulated AICore end-to-end time in microseconds (PyPTO SIM)")
    utilization: float | None = Field(description="simulated AICore utilisation in percent, 0-100")
    seconds: float | None = Field(description="wall time of compile + SIM (+ verify) of this config")
    shrunk: str | None = Field(description="how the config's shape was shrunk for the CPU run, or null")
    shape: dict = Field(default_factory=dict, description="the shape the SIM time was measured at "
                        "(batch, num_heads, num_kv_heads, seq_q, seq_kv, head_dim, ...)")
    verify: VerifyCheck


class VerifyError(BaseModel):
    stage: str = Field(description="parse, compile, sim or verify")
    message: str = Field(description="the framework's message")
    kernel_line: int | None = Field(description="line in <op>_kernel.py, when PyPTO names one (or, when it names "
                                                "none, the compile-time constant the config's shape differs from)")
    design_line: int | None = Field(description="the same line in DESIGN.md's pseudocode chapter, or null")
    config: str = Field(description="typical config the error belongs to")
    reason: str | None = Field(None, description="why, when PyPTO named no kernel line: the config value that differs "
                                                 "from a compile-time constant, or that none does")


class VerifyReport(BaseModel):
    """What ``opdesign verify DIR --json`` prints."""

    compiled: bool = Field(description="every config compiled")
    pypto_version: str
    calculator: dict = Field(description="CPU calculator build: built (bool), build_seconds, seconds, path")
    configs: list[ConfigResult]
    errors: list[VerifyError]
    passed: bool = Field(description="every config compiled, simulated (sim_us > 0) and verified (or SKIPPED)")


def find_kernel(folder: Path) -> Path:
    """The one ``*_kernel.py`` of a design folder (a kernel file is accepted as is)."""
    if folder.is_file():
        if not folder.name.endswith(KERNEL_SUFFIX):
            raise InputError(f"{folder}: expected a design folder or a *{KERNEL_SUFFIX} file")
        return folder
    if not folder.is_dir():
        raise NotFoundError(f"{folder}: no such design folder")
    kernels = sorted(p for p in folder.glob(f"*{KERNEL_SUFFIX}") if p.is_file())
    if len(kernels) != 1:
        found = ", ".join(p.name for p in kernels) or "none"
        raise NotFoundError(f"{folder}: expected exactly one *{KERNEL_SUFFIX} (found: {found}); "
                            "write one with `opdesign new`")
    return kernels[0]


def verify_dir(path: str | Path, *, configs: list[str] | None = None, quick: bool = False, verify: bool = True,
               progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Compile, simulate and verify the kernel of a design folder on the CPU.

    Raises:
        ExtraMissingError: the ``opdesign[pypto]`` extra is not installed (or not PyPTO 0.2.0).
        NotFoundError / InputError: no kernel file, or not an opdesign kernel file / unknown config.
    """
    from opdesign.pypto_run import selfcheck
    from opdesign.pypto_run._lazy import ExtraMissing, UnsupportedRelease

    kernel = find_kernel(Path(path))
    design = kernel.parent / "DESIGN.md"
    try:
        report = selfcheck.run(kernel, configs=configs, quick=quick, verify=verify, design=design,
                               progress=progress)
    except (ExtraMissing, UnsupportedRelease) as err:
        raise ExtraMissingError(str(err), {"install": "pip install 'opdesign[pypto]'"}) from None
    except selfcheck.HarnessError as err:
        raise InputError(str(err)) from None
    return VerifyReport(**report, passed=selfcheck.passed(report))
