"""pass_options / runtime_options of a plan from its skeleton card's configuration recommendations."""

from __future__ import annotations

from typing import Any

from opdesign.catalog import Card
from opdesign.plan.fields import batch_lengths
from opdesign.plan.models import ConfigEntry, text
from opdesign.plan.options import is_default, option_docs
from opdesign.spec import Spec


def config_entries(spec: Spec, card: Card, fallback: Card | None = None,
                   ) -> tuple[dict[str, dict[str, Any]], list[ConfigEntry]]:
    """pass_options / runtime_options from a skeleton card's configuration recommendations.

    The first recommendation of each key without a ``when`` condition is taken.
    Paged KV and per-batch lengths add ``ready_on_host_tensors`` (required when
    loop bounds read them; its recommendation comes from ``card``, else from
    ``fallback``, e.g. SK-01's for an SK-02 plan); paged KV also takes the deeper
    ``vec_nbuffer_setting`` of the card (``vec_nbuffer_paged_sparse_max``).
    """
    config: dict[str, dict[str, Any]] = {"pass_options": {}, "runtime_options": {}}
    entries: list[ConfigEntry] = []
    seen = set()
    for rec in card.config:
        group, _, name = rec.key.partition(".")
        if group not in config or rec.key in seen or rec.when or rec.status not in ("required", "recommended"):
            continue
        seen.add(rec.key)
        config[group][name] = rec.value
        entries.append(ConfigEntry(key=rec.key, value=rec.value, status=rec.status, purpose=rec.purpose,
                                   source=f"{card.id} configuration"))
    host_tensors = (["block_table"] if spec.kv_cache == "paged" else []) + list(batch_lengths(spec).values())
    if host_tensors:
        key = "runtime_options.ready_on_host_tensors"
        rec = next(r for r in card.config + (fallback.config if fallback else []) if r.key == key)
        config["runtime_options"]["ready_on_host_tensors"] = host_tensors
        entries.append(ConfigEntry(key=rec.key, value=host_tensors, status="required",
                                   purpose=text("config.host_tensors", purpose=rec.purpose),
                                   source=f"{card.id} configuration ({rec.when})"))
    if spec.kv_cache == "paged":
        deep = card.param("vec_nbuffer_paged_sparse_max")
        config["pass_options"]["vec_nbuffer_setting"] = dict(deep)
        for i, e in enumerate(entries):
            if e.key == "pass_options.vec_nbuffer_setting":
                entries[i] = e.model_copy(update={"value": dict(deep),
                                                  "purpose": text("config.paged_vec_nbuffer", purpose=e.purpose)})
    return config, [documented(e) for e in entries]


def documented(entry: ConfigEntry) -> ConfigEntry:
    """``entry`` with the meaning and doc page of constraints/pypto_options.yaml, and marked as the framework's
    default when its value is the documented default."""
    doc = option_docs().get(entry.key)
    if doc is None or entry.meaning is not None:
        return entry
    default = is_default(entry.key, entry.value)
    return entry.model_copy(update={"meaning": doc.meaning, "doc": doc.doc, "default": default,
                                    "status": f"{entry.status} (framework default)" if default else entry.status})
