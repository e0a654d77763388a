"""The catalog: pattern cards, constraint tables and device profiles as typed objects.

:mod:`~opdesign.catalog.models` holds the entry types, :mod:`~opdesign.catalog.loader`
reads them from the data folders once per process (:func:`load_catalog`). The plain tables of this
package (:mod:`.dtypes`, the CANNBot contract's :mod:`.headings`) need neither: the names below load
their module on first use, so ``opdesign --help`` (which reads the default heading language) does not
build the catalog's pydantic models.
"""

from __future__ import annotations

import importlib
from typing import Any

_LOADER = ("Catalog", "index_mismatches", "load_catalog", "load_catalog_from", "read_index", "rule_rows")
_MODELS = ("ALIGN_KEYS", "CARD_DIRS", "CONSTRAINT_FILES", "DEVICE_FIGURES", "INDEX_COLUMNS", "Card", "CardRule",
           "ConfigRec", "Constraint", "DeviceProfile", "SimPlatform")

__all__ = sorted(_LOADER + _MODELS)


def __getattr__(name: str) -> Any:
    if name in _LOADER or name in _MODELS:
        module = importlib.import_module(f"opdesign.catalog.{'loader' if name in _LOADER else 'models'}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
