"""UB content rules: the itemised UB table of the document adds up and fits, and no single vector
op of the block's vector tiles exceeds UB.

Source: C-TILE-03 (``tile_elements x dtype_bytes x tensor_count <= ub_bytes``; budgets against the
device capacity of ``constraints/devices.yaml``). OD-NUM-05 compares the block's own items and total;
these rules read what a reader reads: the table (with or without an ``opdesign:`` block, so
hand-written CANNBot designs are checked too) and each vector tile on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from opdesign.plan import checks
from opdesign.plan.buffers import vec_op_bytes
from opdesign.validate.analysis import blockdata as bd
from opdesign.validate.api import Context, Hit, rule
from opdesign.validate.parse.document import Document, Table

TOTAL_NAMES = frozenset({"total", "合计", "总计", "总量", "ub total", "ub 合计"})
BYTES_COLUMN = ("bytes", "字节", "size", "大小")
UB_WORD = re.compile(r"(?<![A-Za-z])UB(?![A-Za-z])")


def _caption(doc: Document, table: Table) -> str:
    """The prose right above a table (after the previous heading or table): its caption, or ``""``."""
    boundary = max([h.line for h in doc.headings if h.line < table.line]
                   + [t.rows[-1].line for t in doc.tables if t.rows and t.rows[-1].line < table.line] + [0])
    above = [s for s in doc.spans if boundary < s.line < table.line]
    return above[-1].text if above else ""


def _name(row: Any) -> str:
    return row.cells[0].strip("*` ").casefold() if row.cells else ""


def ub_tables(doc: Document) -> Iterator[tuple[Table, int]]:
    """(table, bytes column) of each itemised UB table: a bytes / 字节 column after the first, a
    ``total`` / ``合计`` row, and ``UB`` in its caption, section heading or header."""
    for table in doc.tables:
        col = table.column(*BYTES_COLUMN)
        if not col or not any(_name(r) in TOTAL_NAMES for r in table.rows):
            continue
        context = " ".join([_caption(doc, table), table.section, *table.header])
        if UB_WORD.search(context):
            yield table, col


def _capacity(ctx: Context) -> tuple[int, str]:
    """UB bytes of the block's device, else the largest UB of every device profile (a total above it
    fits no device)."""
    dev = bd.device(ctx)
    if dev is not None:
        return dev.ub_bytes, f"devices.yaml {dev.name}.ub_bytes"
    devices = bd.catalog().devices
    name = max(devices, key=lambda n: devices[n].ub_bytes)
    return devices[name].ub_bytes, f"the largest UB of devices.yaml ({name}.ub_bytes; the design names no device)"


@rule("OD-NUM-07", "error", "numbers", "C-TILE-03 (itemised UB budget table)",
      "the itemised UB table's rows do not add up to its total, or the total exceeds the device's UB",
      bad=('## Patterns and Design Decisions\n\nUB budget per vector sub-block:\n\n| item | bytes |\n|---|---|\n'
           '| oi_resident | 32768 |\n| vector_op_peak | 24576 |\n| **total** | 65536 |'),
      good=('## Patterns and Design Decisions\n\nUB budget per vector sub-block:\n\n| item | bytes |\n|---|---|\n'
            '| oi_resident | 32768 |\n| vector_op_peak | 24576 |\n| **total** | 57344 |'), kind='markdown')
def check_ub_table(ctx: Context) -> Iterator[Hit]:
    """A UB budget table (``UB`` in its caption, section or header; a ``bytes`` / ``字节`` column; a
    ``total`` / ``合计`` row) is the budget a reader checks: its item rows add up to the total row, and
    the total is at most the device's UB (the block's ``device`` in ``constraints/devices.yaml``;
    without one, the largest UB of any profile). Rows whose bytes cell is not a number are not added
    (the sum is then not checked)."""
    cap, source = _capacity(ctx)
    for table, col in ub_tables(ctx.doc):
        totals = [r for r in table.rows if _name(r) in TOTAL_NAMES]
        items = [r for r in table.rows if _name(r) not in TOTAL_NAMES and any(c.strip() for c in r.cells)]
        for total_row in totals[:1]:
            total = bd.cell_int(total_row.cells[col]) if col < len(total_row.cells) else None
            if total is None:
                continue
            values = [bd.cell_int(r.cells[col]) if col < len(r.cells) else None for r in items]
            if items and None not in values and sum(values) != total:
                yield Hit(total_row.line, f"UB table rows add up to {sum(values)} B, its total row says {total} B")
            if total > cap:
                yield Hit(total_row.line, f"UB total {total} B exceeds {cap} B ({source})")


@rule("OD-NUM-08", "error", "numbers", "C-TILE-03 (per-op formula)",
      "a vector tile needs more UB for one op than the device has",
      bad='opdesign:\n  vec_tiles:\n    V1: {shape: [128, 512], dtype: fp32, view: [4096, 1024]}\n'
          '    V2: {shape: [16, 128], dtype: fp32, view: [4096, 128]}',
      good='opdesign:\n  vec_tiles:\n    V1: {shape: [16, 128], dtype: fp32, view: [4096, 1024]}\n'
           '    V2: {shape: [16, 128], dtype: fp32, view: [4096, 128]}', needs_block=True)
def check_vec_tile_op(ctx: Context) -> Iterator[Hit]:
    """Each vector tile of the block, on its own: one vector op holds at least its input and its
    output tile (C-TILE-03 ``tensor_count.unary`` = 2; binary 3, reduce / expand 4), so
    ``rows x cols x dtype_bytes x 2`` above the device's UB fails whatever the op, before anything
    else is resident. Reported at the tile, with the figures. (The budget with the real op classes
    and the resident buffers is C-TILE-03's.)"""
    dev, tiles = bd.device(ctx), bd.vec_tiles(ctx)
    if dev is None or tiles is None:
        return
    fewest = bd.constraint("C-TILE-03").param("tensor_count")["unary"]
    for stage, tile in sorted(tiles.items()):
        if checks.dtype_name(tile.dtype) is None:
            continue
        need = vec_op_bytes(tile, fewest)
        if need > dev.ub_bytes:
            rows, cols = tile.shape
            yield Hit(ctx.block_line("vec_tiles", stage, "shape"),
                      f"{stage} tile [{rows}, {cols}] {tile.dtype}: {rows} x {cols} x "
                      f"{need // (rows * cols * fewest)} B "
                      f"x {fewest} tensors = {need} B per op > UB {dev.ub_bytes} B (devices.yaml {dev.name}.ub_bytes)")
