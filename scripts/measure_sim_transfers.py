"""Measure PyPTO SIM's copy costs from its pipe trace: head cycles and bytes per cycle of COPY_IN / COPY_OUT.

PyPTO 0.2.0 SIM writes ``CostModelSimulationOutput/_simulate.pipe.swim.json`` into its output folder:
per core and pipe, every tile op with its start and end cycle, e.g. ``COPY_IN ... DDR_[0,0][16,128] 8192B
TO ... UB_[0,0][16,128] 8192B``. This script collects the distinct (bytes, cycles) points of the copies
from GM (``DDR``) into L1 / UB (loads) and from UB / L0C to GM (stores), the bytes being the on-chip
side's tile, and fits ``cycles = head + bytes / bytes_per_cycle`` per side with the Theil-Sen estimator
(median of pairwise slopes, then median intercept), which a stray point does not drag. It also reads the
pairwise merges of partial row statistics (``PAIRMAX`` / ``PAIRSUM``, e.g. ``PAIRMAX ... UB_[0,0][16,128]
8192B,... TO ... UB_[0,0][16,128] 8192B``: two fp32 tiles into one) and gives their cycles per output
element, the median over the distinct points (``pair_merge_cycles_per_element``).

    python scripts/measure_sim_transfers.py OUTPUT_DIR [OUTPUT_DIR ...] [--json]

OUTPUT_DIR: a SIM output folder (``output/output_<timestamp>/``) or any folder above one. With
``--json`` it prints the CostParams fields (``load_head_cycles`` ...) that
``scripts/calibrate_costmodel.py --transfers FILE`` takes. Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from itertools import combinations
from pathlib import Path

TRACE = "_simulate.pipe.swim.json"
_COPY = re.compile(r"^\d+ (COPY_IN|COPY_OUT) \d+ (\w+?)_\[[^]]*\]\[[^]]*\]\S* (\d+)B "
                   r"TO \d+ (\w+?)_\[[^]]*\]\[[^]]*\]\S* (\d+)B")
_PAIR = re.compile(r"^\d+ (PAIRMAX|PAIRSUM) .* TO \d+ \w+?_\[[^]]*\]\[[^]]*\]\S* (\d+)B")
FP32_BYTES = 4
SIDES = {("DDR", "L1"): "load", ("DDR", "UB"): "load", ("UB", "DDR"): "store", ("L0C", "DDR"): "store"}


def copy_points(trace: Path) -> dict[str, set[tuple[int, int]]]:
    """Distinct (on-chip bytes, cycles) of the loads and stores of one pipe trace."""
    points: dict[str, set[tuple[int, int]]] = {"load": set(), "store": set()}
    for core in json.loads(trace.read_text(encoding="utf-8")):
        for pipe in ("MTE_IN", "MTE_OUT"):
            for op in core.get("pipeLogs", {}).get(pipe, []):
                m = _COPY.match(op["tileOp"])
                side = SIDES.get((m.group(2), m.group(4))) if m else None
                if side:
                    nbytes = int(m.group(5) if side == "load" else m.group(3))
                    points[side].add((nbytes, op["execEnd"] - op["execStart"]))
    return points


def pair_points(trace: Path) -> set[tuple[int, int]]:
    """Distinct (output fp32 elements, cycles) of the PAIRMAX / PAIRSUM ops of one pipe trace."""
    found: set[tuple[int, int]] = set()
    for core in json.loads(trace.read_text(encoding="utf-8")):
        for op in core.get("pipeLogs", {}).get("VECTOR_ALU", []):
            m = _PAIR.match(op["tileOp"])
            if m:
                found.add((int(m.group(2)) // FP32_BYTES, op["execEnd"] - op["execStart"]))
    return found


def theil_sen(points: set[tuple[int, int]]) -> tuple[float, float] | None:
    """(head cycles, bytes per cycle) of ``cycles = head + bytes / rate``; None without two sizes."""
    slopes = [(c2 - c1) / (b2 - b1) for (b1, c1), (b2, c2) in combinations(sorted(points), 2) if b2 != b1]
    slopes = [s for s in slopes if s > 0]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    head = statistics.median(c - slope * b for b, c in points)
    return round(head, 1), round(1 / slope, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print the CostParams fields as JSON")
    args = parser.parse_args(argv)
    traces = sorted(t for d in args.dirs for t in d.rglob(TRACE))
    if not traces:
        print(f"no {TRACE} under {', '.join(map(str, args.dirs))}", file=sys.stderr)
        return 2
    points: dict[str, set[tuple[int, int]]] = {"load": set(), "store": set()}
    for trace in traces:
        for side, found in copy_points(trace).items():
            points[side] |= found
    fields: dict[str, float] = {}
    for side in ("load", "store"):
        fit = theil_sen(points[side])
        print(f"{side}: {len(points[side])} distinct (bytes, cycles) points {sorted(points[side])}", file=sys.stderr)
        if fit is None:
            print(f"{side}: fewer than two copy sizes: no fit", file=sys.stderr)
            continue
        fields[f"{side}_head_cycles"], fields[f"{side}_bytes_per_cycle"] = fit
        print(f"{side}: head {fit[0]} cycles, {fit[1]} bytes/cycle", file=sys.stderr)
    pairs = set().union(*(pair_points(t) for t in traces))
    if pairs:
        fields["pair_merge_cycles_per_element"] = round(statistics.median(c / e for e, c in pairs), 4)
        print(f"pair merges: {len(pairs)} distinct (elements, cycles) points {sorted(pairs)}: "
              f"{fields['pair_merge_cycles_per_element']} cycles per element", file=sys.stderr)
    if args.json:
        print(json.dumps({"params": fields, "traces": len(traces),
                          "points": {k: sorted(v) for k, v in points.items()}, "pair_points": sorted(pairs)},
                         indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
