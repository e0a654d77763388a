"""Case factory for ``opdesign rank --sim``: a generated kernel's own ``make_case`` on a fixed shape.

:func:`opdesign.pypto_run.runner.run_isolated` calls ``fixed_shape_case(kernel_file, config, shape)``
in the child. The kernel file's ``CONFIGS`` entry of ``config`` gets ``shape`` as its run shape, so
every candidate of a ranking runs the same shape (a generated file shrinks its configs by its own tile
pair count, which differs between candidates).
"""

from __future__ import annotations

from typing import Any


def fixed_shape_case(kernel_file: str, config: str, shape: dict[str, Any]) -> dict[str, Any]:
    """The arguments and goldens of ``config`` built on ``shape`` by the kernel file's ``make_case``."""
    from opdesign.pypto_run.runner import load_kernel  # absolute: this file is loaded by path

    make_case = load_kernel(kernel_file, "make_case")
    module = make_case.__globals__
    module["CONFIGS"] = [{**c, "shape": {**c["shape"], **shape}} if c["name"] == config else c
                         for c in module["CONFIGS"]]
    return make_case(config, False)
