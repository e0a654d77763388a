"""Interface tensors of a plan (CANNBot ``module_interfaces.yaml`` format): primary inputs in
golden signature order and the final outputs.
"""

from __future__ import annotations

from opdesign.plan.fields import batch_lengths
from opdesign.plan.models import PageTable, TensorSpec
from opdesign.spec import Spec

NP_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _qkv_shape(spec: Spec, heads: str, seq: str) -> list[str]:
    """Q / K / V dims; TND's packed token axis is given by its upper bound ``batch * seq`` (T_q, T_kv),
    its per-batch rows by the cumulative ``actual_seq_*`` inputs (opdesign.plan.fields.cumulative_lengths)."""
    return {"BNSD": ["batch", heads, seq, "head_dim"], "BSND": ["batch", seq, heads, "head_dim"],
            "TND": [f"batch * {seq}", heads, "head_dim"]}[spec.layout]


def page_table(block_size: int | None) -> PageTable | None:
    """The ``block_table`` contract of a paged plan (AT-17): a row holds at least one entry per page of
    the batch's KV length, unused entries are -1, and the kernel clamps the column it reads to the
    table's last one (a KV tile of several pages reaches past the last page of a short row), so a
    table exactly as wide as the longest sequence needs is enough; None without pages."""
    if not block_size:
        return None
    return PageTable(min_width="ceil(seq_kv / block_size)", pad_id=-1, column_bound="max_blocks_per_seq - 1")


def io_tensors(spec: Spec) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Primary inputs (golden signature order) and final outputs of a forward attention SPEC."""
    dt = NP_DTYPE[spec.dtype]
    q = TensorSpec(name="q", shape=_qkv_shape(spec, "num_heads", "seq_q"), dtype=dt)
    if spec.kv_cache == "paged":
        cache = ["num_blocks", "block_size", "num_kv_heads", "head_dim"]
        inputs = [q, TensorSpec(name="k_cache", shape=cache, dtype=dt),
                  TensorSpec(name="v_cache", shape=cache, dtype="int8" if spec.quant == "fp8" else dt,
                             storage_of="float8_e4m3" if spec.quant == "fp8" else None),
                  TensorSpec(name="block_table", shape=["batch", "max_blocks_per_seq"], dtype="int32")]
    else:
        v_dt = "int8" if spec.quant == "fp8" else dt
        inputs = [q, TensorSpec(name="k", shape=_qkv_shape(spec, "num_kv_heads", "seq_kv"), dtype=dt),
                  TensorSpec(name="v", shape=_qkv_shape(spec, "num_kv_heads", "seq_kv"), dtype=v_dt,
                             storage_of="float8_e4m3" if spec.quant == "fp8" else None)]
    inputs += [TensorSpec(name=name, shape=["batch"], dtype="int32") for name in batch_lengths(spec).values()]
    if spec.quant == "fp8":
        # V holds FP8 E4M3 bytes (the interface dtype set has no FP8: int8 is their storage) with one
        # FP32 AT-08 inv_scale (amax / 448, the dequantisation factor) per V row, i.e. per token and KV
        # head; token axis last so one page's (or tile's) scales are one contiguous row
        scale_shape = (["num_blocks", "num_kv_heads", "block_size"] if spec.kv_cache == "paged"
                       else ["num_kv_heads", "batch * seq_kv"] if spec.layout == "TND"
                       else ["batch", "num_kv_heads", "seq_kv"])
        inputs.append(TensorSpec(name="v_inv_scale", shape=scale_shape, dtype="float32"))
    if spec.mask == "tensor":  # TND: one row per packed query token, its columns its own batch's KV positions
        inputs.append(TensorSpec(name="attn_mask", dtype="bool", shape=(
            ["batch * seq_q", "seq_kv"] if spec.layout == "TND" else ["batch", "seq_q", "seq_kv"])))
    if spec.mask == "topk":  # the indexer's picks per query token, -1 = unused slot (shared by the token's heads)
        inputs.append(TensorSpec(name="topk_indices", dtype="int32", shape=(
            ["batch * seq_q", "topk"] if spec.layout == "TND" else ["batch", "seq_q", "topk"])))
    out = TensorSpec(name="attn_out", shape=q.shape, dtype=dt)
    return inputs, [out]
