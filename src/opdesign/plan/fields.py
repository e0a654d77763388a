"""Plan fields every skeleton derives from the SPEC the same way: scope checks, echoed configs,
per-batch length tensors.
"""

from __future__ import annotations

from typing import Any

from opdesign.errors import SpecError
from opdesign.catalog.pypto_api import api_release
from opdesign.spec import Spec


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
             "shape": spec.config_shape(c).model_dump(exclude_none=True)}
            for c in spec.typical_configs
        ],
        "dynamic_axes": [{"name": a.name, "range": list(a.range), "uniform": a.uniform} for a in spec.dynamic_axes],
    }


def batch_lengths(spec: Spec) -> dict[str, str]:
    """Axis -> name of the ``[batch]`` int32 tensor holding per-batch valid lengths.

    Paged KV always reads ``kv_act_seqs`` (AT-17); a non-uniform (varlen) axis
    reads ``actual_seq_q`` / ``actual_seq_kv``. Loop bounds depend on them, so they
    are ``ready_on_host_tensors`` (SK-01 configuration).
    """
    varlen = {a.name for a in spec.dynamic_axes if not a.uniform}
    out = {}
    if "seq_q" in varlen:
        out["seq_q"] = "actual_seq_q"
    if spec.kv_cache == "paged":
        out["seq_kv"] = "kv_act_seqs"
    elif "seq_kv" in varlen:
        out["seq_kv"] = "actual_seq_kv"
    return out
