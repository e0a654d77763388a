"""SK-02 interface facts of the packed varlen layout (``layout: TND``).

Q is ``[T_q, num_heads, head_dim]``, K / V ``[T_kv, num_kv_heads, head_dim]``; batch ``b`` owns the
rows ``[cum[b-1], cum[b])`` (``cum[-1] = 0``) of the cumulative int32 end offsets ``actual_seq_q`` /
``actual_seq_kv`` (the torch_npu ``npu_fusion_attention`` TND convention). The top-k indices are one
row per packed query token and index that token's own batch: ``0 <= index < kv_len(b)``.
"""

from __future__ import annotations

from opdesign.plan.models import TensorSpec
from opdesign.spec import Spec

CUMULATIVE = {"seq_q": "actual_seq_q", "seq_kv": "actual_seq_kv"}


def host_lengths(spec: Spec) -> dict[str, str]:
    """Axis -> the ``[batch]`` int32 length tensor the kernel reads (``ready_on_host_tensors``).

    TND reads both cumulative offsets, whether the axes are varlen or not (a packed layout has no
    other way to find a batch's rows); BNSD / BSND read the per-batch KV length ``kv_act_seqs``.
    """
    return dict(CUMULATIVE) if spec.layout == "TND" else {"seq_kv": "kv_act_seqs"}


def packed_interfaces(spec: Spec, primary: list[TensorSpec]) -> list[TensorSpec]:
    """The TND primary inputs: q, k, v as given, ``topk_indices [T_q, topk]`` and both cumulative offsets."""
    tokens = primary[0].shape[0]  # the packed query-token axis of q
    keep = [t for t in primary if t.name not in ("topk_indices", "kv_act_seqs", *CUMULATIVE.values())]
    return keep + [TensorSpec(name="topk_indices", shape=[tokens, "topk"], dtype="int32")] + [
        TensorSpec(name=name, shape=["batch"], dtype="int32") for name in CUMULATIVE.values()]
