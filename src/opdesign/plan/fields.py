"""Plan fields every skeleton derives from the SPEC the same way: scope checks, echoed configs,
per-batch length tensors.
"""

from __future__ import annotations

from typing import Any

from opdesign.catalog.pypto_api import api_release
from opdesign.errors import SpecError
from opdesign.plan.core import text
from opdesign.plan.models import Decision
from opdesign.plan.schedule import Schedule
from opdesign.spec import Spec, TypicalConfig


def check_supported(spec: Spec, supported: dict[str, tuple[str, ...]], what: str) -> None:
    """Raise SpecError naming the first SPEC field whose value ``what`` does not plan."""
    for field, allowed in supported.items():
        value = getattr(spec, field)
        if value not in allowed:
            raise SpecError(f"{field}: {value!r} is not planned by {what} in this version of opdesign "
                            f"(supported: {', '.join(allowed)}); see the README's scope section")


def spec_echo(spec: Spec) -> dict[str, Any]:
    """The SPEC's typical configs (full shapes) and dynamic axes as Plan fields, for every skeleton,
    and the PyPTO release the generated kernel is written for."""
    return {
        "pypto_release": api_release(),
        "typical_configs": [
            {"name": c.name, "type": c.type, "priority": c.priority, "seed": c.seed, "note": c.note,
             "shape": spec.config_shape(c).model_dump(exclude_none=True), **latency_target(spec, c)}
            for c in spec.typical_configs
        ],
        "dynamic_axes": [{"name": a.name, "range": list(a.range), "uniform": a.uniform} for a in spec.dynamic_axes],
    }


def latency_target(spec: Spec, config: TypicalConfig) -> dict[str, Any]:
    """The latency target of a performance config, from the SPEC's ``performance`` block: its ``baseline_us``
    (the fused vendor baseline), for a config at the SPEC's own shape (where the block's latencies are
    measured). Empty when the SPEC gives no performance block, for a functional config, and for a config of
    another shape."""
    perf = spec.performance
    if perf is None or config.type != "performance" or spec.config_shape(config) != spec.shape:
        return {}
    target, current = _number(perf.baseline_us), _number(perf.current_us)
    return {"latency_target_us": target, "latency_current_us": current,
            "latency_source": f"SPEC performance.baseline_us, the fused baseline at the SPEC's shape; current "
                              f"{current} us, {perf.ratio:.1f}x the target"}


def _number(value: float) -> int | float:
    """A latency as written: an integral float as an int (16948.0 -> 16948)."""
    return int(value) if float(value).is_integer() else value


def batch_lengths(spec: Spec) -> dict[str, str]:
    """Axis -> name of the ``[batch]`` int32 tensor holding per-batch valid lengths.

    Paged KV always reads ``kv_act_seqs`` (AT-17, per-batch lengths); a non-uniform (varlen) axis
    reads ``actual_seq_q`` / ``actual_seq_kv``. Layout TND always has both (its rows are packed, so
    every batch needs its offset), as cumulative end offsets (:func:`cumulative_lengths`); with paged
    KV its K side keeps ``kv_act_seqs``. Loop bounds depend on them, so they are
    ``ready_on_host_tensors`` (SK-01 configuration).
    """
    varlen = {a.name for a in spec.dynamic_axes if not a.uniform}
    packed = spec.layout == "TND"
    out = {}
    if packed or "seq_q" in varlen:
        out["seq_q"] = "actual_seq_q"
    if spec.kv_cache == "paged":
        out["seq_kv"] = "kv_act_seqs"
    elif packed or "seq_kv" in varlen:
        out["seq_kv"] = "actual_seq_kv"
    return out


def cumulative_lengths(spec: Spec) -> tuple[str, ...]:
    """The tensors of :func:`batch_lengths` that hold CUMULATIVE end offsets rather than lengths.

    Layout TND (the torch_npu ``npu_fusion_attention`` TND convention of ``actual_seq_qlen`` /
    ``actual_seq_kvlen``): entry ``b`` is the end row of batch ``b`` in the packed axis, so batch ``b``
    owns rows ``[cum[b-1], cum[b])`` with ``cum[-1] = 0`` and its length is ``cum[b] - cum[b-1]``
    (:func:`packed_rows`). Paged ``kv_act_seqs`` stays per-batch lengths (its rows come from the
    block table, not from a packed axis).
    """
    if spec.layout != "TND":
        return ()
    return tuple(name for name in batch_lengths(spec).values() if name != "kv_act_seqs")


def cumulative_ends(lengths: list[int]) -> list[int]:
    """Per-batch lengths -> the cumulative end offsets a TND kernel reads (``[3, 5] -> [3, 8]``)."""
    out, end = [], 0
    for n in lengths:
        if n < 0:
            raise ValueError(f"a batch length is negative: {n}")
        end += n
        out.append(end)
    return out


def packed_rows(cum: list[int], b: int) -> tuple[int, int]:
    """``(start, length)`` of batch ``b`` in a packed axis from cumulative end offsets ``cum``."""
    start = cum[b - 1] if b > 0 else 0
    return start, cum[b] - start


def schedule_counts(sched: Schedule, aic_ref: str) -> list[Decision]:
    """The count rows of a schedule (``core_waves``, ``occupancy``, ``longest_chain``), for the counts table."""
    source = f"devices.yaml {aic_ref}; dynamic placement (PyPTO docs pypto-jit.md, device_sched_mode)"
    return [
        Decision(name="core_waves", value=sched.waves,
                 basis=text("sched.count.waves", roots=sched.roots, cores=sched.cores, full=sched.full_waves,
                            tail=sched.tail_roots), source=source),
        Decision(name="occupancy", value=sched.occupancy,
                 basis=text("sched.count.occupancy", roots=sched.roots, waves=sched.waves, cores=sched.cores),
                 source=source),
        Decision(name="longest_chain", value=sched.longest_chain,
                 basis=text("sched.count.chain", basis=sched.chain_basis, steps=sched.steps, cores=sched.cores,
                            rounds=sched.step_rounds), source="the plan's loop nest (KV steps of one root depend on "
                                                               "each other; roots are independent)"),
    ]
