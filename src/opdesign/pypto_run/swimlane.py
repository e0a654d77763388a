"""The SIM's end-to-end figure for runs long enough that PyPTO skips printing it.

PyPTO 0.2.0 prints ``AICore End-to-End Time`` / ``AICore Utilization`` from its swim-lane
step (``pypto/lib/scripts/draw_swim_lane.py``), and its SIM skips that step for runs over
``drawPngThresholdCycle`` = 500000 cycles. For those, opdesign runs the framework's own script on
the SIM output, the way the runtime calls it (``--label_type=1``, cycles divided by 1800, i.e. a
1.8 GHz clock: that reproduces the printed figure of a run below the threshold exactly, 42.96 us).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .results import parse_sim_figures

CYCLES_PER_US = 1800  # PyPTO's own --time_convert_denominator for the swim lane


def swim_lane_script(python: str) -> Path | None:
    """``draw_swim_lane.py`` of the pypto installed for ``python`` (None when absent)."""
    proc = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('pypto').origin)"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    script = Path(proc.stdout.strip()).parent / "lib" / "scripts" / "draw_swim_lane.py"
    return script if script.is_file() else None


def rerun_figures(output_dir: str | Path, python: str, timeout: float = 600.0) -> tuple[float | None, float | None]:
    """(sim_us, utilization) from a SIM output folder, by rerunning PyPTO's swim-lane script on it."""
    odir = Path(output_dir)
    swim = odir / "CostModelSimulationOutput" / "_simulate.swim.json"
    script = swim_lane_script(python)
    if script is None or not swim.is_file():
        return None, None
    proc = subprocess.run([python, str(script), str(swim.relative_to(odir)), "tmp_topo_json.json", "program.json",
                           "--label_type=1", f"--time_convert_denominator={CYCLES_PER_US}"],
                          cwd=odir, capture_output=True, text=True, timeout=timeout)
    return parse_sim_figures(proc.stdout + proc.stderr)
