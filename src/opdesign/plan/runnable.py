"""Typical configs the written kernel can run (issue 30 item 6).

The kernel fixes some axes at compile time: ``HEAD_DIM`` always, ``GROUP`` (query heads per KV head)
in SK-01, ``SEQ_Q`` / ``SEQ_KV`` in SK-01's performance form, and ``NUM_HEADS`` / ``NUM_KV_HEADS`` (and
SK-02's ``TOPK`` unless top-k is a dynamic axis) in SK-02 and SK-16. A typical config that asks for
another value of such an axis cannot run on that kernel: PyPTO refuses it at compile time with an error
that names no kernel line. :func:`opdesign.skeletons.registry.static_axes` lists the fixed values of a
plan, :func:`check_runnable`
refuses a SPEC whose typical config differs, naming the config and the field (``spec_invalid``).
"""

from __future__ import annotations

from typing import Any

from opdesign.errors import SpecError
from opdesign.plan.models import Plan


def fixed_heads(plan: Plan) -> dict[str, tuple[Any, str]]:
    """SK-02 / SK-16: the head counts are compile-time constants (``NUM_HEADS`` / ``NUM_KV_HEADS``)."""
    return {"num_heads": (plan.num_heads, "NUM_HEADS"), "num_kv_heads": (plan.num_kv_heads, "NUM_KV_HEADS")}


def check_runnable(plan: Plan, fixed: dict[str, tuple[Any, str]]) -> None:
    """Raise :class:`SpecError` for the first typical config whose shape differs from a value the
    kernel fixes at compile time, ``fixed`` (:func:`opdesign.skeletons.registry.static_axes`); the
    message names the config, the field and the kernel constant."""
    for i, cfg in enumerate(plan.typical_configs):
        shape = cfg["shape"]
        for axis, (value, const) in fixed.items():
            if axis == "group":
                heads, kv_heads = shape.get("num_heads"), shape.get("num_kv_heads")
                if not heads or not kv_heads or heads // kv_heads == value:
                    continue
                field = "num_heads"
                got = f"num_heads / num_kv_heads = {heads} / {kv_heads} (group {heads // kv_heads})"
            else:
                if shape.get(axis) in (None, value):
                    continue
                field, got = axis, f"{axis} {shape.get(axis)}"
            raise SpecError(
                f"typical_configs[{i}].shape.{field}: config {cfg['name']!r} has {got}, but the {plan.skeleton.id} "
                f"{plan.form} kernel fixes {const} = {value} at compile time, so it cannot run this config; "
                f"give the config the kernel's value or make it a SPEC of its own",
                details={"field": f"typical_configs[{i}].shape.{field}", "config": cfg["name"], "constant": const,
                         "kernel_value": value})
