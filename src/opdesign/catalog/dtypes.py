"""The one dtype-size table (C-TILE-02 ``dtype_bytes``), shared by the SPEC, the plan models and the
validator without importing either of the first two."""

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
