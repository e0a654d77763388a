"""numpy in opdesign's own processes, loaded with one OpenBLAS thread.

The planner and cost model use numpy for element-wise candidate arithmetic and never call BLAS. At
import, numpy's OpenBLAS starts a worker thread per extra core, and the workers spin while they wait
for work that never comes: on the 2-core CI machine that cost about 70 ms of user CPU per
``opdesign new`` (``benchmarks/bench_startup.py``) and bought nothing. Measured again for issue 29
(CPU time, median of 10 runs, ``opdesign new --spec examples/specs/causal_gqa_tail.yaml``): 391-400 ms
with it, 431-479 ms without, a saving of 8-18 % (a shared 2-core machine; callgrind does not see the
spinning threads, so it is no measure here). Kept: over the 5 % bar of issue 29.

:func:`import_numpy` is called by the command entry points that rank (``new``, ``rank``, ``tool call``
of ``new_design`` / ``rank_candidates``, the MCP workers), never on import of a library module: a program that imports
opdesign as a library keeps numpy's own thread count. ``OPENBLAS_NUM_THREADS`` is set only while
numpy loads (OpenBLAS reads it then), so child processes (PyPTO runs, scaffolds) inherit the
environment unchanged. A value the user set is kept.
"""

from __future__ import annotations

import os
import sys

_VAR = "OPENBLAS_NUM_THREADS"


def import_numpy() -> None:
    """Import numpy with one OpenBLAS thread, unless numpy is loaded already or the user set the count."""
    if "numpy" in sys.modules or _VAR in os.environ:
        return
    os.environ[_VAR] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        os.environ.pop(_VAR, None)
