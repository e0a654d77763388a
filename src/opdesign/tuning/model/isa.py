"""PTO instruction cycles: the lightweight per-instruction model the ranking is built on.

Input as in the pto-isa lightweight cost-model interface (instruction, dtype,
tile rows x cols; K for TMATMUL; destination dtype for TCVT; the memory path for
TLOAD / TSTORE), output cycles of one instruction on one core. Sources:

* vector instructions (TROWMAX, TROWSUM, TROWEXPAND, TSUB, TEXP, TMUL, TMULS,
  TDIVS): the a2/a3 formula table shipped as
  ``constraints/costmodel/pto_a2a3_vector_formula_params.csv`` (pto-isa
  ``include/pto/costmodel/a2a3/formula_costmodel/formula_params.csv``),
  ``round(slope x rows x cols + bias)``. Lookup as in the source (exact
  ``cols``, then ``*``, then dtype ``any``) plus two fallbacks of our own, see
  :func:`formula_for`;
* TMATMUL: ``TMATMUL_HEAD_CYCLES + fractals x 4096 / cube_macs_per_cycle``, one
  fractal = a 16x16x16 block (FP32 operands: two cycles per fractal), pto-isa
  ``a2a3/cce_costmodel/cce_costmodel_cube.hpp`` (``mad``) and the device's
  ``cube_macs_per_cycle``;
* TCVT: ``TCVT_HEAD_CYCLES + TCVT_CYCLES_PER_REPEAT x repeats``, one repeat per
  ``VECTOR_REPEAT_BYTES`` of source data, pto-isa ``cce_costmodel_core.hpp``
  (``EstimateVconvCycles``);
* TLOAD / TSTORE and L1 -> L0 moves: ``TRANSFER_HEAD_CYCLES[path] + bytes /
  bandwidth``, bandwidth from the device profile (``bandwidth.<path>_bytes_per_cycle``).

Transfer functions accept numpy arrays, so the ranking evaluates many
candidates at once.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from math import ceil, floor

import numpy as np

from opdesign.catalog import DeviceProfile
from opdesign.errors import CatalogError
from opdesign.io.paths import data_dir
from opdesign.spec import DTYPE_BYTES

FORMULA_FILE = "costmodel/pto_a2a3_vector_formula_params.csv"
VECTOR_OPS = ("TROWMAX", "TROWSUM", "TROWEXPAND", "TSUB", "TEXP", "TMUL", "TMULS", "TDIVS")
INSTRUCTIONS = ("TMATMUL", *VECTOR_OPS, "TCVT", "TLOAD", "TSTORE")

#: cycles; pto-isa ``cce_costmodel_cube.hpp``: ``kDefaultHeadCycles = 6`` for one ``mad``.
TMATMUL_HEAD_CYCLES = 6
#: cycles per 16x16x16 fractal by operand width in bytes (same file: ``cycle_per_repeat`` 2 for float).
TMATMUL_CYCLES_PER_FRACTAL = {1: 1, 2: 1, 4: 2}
#: MACs in one 16x16x16 fractal; ``cube_macs_per_cycle`` of a2/a3 is one fractal per cycle.
FRACTAL_MACS = 16 * 16 * 16
#: cycles; pto-isa ``cce_costmodel_core.hpp`` ``EstimateVconvCycles``: head 14, slope 2 per repeat
#: (its 18-cycle tail is paid once per pipe flush and is left out).
TCVT_HEAD_CYCLES = 14
TCVT_CYCLES_PER_REPEAT = 2
#: bytes of source data per vector repeat: 8 blocks of 32 B (Ascend C vector repeat).
VECTOR_REPEAT_BYTES = 256
#: cycles of fixed cost per transfer instruction, by path. Derived from the pto-isa fitted
#: Hill bandwidth model (``arch_config.hpp`` ``MakeFittedHillModel``, on-device a2/a3 fit):
#: ``time = (K + bytes) / peak``, so ``K / peak`` is the part that does not shrink with size:
#: GM->L1 1107 B / 28.61 GiB/s, GM->UB 30643 B / 247.16 GiB/s, UB->GM 1755 B / 28.19 GiB/s,
#: L0C->GM 29104 B / 41.25 GiB/s, at 1.85 GHz. The byte term uses the flat (default) table of
#: the same file (``devices.yaml`` ``bandwidth``); combining the two is our choice, made
#: because tile choices change the number of transfers, not only their bytes. L1->L0 moves
#: have no fitted head (0).
TRANSFER_HEAD_CYCLES = {"gm_to_l1": 66.7, "gm_to_ub": 213.6, "ub_to_gm": 107.3, "l0c_to_gm": 1215.6,
                        "l1_to_l0a": 0.0, "l1_to_l0b": 0.0}
LOAD_PATHS = ("gm_to_ub", "gm_to_l1")
STORE_PATHS = ("ub_to_gm", "l0c_to_gm")


@dataclass(frozen=True)
class FormulaMatch:
    """One row of the formula table and the lookup rule that selected it."""

    op: str
    dtype: str
    cols: str
    slope: float
    bias: float
    rule: str  # "exact", "any-cols", "any-dtype", "bf16-as-fp16 ...", "nearest-cols ..."


@cache
def formula_table() -> dict[tuple[str, str, str], tuple[float, float]]:
    """``(op, dtype, cols) -> (slope, bias)`` from the shipped CSV (``cols`` kept as text, ``*`` = any)."""
    path = data_dir("constraints") / FORMULA_FILE
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return {(r["op"], r["dtype"], r["cols"]): (float(r["slope"]), float(r["bias"])) for r in csv.DictReader(fh)}
    except (OSError, KeyError, ValueError) as err:
        raise CatalogError(f"constraints/{FORMULA_FILE}: unreadable formula table: {err}") from err


def _source_lookup(op: str, dtype: str, cols: int) -> FormulaMatch | None:
    table = formula_table()
    for dt in (dtype, "any"):
        for key_cols in (str(cols), "*"):
            row = table.get((op, dt, key_cols))
            if row:
                rule = "any-dtype" if dt != dtype else ("exact" if key_cols != "*" else "any-cols")
                return FormulaMatch(op, dt, key_cols, row[0], row[1], rule)
    return None


def formula_for(op: str, dtype: str, cols: int) -> FormulaMatch:
    """The formula row for a vector instruction on ``cols``-wide tiles.

    Order: the source's lookup (exact ``cols`` of ``dtype``, ``*`` of ``dtype``,
    the same with dtype ``any``); then our fallbacks, stated here and in
    ``constraints/costmodel/README.md``: bf16 retries as fp16 (the table has no
    bf16 rows), and finally the row of the same op and dtype with the nearest
    measured ``cols`` (a tie takes the wider row).

    Raises:
        CatalogError: the op has no row for the dtype at all.
    """
    match = _source_lookup(op, dtype, cols)
    if match is None and dtype == "bf16":
        match = _source_lookup(op, "fp16", cols)
        if match is not None:
            return FormulaMatch(match.op, match.dtype, match.cols, match.slope, match.bias,
                                f"bf16-as-fp16 {match.rule}")
    if match is not None:
        return match
    dt = "fp16" if dtype == "bf16" else dtype
    measured = sorted(int(c) for (o, d, c) in formula_table() if o == op and d == dt and c != "*")
    if not measured:
        raise CatalogError(f"constraints/{FORMULA_FILE}: no {op} row for dtype {dtype}")
    near = min(measured, key=lambda c: (abs(c - cols), -c))
    slope, bias = formula_table()[(op, dt, str(near))]
    prefix = "bf16-as-fp16 " if dt != dtype else ""
    return FormulaMatch(op, dt, str(near), slope, bias, f"{prefix}nearest-cols {near} for {cols}")


@cache
def vector_cycles(op: str, dtype: str, rows: int, cols: int) -> int:
    """Cycles of one vector instruction on a ``rows x cols`` tile: ``round(slope x rows x cols + bias)``."""
    f = formula_for(op, dtype, cols)
    return floor(f.slope * rows * cols + f.bias + 0.5)


def matmul_cycles(m, k, n, operand_dtype: str, device: DeviceProfile):
    """TMATMUL ``[m, k] x [k, n]``: head + 16x16x16 fractals at the device's cube rate (ints or arrays)."""
    fractals = (-(-m // 16)) * (-(-k // 16)) * (-(-n // 16))
    per = TMATMUL_CYCLES_PER_FRACTAL[DTYPE_BYTES[operand_dtype]] * FRACTAL_MACS / device.cube_macs_per_cycle
    return TMATMUL_HEAD_CYCLES + np.ceil(fractals * per)


def cvt_cycles(src_dtype: str, rows: int, cols: int) -> int:
    """TCVT of a ``rows x cols`` tile: head + 2 cycles per 256-byte repeat of the source."""
    repeats = ceil(rows * cols * DTYPE_BYTES[src_dtype] / VECTOR_REPEAT_BYTES)
    return TCVT_HEAD_CYCLES + TCVT_CYCLES_PER_REPEAT * repeats


def bandwidth(device: DeviceProfile, path: str) -> float:
    """Bytes per cycle of a memory path from the device profile (``bandwidth.<path>_bytes_per_cycle``)."""
    key = f"{path}_bytes_per_cycle"
    if key not in device.bandwidth:
        raise CatalogError(f"constraints/devices.yaml: {device.name}.bandwidth.{key} missing "
                           "(needed by the cost model)")
    return device.bandwidth[key]


def transfer_cycles(path: str, nbytes, device: DeviceProfile):
    """One transfer of ``nbytes`` over ``path``: ``head + nbytes / bandwidth`` (float or numpy array)."""
    return TRANSFER_HEAD_CYCLES[path] + np.asarray(nbytes, dtype=float) / bandwidth(device, path)


def instr_cycles(op: str, dtype: str, rows: int, cols: int, device: DeviceProfile, *, k: int | None = None,
                 dst_dtype: str | None = None, path: str | None = None) -> float:
    """Cycles of one PTO instruction on a ``rows x cols`` tile (the lightweight interface).

    ``k`` is required for TMATMUL (``rows`` = M, ``cols`` = N), ``dst_dtype`` for
    TCVT (the cost depends on the source width only), ``path`` for TLOAD
    (``gm_to_ub`` | ``gm_to_l1``) and TSTORE (``ub_to_gm`` | ``l0c_to_gm``).

    Raises:
        ValueError: unknown instruction or a missing / wrong extra argument.
    """
    if op == "TMATMUL":
        if k is None:
            raise ValueError("TMATMUL needs k")
        return float(matmul_cycles(rows, k, cols, dtype, device))
    if op == "TCVT":
        if dst_dtype is None:
            raise ValueError("TCVT needs dst_dtype")
        return float(cvt_cycles(dtype, rows, cols))
    if op in ("TLOAD", "TSTORE"):
        allowed = LOAD_PATHS if op == "TLOAD" else STORE_PATHS
        if path not in allowed:
            raise ValueError(f"{op} needs path in {allowed}")
        return float(transfer_cycles(path, rows * cols * DTYPE_BYTES[dtype], device))
    if op in VECTOR_OPS:
        return float(vector_cycles(op, dtype, rows, cols))
    raise ValueError(f"unknown instruction {op!r}; known: {', '.join(INSTRUCTIONS)}")
