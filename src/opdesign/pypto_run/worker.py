"""Child-process entry: ``python -m opdesign.pypto_run.worker <job.json>``.

Reads a job written by :func:`opdesign.pypto_run.runner.run_isolated`, builds
the case tensors, runs :func:`~opdesign.pypto_run.runner.run_in_process` inside
the job's work dir and writes the :class:`~opdesign.pypto_run.results.RunResult`
as JSON to ``result_file``. Exit code 0 when a result was written (whatever the
kernel's outcome), 2 for an unusable job.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from .results import RunResult


def main(argv: list[str] | None = None) -> int:
    """Run one job file; always try to leave a result behind."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m opdesign.pypto_run.worker <job.json>", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text())
    result_file = Path(job["result_file"])
    try:
        from .runner import load_case, load_kernel, run_in_process

        kernel = load_kernel(job["kernel_file"], job["function"])
        case = load_case(job["case"], job.get("case_args"))
        result = run_in_process(
            kernel,
            case["args"],
            case.get("goldens"),
            mode=job.get("mode", "verify"),
            work_dir=job["work_dir"],
            tol=tuple(job.get("tol") or (1e-3, 1e-3)),
            passes=job.get("passes"),
            kwargs=case.get("kwargs"),
            echo=True,
        )
    except Exception as exc:  # noqa: BLE001 - e.g. an import error in the kernel module
        from .runner import classify_exception

        err = classify_exception(exc, job.get("kernel_file"), "")
        if err.stage == "compile":
            err.stage = "parse"
        result = RunResult(errors=[err], log_tail=traceback.format_exc()[-3000:])
    tmp = result_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=1))
    tmp.replace(result_file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
