"""Tiles pinned on a plan: ``opdesign new --candidate N`` / ``--tiles`` (:mod:`opdesign.workflows.pin`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TilePins(BaseModel):
    """Tiles pinned by hand (``opdesign new --tiles``) or by a ranked candidate (``--candidate N``).

    ``None`` leaves a knob to the skeleton's own rule. ``head_group`` and ``streams`` are cost-model
    knobs that the generated kernel does not express (one chain, one stream per core); a plan states them.
    """

    model_config = ConfigDict(extra="forbid")

    q_tile: int | None = Field(None, description="Q rows per loop step")
    kv_tile: int | None = Field(None, description="K/V columns per loop step")
    qk_tile: int | None = Field(None, description="C1 m / n (and C2 m) cube tile")
    pv_tile: int | None = Field(None, description="C2 k L1 cube tile")
    vec_tile: tuple[int, int] | None = Field(None, description="V1 TileShape [rows, cols]; V2 takes the rows")
    unroll_factor: int | None = Field(None, description="KV-loop unroll factor")
    head_group: int | None = Field(None, description="AT-23 head group G (stated, not generated)")
    streams: int | None = Field(None, description="task streams per core (stated, not generated)")
    cube_tiles: dict[str, dict[str, list[int]]] | None = Field(
        None, description="C1 / C2 m, k, n as [L0, L1] exactly (a ranked row's tiles, rectangular ones included); "
                          "replaces what qk_tile / pv_tile would give")
