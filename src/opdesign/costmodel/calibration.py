"""CostParams fitted to PyPTO SIM times: ``constraints/costmodel/calibration.yaml`` (issue 11 item 3).

The file is written by ``scripts/calibrate_costmodel.py`` from a real SIM run and records its
provenance (SPECs, PyPTO release, date). :func:`load_params` gives the calibrated parameters when
the file exists and the raw :class:`CostParams` defaults otherwise (or with ``calibrated=False``:
``opdesign rank --uncalibrated``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from opdesign.costmodel.stages import CostParams
from opdesign.paths import data_dir

CALIBRATION_FILE = ("costmodel", "calibration.yaml")


def calibration_path() -> Path:
    return data_dir("constraints").joinpath(*CALIBRATION_FILE)


@cache
def _calibrated() -> CostParams | None:
    path = calibration_path()
    if not path.is_file():
        return None
    from opdesign.yamlload import safe_load

    data = safe_load(path.read_text(encoding="utf-8"))
    return CostParams(**data["params"])


def load_params(calibrated: bool = True) -> CostParams:
    """The calibrated CostParams (when a calibration file is committed), else the defaults."""
    return (_calibrated() if calibrated else None) or CostParams()
