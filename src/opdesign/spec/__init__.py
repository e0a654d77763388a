"""The SPEC: what an attention operator must compute, as a pydantic model.

A SPEC is a YAML file (``schema_version: 1``). :func:`load_spec` reads it
safely, validates it and raises :class:`opdesign.errors.SpecError` whose
message names the field path (``shape.head_dim: ...``). ``opdesign schema
spec`` prints :func:`spec_json_schema`.

Cross-field rules and their sources:

* ``num_heads % num_kv_heads == 0`` (GQA/MQA head mapping, domain.md §2 "MHA, GQA").
* ``head_dim`` is 16-element aligned for bf16/fp16 (cube alignment, C-TILE-05
  parameter ``cube_align_elems``; quick reference "16-element alignment for BF16/FP16").
* ``dynamic_axes`` is a non-empty list (CANNBot contract, domain.md §9).
* ``device`` names a profile of ``constraints/devices.yaml``.
"""

from __future__ import annotations

import keyword
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from opdesign.catalog import load_catalog
from opdesign.catalog.dtypes import DTYPE_BYTES  # the one dtype-size table; the planners also read it from here
from opdesign.errors import NotFoundError, SpecError, TooLargeError
from opdesign.io import yamlsafe
from opdesign.io.limits import MAX_FILE_BYTES
from opdesign.spec.messages import FieldError, error_details, format_errors

MAX_SPEC_BYTES = MAX_FILE_BYTES  # opdesign.io.limits: 1 MiB
# rtol/atol defaults by input dtype: our choice for a float64 golden, stated in
# the README (bf16 has 8 mantissa bits, fp16 11, fp32 24).
DEFAULT_TOLERANCE = {"bf16": (2e-2, 2e-2), "fp16": (5e-3, 5e-3), "fp32": (1e-4, 1e-5)}


class _Strict(BaseModel):
    # defer_build: schemas are built on first use, so `opdesign validate` builds only the models it reads
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


ShapeInt = Annotated[int, Field(strict=True, ge=1, le=1 << 31)]
# Planning limits of opdesign (not hardware limits): beyond them the plan's
# per-block tables and the cost model would take minutes and gigabytes.
MAX_BATCH, MAX_HEADS, MAX_SEQ, MAX_HEAD_DIM, MAX_BLOCK = 65536, 1024, 1 << 20, 1024, 1024
Batch = Annotated[int, Field(strict=True, ge=1, le=MAX_BATCH)]
Heads = Annotated[int, Field(strict=True, ge=1, le=MAX_HEADS)]
Seq = Annotated[int, Field(strict=True, ge=1, le=MAX_SEQ)]
HeadDim = Annotated[int, Field(strict=True, ge=1, le=MAX_HEAD_DIM)]
Block = Annotated[int, Field(strict=True, ge=1, le=MAX_BLOCK)]
# Free text that reaches DESIGN.md: one printable line, no Markdown/HTML/template
# syntax and no placeholder words (the validator would flag them in our own output).
_NOTE_FORBIDDEN = ("{", "}", "|", "`", "\\")
_NOTE_WORDS = ("TODO", "TBD", "FIXME", "XXX", "待补充", "待确认", "module_count", "opdesign:")


def _check_note(text: str) -> str:
    if len(text) > 200:
        raise ValueError("at most 200 characters")
    if not text.isprintable():
        raise ValueError("one line of printable characters (no control characters or newlines)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not encodable as UTF-8 (lone surrogate)") from None
    bad = [c for c in _NOTE_FORBIDDEN if c in text] + [w for w in _NOTE_WORDS if w.lower() in text.lower()]
    if "<" in text and ">" in text.split("<", 1)[1]:
        bad.append("<...>")
    if bad:
        raise ValueError(f"notes are copied into DESIGN.md; remove {bad!r}")
    return text


class Shape(_Strict):
    """Typical sizes of the operator's axes (elements, not bytes)."""

    batch: Batch = Field(description="batch size (sequences)")
    num_heads: Heads = Field(description="query heads")
    num_kv_heads: Heads = Field(description="key/value heads; divides num_heads (GQA group = num_heads / num_kv_heads)")
    seq_q: Seq = Field(description="query length (tokens)")
    seq_kv: Seq = Field(description="key/value length (tokens)")
    head_dim: HeadDim = Field(description="elements per head; a multiple of 16 for bf16/fp16 (C-TILE-05)")
    block_size: Block | None = Field(None, description="paged KV page size in tokens (kv_cache: paged)")
    topk: Seq | None = Field(None, description="top-k KV positions per query in tokens (mask: topk)")
    window: Seq | None = Field(None, description="sliding-window width in tokens (mask: sliding_window)")

    @model_validator(mode="after")
    def _heads(self) -> Shape:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        return self


class ShapeOverride(_Strict):
    """Per-config overrides of :class:`Shape` (any subset of its fields)."""

    batch: Batch | None = Field(None, description="batch size (sequences)")
    num_heads: Heads | None = Field(None, description="query heads")
    num_kv_heads: Heads | None = Field(None, description="key/value heads")
    seq_q: Seq | None = Field(None, description="query length (tokens)")
    seq_kv: Seq | None = Field(None, description="key/value length (tokens)")
    head_dim: HeadDim | None = Field(None, description="elements per head")
    block_size: Block | None = Field(None, description="paged KV page size (tokens)")
    topk: Seq | None = Field(None, description="top-k KV positions per query (tokens)")
    window: Seq | None = Field(None, description="sliding-window width (tokens)")


# The three reasons SK-16 accepts for a two-pass backward (keys of the SK-16
# card's ``parameters.two_pass_reasons``; a test keeps both in step).
TwoPassReason = Literal["no_atomic_add", "deterministic_reduction", "no_prezero_output"]
# ``topk`` as a dynamic axis: the top-k count itself is only known at run time
# (not a compile-time constant), which rules out SK-02 (condition 1).
AxisName = Literal["batch", "seq_q", "seq_kv", "num_heads", "num_kv_heads", "topk"]


class DynamicAxis(_Strict):
    """One axis whose length is only known at run time."""

    name: AxisName = Field(description="the shape axis that is dynamic (topk: the top-k count is a runtime value)")
    range: tuple[ShapeInt, ShapeInt] = Field(
        description="[lo, hi] of the axis length, inclusive (same unit as the axis)")
    uniform: bool = Field(True, strict=True, description="same length for every batch (False: varlen)")

    @field_validator("range")
    @classmethod
    def _ordered(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] > v[1]:
            raise ValueError(f"range lo ({v[0]}) must not exceed hi ({v[1]})")
        return v


class Precision(_Strict):
    """Tolerance of the scaffold's self-check against the float64 golden."""

    rtol: float | None = Field(None, strict=True, gt=0, le=1,
                               description="relative tolerance (unitless); default by dtype: "
                                           "bf16 2e-2, fp16 5e-3, fp32 1e-4")
    atol: float | None = Field(None, strict=True, gt=0, le=1,
                               description="absolute tolerance (output units); default by dtype: "
                                           "bf16 2e-2, fp16 5e-3, fp32 1e-5")

    @field_validator("rtol", "atol", mode="before")
    @classmethod
    def _a_number(cls, v: object) -> object:
        if isinstance(v, float) and v != v:  # YAML .nan: not a tolerance at all, not one out of range
            raise ValueError("is not a number (.nan); give a tolerance in (0, 1], e.g. 0.02")
        return v


class Performance(_Strict):
    """Measured or targeted latencies in microseconds (SK-01 perf condition 4)."""

    baseline_us: float = Field(strict=True, gt=0, description="latency of the fused vendor baseline (microseconds)")
    current_us: float = Field(strict=True, gt=0, description="latency of the current implementation (microseconds)")

    @property
    def ratio(self) -> float:
        return self.current_us / self.baseline_us


class TypicalConfig(_Strict):
    """A shape the scaffold checks: the SPEC's typical shape with some axes overridden."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = Field(
        description="config name: letters, digits, _ . -, at most 64 characters")
    type: Literal["functional", "performance"] = Field(description="what the config is for")
    priority: Literal["P0", "P1", "P2", "P3"] = Field(description="test priority, P0 first")
    shape: ShapeOverride = Field(ShapeOverride(), description="axes that differ from the SPEC's shape")
    seed: int = Field(0, strict=True, ge=0, lt=1 << 32, description="numpy seed of the scaffold's inputs")
    note: str = Field("", description="one printable line copied into DESIGN.md (at most 200 characters)")

    @field_validator("note")
    @classmethod
    def _note(cls, v: str) -> str:
        return _check_note(v)


class Spec(_Strict):
    """An attention operator SPEC (schema_version 1)."""

    schema_version: Literal[1] = Field(description="SPEC format version: 1")
    op_name: str = Field(description="Python identifier, at most 64 characters; used in code and file names")
    kind: Literal["attention"] = Field("attention", description="operator family: attention")
    direction: Literal["forward", "backward"] = Field(
        "forward", description="forward (SK-01 / SK-02) or backward (SK-16)")
    device: str = Field(description="profile in constraints/devices.yaml: a family (a2, a3, a5: its default SKU) or "
                                    "family/SKU (a2/910B1, a3/910C4, a5/950PR_958x, a5/950PR_957x), case-insensitive")
    dtype: Literal["bf16", "fp16", "fp32"] = Field(description="dtype of Q, K, V and the output")
    layout: Literal["BSND", "BNSD", "TND"] = Field(
        "BNSD", description="axis order of Q, K, V; TND packs variable-length batches: Q [T_q, num_heads, head_dim], "
        "K/V [T_kv, num_kv_heads, head_dim], batch b's tokens are rows [cum[b-1], cum[b]) (cum[-1] = 0) of the "
        "cumulative int32 [batch] end offsets actual_seq_q / actual_seq_kv; shape.seq_q / seq_kv are the per-batch "
        "maximum, T <= batch * seq")
    shape: Shape = Field(description="the typical shape")
    dynamic_axes: list[DynamicAxis] = Field(
        min_length=1, description="axes whose length is known only at run time (at least one)")
    mask: Literal["none", "causal", "sliding_window", "tensor", "topk"] = Field(
        "none", description="causal and sliding_window are bottom-right aligned; tensor: a boolean mask input; "
        "topk: the indexer's picks per query token")
    kv_cache: Literal["contiguous", "paged"] = Field(
        "contiguous", description="paged: K/V gathered by block table (AT-17)")
    quant: Literal["none", "fp8"] = Field("none", description="fp8: P and V in FP8 E4M3 for P V (AT-08, AT-06)")
    softmax_stats_input: bool = Field(False, description="backward only: the forward l/m are inputs (SK-16)")
    precision: Precision = Field(Precision(), description="self-check tolerance; defaults by dtype")
    performance: Performance | None = Field(
        None, description="latencies; a ratio above 5 is SK-01 performance-form condition 4")
    typical_configs: list[TypicalConfig] = Field(min_length=1, description="shapes the scaffold checks (at least one)")
    golden: str | None = Field(None, pattern=r"^/?[A-Za-z0-9_][A-Za-z0-9_./-]{0,1000}\.py$",
                               description="path of the golden .py, relative to the SPEC or absolute "
                                           "(letters, digits, _ . / -)")
    two_pass_reason: TwoPassReason | None = Field(
        None, description="backward only: why two passes instead of SK-16's single pass (keys of the "
        "SK-16 card's parameters.two_pass_reasons)")

    @field_validator("schema_version", mode="before")
    @classmethod
    def _not_bool(cls, v: object) -> object:
        if isinstance(v, bool):
            raise ValueError("schema_version is the integer 1, not a boolean")
        if not isinstance(v, int):  # 1.0 or "1" would pass Literal[1] by equality
            raise ValueError(f"schema_version is the integer 1, not {type(v).__name__} {v!r}")
        return v

    @field_validator("op_name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if keyword.iskeyword(v):
            raise ValueError(f"{v!r} is a Python keyword, and op_name must be usable as a Python name in the "
                             f"generated code: pick another name (e.g. {v}_op)")
        if not (v.isidentifier() and v.isascii()) or len(v) > 64:
            raise ValueError(
                f"{v!r} is not a Python identifier of at most 64 ASCII characters "
                "(letters, digits, underscore; no leading digit)"
            )
        return v

    @field_validator("dynamic_axes")
    @classmethod
    def _unique_axes(cls, v: list[DynamicAxis]) -> list[DynamicAxis]:
        names = [a.name for a in v]
        if len(set(names)) != len(names):
            raise ValueError(f"axis names repeat: {names}")
        return v

    @model_validator(mode="after")
    def _cross_fields(self) -> Spec:
        devices = load_catalog().devices
        device = devices.get(self.device.strip().lower())
        if device is None:
            known = sorted(d.name for d in devices.values())
            raise FieldError("device", f"unknown device {self.device!r}; known: {known} (a family names its default "
                                       "SKU, family/SKU another one; constraints/devices.yaml)")
        if self.quant == "fp8" and not device.fp8_matmul:
            fp8 = sorted(d.family for d in devices.values() if d.fp8_matmul and d.name == d.family)
            raise FieldError("quant", f"quant 'fp8' needs FP8 E4M3 matmul, which device {self.device!r} does not have "
                              f"({device.sources['fp8_matmul']}); use device {' or '.join(fp8)}, "
                              "or quant 'none'")
        if self.dtype in ("bf16", "fp16"):
            align = load_catalog().constraint("C-TILE-05").param("cube_align_elems")[self.dtype]
            for where, shape in self._all_shapes():
                if shape.head_dim % align:
                    raise FieldError(
                        f"{where}.head_dim",
                        f"head_dim {shape.head_dim} is not a multiple of {align} for {self.dtype} (C-TILE-05)",
                    )
                # a KV tile is whole pages and is C1's n and C2's k: a page must keep the cube alignment
                if shape.block_size is not None and shape.block_size % align:
                    raise FieldError(
                        f"{where}.block_size",
                        f"block_size {shape.block_size} is not a multiple of {align} for {self.dtype}: a KV tile of "
                        f"whole pages is the cube's n (C1) and k (C2) axis (C-TILE-05); use e.g. "
                        f"{max(align, shape.block_size // align * align)} or {(shape.block_size // align + 1) * align}",
                    )
        needs = {("mask", "topk"): "topk", ("mask", "sliding_window"): "window", ("kv_cache", "paged"): "block_size"}
        for (field, value), dim in needs.items():
            if getattr(self, field) == value and getattr(self.shape, dim) is None:
                raise FieldError(f"shape.{dim}", f"required when {field} is {value!r}")
        if any(a.name == "topk" for a in self.dynamic_axes) and self.mask != "topk":
            raise FieldError("dynamic_axes", "a topk axis needs mask: topk")
        if self.softmax_stats_input and self.direction != "backward":
            raise FieldError("softmax_stats_input", "only meaningful with direction: backward (forward l/m as inputs)")
        if self.two_pass_reason is not None and self.direction != "backward":
            raise FieldError("two_pass_reason", "only meaningful with direction: backward (SK-16)")
        for i, axis in enumerate(self.dynamic_axes):
            if not axis.uniform and axis.name not in ("seq_q", "seq_kv"):
                raise FieldError(f"dynamic_axes.{i}.uniform",
                                 f"uniform: false (varlen per batch) applies to seq_q / seq_kv, not {axis.name}")
            lo, hi = axis.range
            for where, shape in self._all_shapes():
                value = getattr(shape, axis.name, None)
                if value is not None and not lo <= value <= hi:
                    raise FieldError(f"{where}.{axis.name}",
                                      f"{value} is outside dynamic_axes.{i}.range [{lo}, {hi}]")
        names = {c.name for c in self.typical_configs}
        if len(names) != len(self.typical_configs):
            raise FieldError("typical_configs", "config names must be unique")
        for i, cfg in enumerate(self.typical_configs):
            try:
                self.config_shape(cfg)
            except ValueError as err:
                raise FieldError(f"typical_configs.{i}.shape", str(err)) from None
        return self

    def _all_shapes(self) -> list[tuple[str, Shape]]:
        out = [("shape", self.shape)]
        for i, cfg in enumerate(self.typical_configs):
            try:
                out.append((f"typical_configs.{i}.shape", self.config_shape(cfg)))
            except ValueError:
                pass
        return out

    def config_shape(self, cfg: TypicalConfig) -> Shape:
        """The full :class:`Shape` of one typical config (SPEC shape + overrides)."""
        merged = self.shape.model_dump() | cfg.shape.model_dump(exclude_none=True)
        try:
            return Shape(**merged)
        except ValidationError as err:
            raise ValueError("; ".join(e["msg"] for e in err.errors())) from None

    @property
    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol): the SPEC's precision or the dtype default."""
        rtol, atol = DEFAULT_TOLERANCE[self.dtype]
        return (self.precision.rtol or rtol, self.precision.atol or atol)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]


def parse_spec(data: object, origin: str = "<spec>") -> Spec:
    """Validate already-parsed SPEC data.

    Raises:
        SpecError: with ``origin: field.path: message`` for every failed field.
    """
    if data is None:  # an empty file, only comments, or a bare `null`
        raise SpecError(f"{origin}: the SPEC is empty: expected a YAML mapping "
                        "(`opdesign schema spec` lists its fields)")
    if not isinstance(data, dict):
        raise SpecError(f"{origin}: the SPEC must be a YAML mapping, got {type(data).__name__}")
    try:
        return Spec.model_validate(data)
    except ValidationError as err:
        raise SpecError(f"{origin}: {format_errors(err)}", details=error_details(err)) from None


def load_spec(path: str | Path) -> Spec:
    """Read and validate a SPEC YAML file (the strict loader of :mod:`opdesign.io.yamlsafe`; at most MAX_SPEC_BYTES =
    1048576 bytes, a regular file).

    Raises:
        NotFoundError: the file does not exist (code ``not_found``).
        SpecError: unreadable file, not UTF-8, bad YAML (a repeated key, a base-60 or octal number: the
            message gives the line), or schema violation.
    """
    from opdesign.errors import InputError, ToolIOError
    from opdesign.io.safefs import read_regular

    p = Path(path)
    try:
        raw = read_regular(p, MAX_SPEC_BYTES)
    except NotFoundError as err:
        raise NotFoundError(f"{p}: SPEC file not found"
                            + (" (symlink loop)" if "loop" in err.message else "")) from None
    except (InputError, ToolIOError) as err:
        raise err.__class__(f"{p}: cannot read SPEC: {err.message.removeprefix(str(p) + ': ')}") from None
    return spec_from_bytes(raw, p)


def spec_from_bytes(raw: bytes, p: str | Path) -> Spec:
    """Validate the bytes of a SPEC file read once (``p`` names it in messages); see :func:`load_spec`."""
    if len(raw) > MAX_SPEC_BYTES:
        raise TooLargeError(f"{p}: SPEC is larger than {MAX_SPEC_BYTES} bytes", {"limit": MAX_SPEC_BYTES})
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"{p}: SPEC is not UTF-8 (byte {err.start})") from None
    try:
        data = yamlsafe.load(text).data
    except yamlsafe.YamlProblem as err:
        where = f" line {err.line}:" if err.line else ""
        raise SpecError(f"{p}:{where} invalid YAML: {err.message.removeprefix('not valid YAML: ')}",
                        details={"line": err.line}) from None
    return parse_spec(data, str(p))


def spec_json_schema() -> dict:
    """JSON Schema (draft 2020-12) of the SPEC, generated from :class:`Spec`."""
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "opdesign SPEC"
    return schema
