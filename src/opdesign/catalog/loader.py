"""The catalog loader: pattern cards, constraint tables and device profiles from the data folders.

Data (see :mod:`opdesign.io.paths`): ``patterns/{skeletons,atoms}/*.md`` (one card per
file: YAML front matter + Markdown body; ``index.md`` lists them, see
:func:`index_mismatches`), ``constraints/{tiling,loop,symbolic,dataflow,api}.yaml``
(C-TILE/LOOP/SYM/DATA/API) and ``constraints/devices.yaml`` (a2/a3/a5, every figure
with its source). A malformed file raises :class:`~opdesign.errors.CatalogError`
naming the file (relative path) and field path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from opdesign.catalog.models import (
    CARD_DIRS,
    CONSTRAINT_FILES,
    INDEX_COLUMNS,
    Card,
    Constraint,
    DeviceProfile,
    SimPlatform,
    _ConstraintTable,
    _DeviceFile,
    _lookup,
)  # fmt: skip
from opdesign.catalog.store import load_cached
from opdesign.errors import CatalogError, NotFoundError
from opdesign.io.paths import data_dir


def _fail(rel: str, message: str) -> CatalogError:
    return CatalogError(f"{rel}: {message}", {"file": rel})


def _invalid(rel: str, err: ValidationError) -> CatalogError:
    lines = []
    for item in err.errors():
        loc = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"{rel}: {loc}: {item['msg']}")
    return CatalogError("; ".join(lines), {"file": rel, "errors": lines})


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: same safe subset, faster


def _yaml(text: str, rel: str) -> Any:
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as err:
        raise _fail(rel, f"not valid YAML: {err}") from err


def _split_front_matter(text: str, rel: str) -> tuple[dict[str, Any], str]:
    """Split ``---``-delimited YAML front matter from the Markdown body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _fail(rel, "(front matter): the file must start with a '---' line")
    for end, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            meta = _yaml("".join(lines[1:end]), rel)
            if not isinstance(meta, dict):
                raise _fail(rel, "(front matter): expected a YAML mapping")
            return meta, "".join(lines[end + 1 :]).lstrip("\n")
    raise _fail(rel, "(front matter): no closing '---' line")


def _read_card(file: Path, rel: str, folder_type: str) -> Card:
    meta, body = _split_front_matter(file.read_text(encoding="utf-8"), rel)
    for reserved in ("body", "path"):
        if reserved in meta:
            raise _fail(rel, f"{reserved}: set by the loader, not in front matter")
    try:
        card = Card.model_validate({**meta, "body": body, "path": rel})
    except ValidationError as err:
        raise _invalid(rel, err) from err
    if card.type != folder_type:
        raise _fail(rel, f"type: {card.type!r} card in the {CARD_DIRS[folder_type]} folder")
    if not file.name.startswith(f"{card.id}-"):
        raise _fail(rel, f"id: {card.id!r} does not match the file name")
    return card


def _load_cards(patterns_dir: Path) -> dict[str, Card]:
    cards: dict[str, Card] = {}
    for card_type, folder in CARD_DIRS.items():
        for file in sorted((patterns_dir / folder).glob("*.md")):
            if file.name == "index.md":
                continue
            rel = f"patterns/{folder}/{file.name}"
            card = _read_card(file, rel, card_type)
            if card.id in cards:
                raise _fail(rel, f"id: {card.id!r} already defined in {cards[card.id].path}")
            cards[card.id] = card
    return dict(sorted(cards.items()))


_M = TypeVar("_M", bound=BaseModel)


def _read_table(constraints_dir: Path, name: str, model: type[_M]) -> _M:
    rel = f"constraints/{name}"
    file = constraints_dir / name
    if not file.is_file():
        raise _fail(rel, "file missing")
    try:
        return model.model_validate(_yaml(file.read_text(encoding="utf-8"), rel))
    except ValidationError as err:
        raise _invalid(rel, err) from err


def _load_constraints(constraints_dir: Path) -> dict[str, Constraint]:
    found: dict[str, Constraint] = {}
    for area, name in CONSTRAINT_FILES.items():
        table = _read_table(constraints_dir, name, _ConstraintTable)
        if table.area != area:
            raise _fail(f"constraints/{name}", f"area: expected {area!r}, found {table.area!r}")
        for entry in table.constraints:
            found[entry.id] = Constraint(**entry.model_dump(), area=area, path=f"constraints/{name}")
    return dict(sorted(found.items()))


def _load_devices(constraints_dir: Path) -> tuple[dict[str, DeviceProfile], SimPlatform]:
    """Profiles by lower-case name: each family (``a2``: its default SKU), ``family/SKU`` for the default
    SKU and for every SKU of ``skus`` (its own figures over the family's, with their own sources)."""
    table = _read_table(constraints_dir, "devices.yaml", _DeviceFile)
    found: dict[str, DeviceProfile] = {}
    for family, entry in sorted(table.devices.items()):
        base = entry.model_dump(exclude={"skus"})
        found[family] = DeviceProfile(**base, name=family, family=family)
        found[f"{family}/{entry.sku}".lower()] = DeviceProfile(**base, name=f"{family}/{entry.sku}", family=family)
        for sku, other in sorted(entry.skus.items()):
            figures = other.overrides()
            sources = {**entry.sources, **other.sources}
            data = {**base, **figures, "sku": sku, "soc_version": other.soc_version, "platform": other.platform,
                    "description": other.description or entry.description, "sources": sources}
            found[f"{family}/{sku}".lower()] = DeviceProfile(**data, name=f"{family}/{sku}", family=family,
                                                              overridden=tuple(figures))
    return found, SimPlatform(**table.sim_platform.model_dump())


@dataclass(frozen=True)
class Catalog:
    """All cards, constraints and device profiles, each dict sorted by id / name."""

    cards: dict[str, Card]
    constraints: dict[str, Constraint]
    devices: dict[str, DeviceProfile]
    sim_platform: SimPlatform

    def card(self, card_id: str) -> Card:
        """Return card ``card_id`` (``SK-01``, case-insensitive); NotFoundError lists known ids."""
        return _lookup(self.cards, card_id.strip().upper(), "card")

    def constraint(self, constraint_id: str) -> Constraint:
        """Return constraint ``constraint_id`` (``C-TILE-02``); NotFoundError lists known ids."""
        return _lookup(self.constraints, constraint_id.strip().upper(), "constraint")

    def device(self, name: str) -> DeviceProfile:
        """Return device profile ``name`` (``a2``, ``a3``, ``a5``: the family's default SKU, or ``family/SKU``
        such as ``a5/950PR_957x``, case-insensitive); NotFoundError lists the families and the SKUs."""
        key = name.strip().lower()
        if key not in self.devices:
            families = [d.name for d in self.devices.values() if d.name == d.family]
            skus = [d.name for d in self.devices.values() if d.name != d.family]
            known = families + skus
            raise NotFoundError(f"unknown device {key!r}; known: {', '.join(families)} (SKUs: {', '.join(skus)})",
                                {"known": known})
        return self.devices[key]


def load_catalog_from(patterns_dir: Path | str, constraints_dir: Path | str) -> Catalog:
    """Load (uncached) the catalog from explicit folders; raises CatalogError on malformed data."""
    constraints_dir = Path(constraints_dir)
    devices, sim_platform = _load_devices(constraints_dir)
    return Catalog(
        cards=_load_cards(Path(patterns_dir)),
        constraints=_load_constraints(constraints_dir),
        devices=devices,
        sim_platform=sim_platform,
    )


@cache
def load_catalog() -> Catalog:
    """Load the shipped catalog once per process (from ``opdesign.io.paths.data_dir``).

    The loaded catalog is kept between processes (:mod:`opdesign.catalog.store`), keyed by a hash
    of every card and table file, so an edited file is read again."""
    patterns, constraints = data_dir("patterns"), data_dir("constraints")
    root = patterns.parent
    files = [f for folder in CARD_DIRS.values() for f in (patterns / folder).glob("*.md")]
    files += [constraints / name for name in (*CONSTRAINT_FILES.values(), "devices.yaml")
              if (constraints / name).is_file()]
    if constraints.parent != root:  # the two data folders live apart: key on absolute names
        root = Path("/")
    return load_cached("catalog", root, files, lambda: load_catalog_from(patterns, constraints))


def rule_rows(catalog: Catalog | None = None) -> list[dict[str, str]]:
    """Rows for ``opdesign rules``: ``{id, level, text, source, kind}``, one per constraint.

    Other rule sources (e.g. the validator registry) can append rows of the same
    shape with their own ``kind``.
    """
    catalog = catalog or load_catalog()
    return [
        {"id": c.id, "level": c.level, "text": c.rule, "source": c.source, "kind": "constraint"}
        for c in catalog.constraints.values()
    ]


_CELL_TEXT = ("text", "code_inline")


def read_index(index_file: Path, rel: str | None = None) -> list[dict[str, str]]:
    """Parse the card table of an ``index.md`` (markdown-it-py tokens) into rows keyed by header.

    Raises CatalogError if the file has no table or the headers are not :data:`INDEX_COLUMNS`.
    """
    from markdown_it import MarkdownIt  # only the index check parses Markdown: loading cards does not

    tokens = MarkdownIt("commonmark").enable("table").parse(index_file.read_text(encoding="utf-8"))
    rows: list[list[str]] = []
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open"):
            parts = [c.content for c in tokens[i + 1].children or [] if c.type in _CELL_TEXT]
            rows[-1].append("".join(parts).strip())
    if not rows or tuple(h.lower() for h in rows[0]) != INDEX_COLUMNS:
        raise _fail(rel or str(index_file), f"expected a table with columns {INDEX_COLUMNS}")
    return [dict(zip(INDEX_COLUMNS, row, strict=False)) for row in rows[1:]]


def index_mismatches(patterns_dir: Path | str | None = None) -> list[str]:
    """Compare ``patterns/{skeletons,atoms}/index.md`` with the cards.

    Returns one message per disagreement (missing / extra / duplicate rows, and
    title, tags, flow or file differing from the card); an empty list means they agree.
    """
    patterns_dir = Path(patterns_dir) if patterns_dir is not None else data_dir("patterns")
    cards = _load_cards(patterns_dir)
    problems: list[str] = []
    for card_type, folder in CARD_DIRS.items():
        rel = f"patterns/{folder}/index.md"
        expected = {c.id: c for c in cards.values() if c.type == card_type}
        rows = read_index(patterns_dir / folder / "index.md", rel)
        seen = [row["id"] for row in rows]
        problems += [f"{rel}: {i} listed twice or more" for i in sorted(set(seen)) if seen.count(i) > 1]
        problems += [f"{rel}: {i} has no card file" for i in sorted(set(seen) - set(expected))]
        problems += [f"{rel}: card {i} is not listed" for i in sorted(set(expected) - set(seen))]
        for row in rows:
            card = expected.get(row["id"])
            if card is None:
                continue
            actual = {
                "title": card.title,
                "tags": ", ".join(card.tags),
                "flow": card.flow_pattern,
                "file": Path(card.path).name,
            }
            for column, value in actual.items():
                if row[column] != value:
                    problems.append(f"{rel}: {card.id} {column} is {row[column]!r}, card: {value!r}")
    return problems
