"""Time `opdesign validate` on kernel sources (prints; no assertion).

The kernel corpus (tests/fixtures/kernel_corpus/) and synthetic kernels near the 256 KiB input limit:
a chain of dependent updates inside a KV loop (the worst case of OD-KN-03's source tracking and
OD-KN-06's binding order) and many independent views (OD-KN-05's dependence sets).

    PYTHONPATH=src python benchmarks/bench_kernel_lint.py
"""

from __future__ import annotations

import time
from pathlib import Path

from opdesign.workflows.validate import MAX_INPUT_BYTES, validate_kernel_text

ROOT = Path(__file__).resolve().parents[1]
HEAD = ('import pypto\n\nTILE = 64\n\n\n@pypto.frontend.jit()\n'
        'def k(q: pypto.Tensor((B, N, S, 64), pypto.DT_BF16), out: pypto.Tensor((B, N, S, 64), pypto.DT_BF16)):\n'
        '    pypto.experimental.set_operation_options(combine_axis=True)\n'
        '    for b in pypto.loop(4, name="LOOP_b"):\n        for h in pypto.loop(4, name="LOOP_h"):\n'
        '            acc0 = pypto.tensor([TILE, 64], pypto.DT_FP32, "acc0")\n'
        '            for kj in pypto.loop(8, name="LOOP_kv"):\n')


def _fill(line_of) -> str:
    lines, i = [HEAD], 0
    while sum(len(s) for s in lines) < MAX_INPUT_BYTES - 200:
        lines.append(line_of(i))
        i += 1
    return "".join(lines)


def chain(i: int) -> str:
    return (f"                acc{i + 1} = pypto.add(acc{i}, acc0)\n"
            f"                acc0[:] = pypto.add(acc0, acc{i + 1})\n")


def views(i: int) -> str:
    return f"                t{i} = pypto.view(q, [1, 1, TILE, 64], [b, h, kj * TILE + {i}, 0])\n"


def timed(text: str, name: str, repeat: int = 3) -> tuple[float, int]:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        report = validate_kernel_text(text, name)
        best = min(best, time.perf_counter() - start)
    return best, len(report.findings)


def main() -> None:
    for path in sorted((ROOT / "tests" / "fixtures" / "kernel_corpus").glob("*_kernel.py")):
        seconds, findings = timed(path.read_text(encoding="utf-8"), path.name)
        print(f"{path.name:34s} {len(path.read_bytes()):7d} B  {seconds * 1000:8.1f} ms  {findings} findings")
    for name, line_of in (("synthetic_chain", chain), ("synthetic_views", views)):
        text = _fill(line_of)
        seconds, findings = timed(text, name, repeat=1)
        print(f"{name:34s} {len(text.encode()):7d} B  {seconds * 1000:8.1f} ms  {findings} findings")


if __name__ == "__main__":
    main()
