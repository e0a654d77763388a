"""The plan models the validator builds too: phrases, cube/vector tiles, budgets, the expansion
estimate (:mod:`opdesign.plan.models` re-exports them with the Plan).

This module imports neither the SPEC nor the tile pins, so that ``opdesign validate`` (which
re-derives budgets and expansions from a DESIGN.md block) loads no planner-only model.
"""

from __future__ import annotations

from dataclasses import dataclass as _dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    computed_field,
    model_serializer,
)

from opdesign.catalog.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from opdesign.catalog import DeviceProfile

Stage = Literal["C1", "V1", "C2", "V2"]


class _Model(BaseModel):
    # schemas built on first use (validate: only what it reads)
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Phrase(_Model):
    """A sentence of the plan as data: a phrase key and the values it names.

    The words live in the phrase tables of the templates (``templates/<folder>/phrases.yaml``);
    :func:`opdesign.render.phrases.say` turns a phrase into its sentence. Dumped with the context
    ``{"say": say}`` (the CLI and the agent tools do), a phrase serialises as that sentence;
    without it, as ``{"key", "args"}``. ``args`` values are numbers, strings, lists or phrases.
    """

    key: str = Field(description="phrase key, e.g. sk01.q_tile.perf (a key of a templates/*/phrases.yaml)")
    args: dict[str, Any] = Field(default_factory=dict, description="the values the sentence names")

    @model_serializer(mode="wrap")
    def _as_sentence(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        say = (info.context or {}).get("say") if isinstance(info.context, dict) else None
        return say(self) if say else handler(self)


def text(key: str, **args: Any) -> Phrase:
    """The phrase ``key`` with ``args`` (the planner's way to state a reason or a formula)."""
    return Phrase(key=key, args=args)


#: A prose field: a phrase (or a plain string, e.g. a card's own text); serialised as a string.
Text = Annotated[str | Phrase, WithJsonSchema({"type": "string"}, mode="serialization")]


class CubeTile(_Model):
    """``set_cube_tile_shapes`` of one matmul stage: each axis ``[L0, L1]`` in elements (C-TILE-05)."""

    stage: Stage = Field(description="matmul stage: C1 (Q K^T) or C2 (P V)")
    m: tuple[int, int] = Field(description="[L0, L1] tile of the m axis (elements)")
    k: tuple[int, int] = Field(description="[L0, L1] tile of the k axis (elements)")
    n: tuple[int, int] = Field(description="[L0, L1] tile of the n axis (elements)")
    operand_dtype: str = Field(description="dtype of both matmul operands (C-API-02)")
    reason: Text = Field(description="what each axis holds and the rule it follows")


class VecTile(_Model):
    """``set_vec_tile_shapes`` of one vector stage, in elements; ``view`` is the data shape it tiles."""

    stage: Stage = Field(description="vector stage: V1 (softmax chain) or V2 (rescale)")
    shape: tuple[int, int] = Field(description="[rows, cols] of one tile (elements)")
    dtype: str = Field(description="dtype the stage computes in")
    view: tuple[int, int] = Field(description="[rows, cols] of the data the tile covers (elements)")
    reason: Text = Field(description="why this tile")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tile_bytes(self) -> int:
        """Bytes of one tile: rows x cols x dtype bytes."""
        return self.shape[0] * self.shape[1] * DTYPE_BYTES[self.dtype]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tail_bytes(self) -> int:
        """Bytes of the tail axis (C-TILE-02 checks ``% 32``)."""
        return self.tail_bytes_as(self.dtype)

    def tail_bytes_as(self, dtype: str) -> int:
        """Tail-axis bytes when the tile is cast to ``dtype`` (e.g. P to bf16 before C2)."""
        return self.shape[1] * DTYPE_BYTES[dtype]


class BudgetItem(_Model):
    """One buffer user of a :class:`Budget`."""

    name: str = Field(description="buffer user, e.g. oi_resident or MM1_RESULT_SIZE")
    bytes: int = Field(description="bytes it takes")
    formula: Text = Field(description="how the bytes are computed, with the figures")
    source: str = Field(description="rule or kernel the item comes from")


class Budget(_Model):
    """Bytes of one on-chip buffer (UB per vector sub-block, L1, L0A/B/C per stage)."""

    buffer: str = Field(description="UB, L1, or L0A/L0B/L0C with its stage")
    items: list[BudgetItem] = Field(description="the users of the buffer")
    total_bytes: int = Field(description="sum of the items (bytes)")
    capacity_bytes: int = Field(description="capacity of the buffer on the device (bytes)")
    capacity_source: str = Field(description="device profile entry of the capacity")
    fits: bool = Field(description="total_bytes <= capacity_bytes")


class ExpansionOp(_Model):
    """One vector op of the C-TILE-04 estimate."""

    stage: Stage = Field(description="vector stage of the op")
    op: str = Field(description="op name, e.g. amax or mul_alpha")
    inputs: int = Field(description="input tensors of the op")
    tiles: int = Field(description="tiles per view: ceil(view / tile) over both axes")
    expressions: int = Field(description="tiles x (1 + inputs)")


class Expansion(_Model):
    """Expression-expansion estimate per op: ``ceil(view / tile) * (1 + inputs)`` (C-TILE-04)."""

    ops: list[ExpansionOp] = Field(description="the ops of one traced loop body")
    max_per_op: int = Field(description="largest expressions of one op")
    body_total: int = Field(description="expressions of all ops x traced_copies")
    traced_copies: int = Field(description="copies of the body the tracer unrolls (KV tiles of a static range, else 1)")
    limit: int = Field(description="C-TILE-04 expansion_limit, on the whole traced body")
    within_limit: bool = Field(description="body_total <= limit (one definition for every skeleton)")
    body_ratio: float = Field(description="body_total / limit, rounded to 0.1 (unitless)")


@_dataclass(frozen=True)
class BlockTiles:
    """The figures of a DESIGN.md ``opdesign:`` block the budgets are re-derived from.

    ``None`` is a missing or malformed value (the validator's accessors read it so).
    """

    device: DeviceProfile | None
    cube: dict[str, CubeTile] | None
    vec: dict[str, VecTile] | None
    form: str | None
    dtype: str | None
    quant: str | None
    q_tile: int | None
    kv_tile: int | None
    head_dim: int | None
    passes: int
    cube_nbuffer: int
