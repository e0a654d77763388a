"""SK-16 facts of the packed varlen layout (``layout: TND``), SK-16-R10.

Q, O, dO and dQ are ``[T_q, num_heads, head_dim]``, K, V, dK and dV ``[T_kv, num_kv_heads, head_dim]``,
l and m ``[T_q, num_heads, 1]``; batch ``b`` owns the rows ``[cum[b-1], cum[b])`` (``cum[-1] = 0``)
of the cumulative int32 end offsets ``actual_seq_q`` / ``actual_seq_kv`` (the card's ``actual_q`` /
``actual_kv``; torch_npu's ``npu_fusion_attention`` TND convention). Tiles stay compile-time; the
per-batch lengths only bound the loops and the tails (SK-16-R10).
"""

from __future__ import annotations

from opdesign.errors import SpecError
from opdesign.plan.fields import cumulative_lengths
from opdesign.plan.interfaces import io_tensors
from opdesign.plan.models import ConfigEntry, TensorSpec
from opdesign.spec import Spec


def check_varlen(spec: Spec) -> None:
    """Varlen (``uniform: false``) is planned only packed: a padded BNSD / BSND varlen backward is refused."""
    if spec.layout == "TND":
        return
    for i, axis in enumerate(spec.dynamic_axes):
        if not axis.uniform:
            raise SpecError(f"dynamic_axes.{i}.uniform: a varlen backward on layout {spec.layout} is not planned "
                            "by this version: SK-16-R10 reads per-batch offsets and lengths from the cumulative "
                            "actual_q / actual_kv of the packed layout; declare `layout: TND`")


def packed_shapes(spec: Spec) -> tuple[list[str], list[str], list[str]]:
    """(q-like, kv-like, l/m) interface shapes of TND: the packed token axis first (shapes of io_tensors)."""
    primary, _ = io_tensors(spec)
    qs, kvs = primary[0].shape, primary[1].shape
    return list(qs), list(kvs), [qs[0], qs[1], "1"]


def length_inputs(spec: Spec) -> list[TensorSpec]:
    """The two cumulative ``[batch]`` int32 offsets (``actual_seq_q``, ``actual_seq_kv``), after the golden's
    tensors."""
    return [TensorSpec(name=n, shape=["batch"], dtype="int32") for n in cumulative_lengths(spec)]


def host_tensors_entry(spec: Spec, rec_purpose: str) -> ConfigEntry:
    """``runtime_options.ready_on_host_tensors`` of a TND backward: the card's actual_q / actual_kv under the
    interface names, required (every loop bound and row offset is read from them)."""
    return ConfigEntry(key="runtime_options.ready_on_host_tensors", value=list(cumulative_lengths(spec)),
                       status="required",
                       purpose=f"{rec_purpose} The card's actual_q / actual_kv are the interface's cumulative "
                               "actual_seq_q / actual_seq_kv: the batch loop reads its row offsets cum[b-1] and "
                               "lengths from them, and the s1 / s2 loop bounds depend on them.",
                       source="SK-16 configuration (variable-length batches), SK-16-R10")
