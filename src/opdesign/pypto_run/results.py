"""Result types and the parsers for what PyPTO 0.2.0 prints and writes.

Where the numbers come from (measured on pypto 0.2.0, SIM mode):

- ``AICore End-to-End Time: <t>`` and ``AICore Utilization: <u>%`` are printed
  by ``pypto/lib/scripts/draw_swim_lane.py``, which the C++ runtime starts as a
  child process. They reach the process's file descriptor 1, not ``sys.stdout``,
  so the runner captures fds 1 and 2 (or the worker's whole output).
- Pass verification writes ``<output_dir>/verify_<ts>/verify_result_brief.csv``:
  one row per checked (pass, reference) pair with ``verifyResult`` PASS/FAILED,
  ``maxAbsDiff``, ``maxRelDiff``, ``errorRatio``.
- Front-end errors are rendered as ``ERROR <file>:<line>:<col>: <message>`` on
  fd 2, and raised as ``pypto.frontend.parser.error.RenderedParserError`` whose
  ``node.lineno`` is the line in the kernel's source file.
"""

from __future__ import annotations

import csv
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STAGES = ("parse", "compile", "sim", "verify")

_E2E = re.compile(r"AICore End-to-End Time:\s*([-+0-9.eE]+)")
_UTIL = re.compile(r"AICore Utilization:\s*([-+0-9.eE]+)\s*%")
_DIAG = re.compile(r"ERROR\S*\s+\S*?(?P<file>[^\s:]+\.py):(?P<line>\d+):(?P<col>\d+):")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class KernelError:
    """One failure, with the stage it happened in and the kernel source line if known."""

    stage: str
    message: str
    kernel_line: int | None = None
    kind: str = ""  # exception class name, or "signal" / "timeout"
    reason: str | None = None  # why, when the framework named no kernel line (selfcheck.explain_unlocated)


@dataclass
class VerifyResult:
    """Summary of ``verify_result_brief.csv`` (status NOT_RUN when there is none)."""

    status: str = "NOT_RUN"  # PASS | FAILED | NOT_RUN
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    failed_passes: list[str] = field(default_factory=list)
    rows: int = 0
    csv_path: str | None = None
    csv_max_abs_diff: float | None = None  # as the CSV states it (0 on PASS rows, seen)


@dataclass
class RunResult:
    """Outcome of one kernel config: compile, SIM figures, verification, errors."""

    compiled: bool = False
    sim_us: float | None = None
    utilization: float | None = None  # percent, 0-100
    verify: VerifyResult = field(default_factory=VerifyResult)
    errors: list[KernelError] = field(default_factory=list)
    seconds: float | None = None  # wall time of the kernel call (compile + verify + SIM)
    output_dir: str | None = None
    log_tail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """Inverse of :meth:`to_dict` (used across the worker boundary)."""
        data = dict(data)
        verify = VerifyResult(**data.pop("verify", {}))
        errors = [KernelError(**e) for e in data.pop("errors", [])]
        return cls(verify=verify, errors=errors, **data)

    @property
    def ok(self) -> bool:
        """Compiled, no errors, and verification (if it ran) passed."""
        return self.compiled and not self.errors and self.verify.status in ("PASS", "NOT_RUN")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes (the diagnostics are coloured)."""
    return _ANSI.sub("", text)


def parse_sim_figures(text: str) -> tuple[float | None, float | None]:
    """Last ``AICore End-to-End Time`` and ``AICore Utilization`` values in ``text``."""
    e2e = _E2E.findall(text)
    util = _UTIL.findall(text)
    return (float(e2e[-1]) if e2e else None, float(util[-1]) if util else None)


def diagnostic_line(text: str, kernel_file: str | None = None) -> int | None:
    """Kernel line number from a rendered ``ERROR file:line:col:`` diagnostic."""
    for match in _DIAG.finditer(strip_ansi(text)):
        if kernel_file is None or Path(match.group("file")).name == Path(kernel_file).name:
            return int(match.group("line"))
    return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def parse_verify_csv(path: Path, tol: tuple[float, float] | None = None) -> VerifyResult:
    """Summarise one ``verify_result_brief.csv``.

    With ``tol = (rtol, atol)`` the verdict is also opdesign's own: a row whose saved output has any
    element with ``|out - golden| > atol + rtol * |golden|`` fails, even when PyPTO's row says PASS
    (its verdict tolerates a share of elements beyond the tolerance: a causal mask shifted by one
    column was seen PASS with a max abs diff of 0.22 at tolerance 0.02).
    """
    result = VerifyResult(csv_path=str(path))
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    result.rows = len(rows)
    if not rows:
        return result
    abs_diffs = [d for d in (_float(r.get("maxAbsDiff")) for r in rows) if d is not None]
    rel_diffs = [d for d in (_float(r.get("maxRelDiff")) for r in rows) if d is not None]
    result.max_abs_diff = max(abs_diffs) if abs_diffs else None
    result.max_rel_diff = max(rel_diffs) if rel_diffs else None
    result.csv_max_abs_diff = result.max_abs_diff
    failed = [r for r in rows if (r.get("verifyResult") or "").strip().upper() != "PASS"]
    result.failed_passes = sorted(
        {f"{r.get('passName')}~{r.get('referPassName')}:{r.get('ioflag')}" for r in failed}
    )
    measured = measured_diffs(path, tol)
    if measured[0] is not None:
        result.max_abs_diff, result.max_rel_diff = measured[0], measured[1]
    for name, misses, total in measured[2]:
        result.failed_passes.append(f"tolerance:{name}: {misses} of {total} elements beyond atol + rtol*|golden|")
    result.status = "FAILED" if failed or measured[2] else "PASS"
    return result


_DTYPES = {"DT_FP32": ("f", 4), "DT_FP16": ("e", 2), "DT_BF16": ("bf16", 2), "DT_INT32": ("i", 4)}


def _read_values(path: Path, dtype: str) -> list[float] | None:
    """Raw tensor file (as the verifier saves it) to floats; pure Python, no numpy."""
    import array
    import struct

    spec = _DTYPES.get(dtype)
    if spec is None or not path.exists():
        return None
    raw = path.read_bytes()
    if spec[0] == "bf16":
        halves = array.array("H", raw)
        widened = array.array("I", (h << 16 for h in halves))
        return list(array.array("f", widened.tobytes()))
    return list(struct.unpack(f"<{len(raw) // spec[1]}{spec[0]}", raw))


def measured_diffs(csv_path: Path, tol: tuple[float, float] | None = None
                   ) -> tuple[float | None, float | None, list[tuple[str, int, int]]]:
    """Max |a - g|, max |a - g| / |g|, and the rows with elements beyond ``tol``, over a brief CSV's
    saved (output, golden) pairs.

    The CSV's own maxAbsDiff/maxRelDiff were seen to be 0 on PASS rows whose
    saved tensors differ by one bf16 ulp, so they are not used. The relative
    diff divides by max(|g|, 1e-3). The third item lists ``(output tensor, misses, elements)`` for
    each row with ``|a - g| > atol + rtol * |g|`` somewhere (empty without ``tol``).
    """
    folder = csv_path.parent / "tensor_graph"
    max_abs = max_rel = None
    beyond: list[tuple[str, int, int]] = []
    with csv_path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        got = _read_values(folder / row.get("outputTensor", ""), row.get("outputDtype", ""))
        gold = _read_values(folder / row.get("goldenTensor", ""), row.get("outputDtype", ""))
        if not got or not gold or len(got) != len(gold):
            continue
        abs_d = max(abs(a - g) for a, g in zip(got, gold, strict=True))
        rel_d = max(abs(a - g) / max(abs(g), 1e-3) for a, g in zip(got, gold, strict=True))
        max_abs = abs_d if max_abs is None else max(max_abs, abs_d)
        max_rel = rel_d if max_rel is None else max(max_rel, rel_d)
        if tol is not None:
            rtol, atol = tol
            misses = sum(1 for a, g in zip(got, gold, strict=True) if abs(a - g) > atol + rtol * abs(g))
            if misses:
                beyond.append((row.get("outputTensor", "?"), misses, len(got)))
    return max_abs, max_rel, beyond


def find_verify_csvs(output_root: Path) -> list[Path]:
    """All brief CSVs under an output root, oldest first."""
    return sorted(output_root.glob("**/verify_*/verify_result_brief.csv"), key=lambda p: p.stat().st_mtime)


def merge_verify(results: list[VerifyResult]) -> VerifyResult:
    """Combine several CSV summaries (one per compiled function) into one."""
    if not results:
        return VerifyResult()
    merged = VerifyResult(csv_path=results[-1].csv_path)
    merged.rows = sum(r.rows for r in results)
    abs_d = [r.max_abs_diff for r in results if r.max_abs_diff is not None]
    rel_d = [r.max_rel_diff for r in results if r.max_rel_diff is not None]
    merged.max_abs_diff = max(abs_d) if abs_d else None
    merged.max_rel_diff = max(rel_d) if rel_d else None
    csv_d = [r.csv_max_abs_diff for r in results if r.csv_max_abs_diff is not None]
    merged.csv_max_abs_diff = max(csv_d) if csv_d else None
    merged.failed_passes = sorted({p for r in results for p in r.failed_passes})
    statuses = {r.status for r in results}
    merged.status = "FAILED" if "FAILED" in statuses else ("PASS" if "PASS" in statuses else "NOT_RUN")
    return merged
