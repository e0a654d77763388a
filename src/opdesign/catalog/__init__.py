"""The catalog: pattern cards, constraint tables and device profiles as typed objects.

:mod:`~opdesign.catalog.models` holds the entry types, :mod:`~opdesign.catalog.loader`
reads them from the data folders once per process (:func:`load_catalog`).
"""

from opdesign.catalog.loader import (
    Catalog,
    index_mismatches,
    load_catalog,
    load_catalog_from,
    read_index,
    rule_rows,
)
from opdesign.catalog.models import (
    ALIGN_KEYS,
    CARD_DIRS,
    CONSTRAINT_FILES,
    DEVICE_FIGURES,
    INDEX_COLUMNS,
    Card,
    CardRule,
    ConfigRec,
    Constraint,
    DeviceProfile,
    SimPlatform,
)

__all__ = [
    "ALIGN_KEYS", "CARD_DIRS", "CONSTRAINT_FILES", "DEVICE_FIGURES", "INDEX_COLUMNS", "Card", "CardRule", "Catalog",
    "ConfigRec", "Constraint", "DeviceProfile", "SimPlatform", "index_mismatches", "load_catalog", "load_catalog_from", "read_index",
    "rule_rows",
]
