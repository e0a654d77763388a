"""Where SIM jobs run (issue 32 deliver 5 and 6): warm local workers, fresh children, or a Dask cluster.

- :class:`LocalPool`: ``--jobs`` worker processes (``concurrent.futures.ProcessPoolExecutor``, spawn) that
  import torch + PyPTO once (the initializer) and take jobs one after another
  (:func:`opdesign.tuning.simjob.run_here`: own work folder, PyPTO options reset). Workers are replaced after
  ``recycle`` jobs each: jobs go out in waves of ``recycle x jobs`` and the executor is renewed between waves
  (``max_tasks_per_child`` hung on Python 3.11 here). A worker that dies (a native crash) breaks the executor; the
  pool starts a new one and runs each unfinished job again alone, so only the job that crashes again is
  marked failed ("worker died"), and the others go on.
- :class:`FreshPool`: today's path, a fresh child process per job (:func:`~opdesign.tuning.simjob.run_fresh`).
- :class:`DaskPool`: ``--cluster tcp://HOST:8786``, a running Dask distributed scheduler (extra
  ``opdesign[cluster]``); jobs are submitted with ``client.map`` and results come back as they complete.

Every pool returns the results in the jobs' order, whatever order they complete in. ``OPDESIGN_SIM_RUNNER=fake``
runs :func:`~opdesign.tuning.simjob.run_fake` (no PyPTO, deterministic figures) in the same pools: tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from opdesign.tuning import simjob

ENV_RUNNER = "OPDESIGN_SIM_RUNNER"
#: a full-size SIM was seen to take 6-7 GB (issue 32); a quick one far less (budget 2 GB)
FULL_JOB_BYTES = 7 * 2**30
QUICK_JOB_BYTES = 2 * 2**30
DEFAULT_RECYCLE = 20
DEFAULT_TIMEOUT = 1800.0

Done = Callable[[int, dict[str, Any]], None]


def job_function() -> Callable[[dict[str, Any]], dict[str, Any]]:
    return simjob.run_fake if os.environ.get(ENV_RUNNER) == "fake" else simjob.run_here


def available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def default_jobs(quick: bool) -> int:
    """What memory allows: available memory / the per-job budget, at least 1, at most the CPU count."""
    avail = available_bytes()
    cpus = os.cpu_count() or 1
    if avail is None:
        return 1
    return max(1, min(cpus, avail // (QUICK_JOB_BYTES if quick else FULL_JOB_BYTES)))


def _warm_init(warm: bool) -> None:
    if warm:
        from opdesign.pypto_run._lazy import import_pypto

        import_pypto()  # torch + PyPTO once per worker


def _died(job: dict[str, Any], why: str, kind: str = "died") -> dict[str, Any]:
    return {"sim_us": None, "utilization": None, "seconds": None, "wall": None, "sim_error": why, "failure": kind,
            "shape": None, "quick": bool(job.get("quick")), "config": job.get("config"), "pid": None,
            "output_dir": None}


class LocalPool:
    """``jobs`` warm worker processes (see the module docstring)."""

    name = "local"

    def __init__(self, jobs: int = 1, recycle: int = DEFAULT_RECYCLE) -> None:
        import multiprocessing

        self.jobs, self.recycle = max(1, jobs), max(1, recycle)
        self.fn = job_function()
        self._ctx = multiprocessing.get_context("spawn")
        self._ex: ProcessPoolExecutor | None = None
        self._served = 0
        self.restarts = 0
        self.recycled = 0

    def _executor(self) -> ProcessPoolExecutor:
        if self._ex is not None and self._served >= self.recycle * self.jobs:
            self._ex.shutdown(wait=True)  # recycled: every worker has run about `recycle` jobs
            self._ex = None
            self.recycled += 1
        if self._ex is None:
            self._ex = ProcessPoolExecutor(max_workers=self.jobs, mp_context=self._ctx,
                                           initializer=_warm_init, initargs=(self.fn is simjob.run_here,))
            self._served = 0
        return self._ex

    def _kill(self) -> None:
        ex = self._ex
        for proc in list(getattr(ex, "_processes", {}).values()) if ex is not None else []:
            proc.kill()  # our own workers, by their process objects
        self._restart()

    def _restart(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(wait=False, cancel_futures=True)
        self._ex = None
        self.restarts += 1

    def map(self, jobs: list[dict[str, Any]], on_done: Done | None = None) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(jobs)
        broken: list[int] = []
        todo = list(range(len(jobs)))
        while todo:  # in waves, so that no worker runs more than `recycle` jobs
            ex = self._executor()
            room = max(1, self.recycle * self.jobs - self._served)
            wave, todo = todo[:room], todo[room:]
            self._served += len(wave)
            futures = {ex.submit(self.fn, jobs[i]): i for i in wave}
            # the wave's deadline: its longest job timeout per job a worker takes in turn
            limit = max(float(jobs[i].get("timeout", DEFAULT_TIMEOUT)) for i in wave) * -(-len(wave) // self.jobs)
            try:
                for fut in as_completed(futures, timeout=limit):
                    i = futures[fut]
                    try:
                        results[i] = fut.result()
                    except BrokenProcessPool:
                        broken.append(i)
                        continue
                    except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
                        results[i] = _died(jobs[i], f"{type(exc).__name__}: {exc}"[:500])
                    if on_done:
                        on_done(i, results[i])
            except FuturesTimeout:
                self._kill()  # the hung SIMs: their workers go, the pool starts new ones
                for i in futures.values():
                    if results[i] is None and i not in broken:
                        results[i] = _died(jobs[i], f"timeout: the SIM ran past {limit:.0f} s", kind="timeout")
                        if on_done:
                            on_done(i, results[i])
            if broken:
                self._restart()
                for i in sorted(broken):  # alone: only a job that crashes its worker again is lost
                    try:
                        ex = self._executor()
                        self._served += 1
                        results[i] = ex.submit(self.fn, jobs[i]).result()
                    except BrokenProcessPool:
                        results[i] = _died(jobs[i], "worker died (the SIM process crashed on this candidate)")
                        self._restart()
                    if on_done:
                        on_done(i, results[i])
                broken = []
        return [r for r in results if r is not None]

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(wait=True, cancel_futures=True)
            self._ex = None


class FreshPool:
    """A fresh child process per job (today's ``rank --sim`` path), one job at a time."""

    name = "fresh"

    def __init__(self, python: str | None = None) -> None:
        self.python = python

    def map(self, jobs: list[dict[str, Any]], on_done: Done | None = None) -> list[dict[str, Any]]:
        out = []
        for i, job in enumerate(jobs):
            r = simjob.run_fake(job) if os.environ.get(ENV_RUNNER) == "fake" else simjob.run_fresh(job, self.python)
            out.append(r)
            if on_done:
                on_done(i, r)
        return out

    def close(self) -> None:
        pass


class DaskPool:
    """Jobs submitted to a running Dask distributed scheduler (``--cluster tcp://HOST:8786``)."""

    name = "dask"

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            from opdesign.errors import ExtraMissingError

            raise ExtraMissingError("--cluster needs Dask distributed: pip install 'opdesign[cluster]'",
                                    {"install": "pip install 'opdesign[cluster]'"}) from None
        self.address = address
        self.client = Client(address, timeout="20s")
        self.fn = job_function()

    def map(self, jobs: list[dict[str, Any]], on_done: Done | None = None) -> list[dict[str, Any]]:
        from distributed import as_completed as dask_completed

        futures = self.client.map(self.fn, jobs, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[dict[str, Any] | None] = [None] * len(jobs)
        for fut in dask_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as exc:  # noqa: BLE001 - a worker lost or a task error is this job's failure
                results[i] = _died(jobs[i], f"dask: {type(exc).__name__}: {exc}"[:500])
            if on_done:
                on_done(i, results[i])
        return [r for r in results if r is not None]

    def close(self) -> None:
        self.client.close()


def make_pool(jobs: int | None = None, cluster: str | None = None, *, quick: bool = False,
              recycle: int = DEFAULT_RECYCLE) -> LocalPool | DaskPool:
    if cluster:
        return DaskPool(cluster)
    return LocalPool(jobs or default_jobs(quick), recycle)
