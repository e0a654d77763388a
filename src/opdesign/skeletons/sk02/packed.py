"""SK-02 length tensors of the packed varlen layout (``layout: TND``).

Q is ``[T_q, num_heads, head_dim]``, K / V ``[T_kv, num_kv_heads, head_dim]``; batch ``b`` owns the
rows ``[cum[b-1], cum[b])`` (``cum[-1] = 0``) of the cumulative int32 end offsets ``actual_seq_q`` /
``actual_seq_kv`` (:func:`opdesign.plan.fields.cumulative_lengths`). The top-k indices are one row per
packed query token and index that token's own batch: ``0 <= index < kv_len(b)``.
"""

from __future__ import annotations

from opdesign.plan.fields import batch_lengths
from opdesign.spec import Spec


def host_lengths(spec: Spec) -> dict[str, str]:
    """Axis -> the ``[batch]`` int32 length tensor the kernel reads (``ready_on_host_tensors``).

    TND reads both cumulative offsets (the shared ``batch_lengths``); BNSD / BSND read the per-batch KV
    length ``kv_act_seqs`` whether seq_kv is varlen or not (cur_seq and its ``pypto.cond``).
    """
    return batch_lengths(spec) if spec.layout == "TND" else {"seq_kv": "kv_act_seqs"}
