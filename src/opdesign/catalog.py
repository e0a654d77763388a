"""The catalog: pattern cards, constraint tables and device profiles as typed objects.

Data lives outside the code (see :mod:`opdesign.paths`):

- ``patterns/skeletons/SK-xx-*.md`` and ``patterns/atoms/AT-xx-*.md``: one card
  per file, YAML front matter (structured fields) plus a Markdown body for people;
  ``index.md`` in each folder lists the cards (checked by :func:`index_mismatches`).
- ``constraints/{tiling,loop,symbolic,dataflow,api}.yaml``: constraint tables
  (C-TILE, C-LOOP, C-SYM, C-DATA, C-API).
- ``constraints/devices.yaml``: hardware profiles (a2, a3, a5), each figure with
  its source.

Code reads thresholds through :meth:`Card.param` / :meth:`Constraint.param`
instead of hard-coding them. Any malformed file raises
:class:`~opdesign.errors.CatalogError` naming the file (relative path) and the
field path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from markdown_it import MarkdownIt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from opdesign.errors import CatalogError, NotFoundError
from opdesign.paths import data_dir

Level = Literal["must", "must_not", "should"]
Area = Literal["TILE", "LOOP", "SYM", "DATA", "API"]
Text = Annotated[str, Field(min_length=1)]

#: Constraint area -> table file under ``constraints/``.
CONSTRAINT_FILES: dict[str, str] = {
    "TILE": "tiling.yaml",
    "LOOP": "loop.yaml",
    "SYM": "symbolic.yaml",
    "DATA": "dataflow.yaml",
    "API": "api.yaml",
}
#: Card type -> folder under ``patterns/``.
CARD_DIRS: dict[str, str] = {"skeleton": "skeletons", "atom": "atoms"}
#: Column headers of ``patterns/*/index.md``.
INDEX_COLUMNS = ("id", "title", "tags", "flow", "file")
#: Scalar figures of a device profile; each needs an entry in ``sources``.
DEVICE_FIGURES = (
    "aic_cores",
    "aiv_per_aic",
    "ub_bytes",
    "l1_bytes",
    "l0a_bytes",
    "l0b_bytes",
    "l0c_bytes",
    "cube_macs_per_cycle",
)
#: Alignment entries every device profile must give (bytes).
ALIGN_KEYS = ("ub", "l1", "l0a", "l0b", "l0c", "gm_burst")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _missing_param(owner: str, path: str, name: str, known: dict[str, Any]) -> CatalogError:
    names = ", ".join(sorted(known)) or "none"
    return CatalogError(f"{owner} ({path}) has no parameter {name!r}; known: {names}")


class CardRule(_Model):
    """One rule of a card: ``id`` like ``SK-01-R1``, ``level`` must / must_not / should."""

    id: Text
    level: Level
    text: Text
    consequence: Text
    when: str | None = None


class ConfigRec(_Model):
    """One configuration recommendation (``pass_options.*``, ``runtime_options.*``, ...)."""

    key: Text
    status: Literal["required", "recommended", "per_scenario"]
    value: Any
    purpose: Text
    when: str | None = None


class Card(_Model):
    """A skeleton (SK) or atom (AT) pattern card; ``path`` is relative, e.g. ``patterns/atoms/AT-08-...md``."""

    id: str = Field(pattern=r"^(SK|AT)-\d{2}$")
    type: Literal["skeleton", "atom"]
    title: Text
    tags: list[Text] = Field(min_length=1)
    flow_pattern: Text
    examples: list[Text]
    applicability: list[Text] = Field(min_length=1)
    rules: list[CardRule]
    config: list[ConfigRec]
    unroll_candidates: dict[str, list[PositiveInt]]
    parameters: dict[str, Any]
    source: Text
    body: str
    path: str

    @field_validator("type")
    @classmethod
    def _type_matches_id(cls, value: str, info: ValidationInfo) -> str:
        card_id = info.data.get("id", "")
        if card_id and card_id[:2] != ("SK" if value == "skeleton" else "AT"):
            raise ValueError(f"{value!r} does not fit id {card_id!r} (SK = skeleton, AT = atom)")
        return value

    @field_validator("rules")
    @classmethod
    def _rule_ids(cls, rules: list[CardRule], info: ValidationInfo) -> list[CardRule]:
        prefix = f"{info.data.get('id', '')}-R"
        ids = [rule.id for rule in rules]
        bad = [i for i in ids if not (i.startswith(prefix) and i[len(prefix) :].isdigit())]
        if bad:
            raise ValueError(f"rule ids must look like {prefix}<n>: {bad}")
        _require_unique(ids, "rule id")
        return rules

    @field_validator("config")
    @classmethod
    def _config_keys(cls, config: list[ConfigRec]) -> list[ConfigRec]:
        _require_unique([rec.key for rec in config], "config key")
        return config

    @field_validator("unroll_candidates")
    @classmethod
    def _unroll_lists(cls, value: dict[str, list[int]]) -> dict[str, list[int]]:
        empty = [name for name, factors in value.items() if not factors]
        if empty:
            raise ValueError(f"empty candidate list for {empty}")
        return value

    def param(self, name: str) -> Any:
        """Return parameter ``name`` of this card; raises CatalogError naming card and parameter."""
        if name not in self.parameters:
            raise _missing_param(self.id, self.path, name, self.parameters)
        return self.parameters[name]

    def rule(self, rule_id: str) -> CardRule:
        """Return the card rule ``rule_id`` (e.g. ``SK-01-R3``); raises NotFoundError."""
        found = {rule.id: rule for rule in self.rules}
        return _lookup(found, rule_id.upper(), f"rule of {self.id}")


class _ConstraintEntry(_Model):
    id: str = Field(pattern=r"^C-(TILE|LOOP|SYM|DATA|API)-\d{2}$")
    level: Level
    rule: Text
    when: str | None = None
    source: Text
    consequence: Text
    parameters: dict[str, Any] = Field(default_factory=dict)


class Constraint(_ConstraintEntry):
    """One constraint (``C-AREA-NN``); ``path`` is relative, e.g. ``constraints/tiling.yaml``."""

    area: Area
    path: str

    def param(self, name: str) -> Any:
        """Return parameter ``name``; raises CatalogError naming constraint and parameter."""
        if name not in self.parameters:
            raise _missing_param(self.id, self.path, name, self.parameters)
        return self.parameters[name]


class _ConstraintTable(_Model):
    area: Area
    title: Text
    constraints: list[_ConstraintEntry] = Field(min_length=1)

    @field_validator("constraints")
    @classmethod
    def _ids_in_area(cls, entries: list[_ConstraintEntry], info: ValidationInfo) -> list[_ConstraintEntry]:
        area = info.data.get("area")
        wrong = [e.id for e in entries if area and not e.id.startswith(f"C-{area}-")]
        if wrong:
            raise ValueError(f"ids outside area {area}: {wrong}")
        _require_unique([e.id for e in entries], "constraint id")
        return entries


class _DeviceEntry(_Model):
    description: str = ""
    aic_cores: PositiveInt
    aiv_per_aic: PositiveInt
    ub_bytes: PositiveInt
    l1_bytes: PositiveInt
    l0a_bytes: PositiveInt
    l0b_bytes: PositiveInt
    l0c_bytes: PositiveInt
    align_bytes: dict[str, PositiveInt]
    cube_macs_per_cycle: PositiveInt
    bandwidth: dict[str, PositiveFloat] = Field(default_factory=dict)
    sources: dict[str, Text]

    @field_validator("align_bytes")
    @classmethod
    def _align_keys(cls, value: dict[str, int]) -> dict[str, int]:
        missing = [k for k in ALIGN_KEYS if k not in value]
        if missing:
            raise ValueError(f"missing alignment entries {missing}")
        return value

    @field_validator("sources")
    @classmethod
    def _every_figure_sourced(cls, sources: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        figures = set(DEVICE_FIGURES)
        for mapping in ("align_bytes", "bandwidth"):
            figures |= {f"{mapping}.{key}" for key in info.data.get(mapping, {})}
        missing = sorted(figures - set(sources))
        unknown = sorted(set(sources) - figures)
        if missing or unknown:
            raise ValueError(f"every figure needs a source: missing {missing}, not a figure {unknown}")
        return sources


class DeviceProfile(_DeviceEntry):
    """Hardware profile. Sizes in bytes (UB per vector sub-block), alignment in bytes,
    ``cube_macs_per_cycle`` per cube core, optional ``bandwidth`` (name -> bytes/cycle);
    ``sources`` gives the source of each figure (dotted keys for mapping entries)."""

    name: Text

    @property
    def aiv_cores(self) -> int:
        """Vector sub-blocks on the device: ``aic_cores * aiv_per_aic``."""
        return self.aic_cores * self.aiv_per_aic


class _DeviceFile(_Model):
    devices: dict[str, _DeviceEntry] = Field(min_length=1)


_T = TypeVar("_T")


def _require_unique(values: list[str], what: str) -> None:
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"duplicate {what}: {dupes}")


def _lookup(items: dict[str, _T], key: str, what: str) -> _T:
    if key not in items:
        raise NotFoundError(f"unknown {what} {key!r}; known: {', '.join(items)}", {"known": list(items)})
    return items[key]


def _invalid(rel: str, err: ValidationError) -> CatalogError:
    lines = []
    for item in err.errors():
        loc = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"{rel}: {loc}: {item['msg']}")
    return CatalogError("; ".join(lines), {"file": rel, "errors": lines})


def _yaml(text: str, rel: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise CatalogError(f"{rel}: not valid YAML: {err}", {"file": rel}) from err


def _split_front_matter(text: str, rel: str) -> tuple[dict[str, Any], str]:
    """Split ``---``-delimited YAML front matter from the Markdown body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise CatalogError(f"{rel}: (front matter): the file must start with a '---' line", {"file": rel})
    for end, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            meta = _yaml("".join(lines[1:end]), rel)
            if not isinstance(meta, dict):
                raise CatalogError(f"{rel}: (front matter): expected a YAML mapping", {"file": rel})
            return meta, "".join(lines[end + 1 :]).lstrip("\n")
    raise CatalogError(f"{rel}: (front matter): no closing '---' line", {"file": rel})


def _read_card(file: Path, rel: str, folder_type: str) -> Card:
    meta, body = _split_front_matter(file.read_text(encoding="utf-8"), rel)
    for reserved in ("body", "path"):
        if reserved in meta:
            raise CatalogError(f"{rel}: {reserved}: set by the loader, not in front matter", {"file": rel})
    try:
        card = Card.model_validate({**meta, "body": body, "path": rel})
    except ValidationError as err:
        raise _invalid(rel, err) from err
    if card.type != folder_type:
        raise CatalogError(f"{rel}: type: {card.type!r} card in the {CARD_DIRS[folder_type]} folder", {"file": rel})
    if not file.name.startswith(f"{card.id}-"):
        raise CatalogError(f"{rel}: id: {card.id!r} does not match the file name", {"file": rel})
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
                raise CatalogError(f"{rel}: id: {card.id!r} already defined in {cards[card.id].path}", {"file": rel})
            cards[card.id] = card
    return dict(sorted(cards.items()))


def _load_constraints(constraints_dir: Path) -> dict[str, Constraint]:
    found: dict[str, Constraint] = {}
    for area, name in CONSTRAINT_FILES.items():
        rel = f"constraints/{name}"
        file = constraints_dir / name
        if not file.is_file():
            raise CatalogError(f"{rel}: file missing", {"file": rel})
        try:
            table = _ConstraintTable.model_validate(_yaml(file.read_text(encoding="utf-8"), rel))
        except ValidationError as err:
            raise _invalid(rel, err) from err
        if table.area != area:
            raise CatalogError(f"{rel}: area: expected {area!r}, found {table.area!r}", {"file": rel})
        for entry in table.constraints:
            found[entry.id] = Constraint(**entry.model_dump(), area=area, path=rel)
    return dict(sorted(found.items()))


def _load_devices(constraints_dir: Path) -> dict[str, DeviceProfile]:
    rel = "constraints/devices.yaml"
    file = constraints_dir / "devices.yaml"
    if not file.is_file():
        raise CatalogError(f"{rel}: file missing", {"file": rel})
    try:
        table = _DeviceFile.model_validate(_yaml(file.read_text(encoding="utf-8"), rel))
    except ValidationError as err:
        raise _invalid(rel, err) from err
    return {name: DeviceProfile(**entry.model_dump(), name=name) for name, entry in sorted(table.devices.items())}


@dataclass(frozen=True)
class Catalog:
    """All cards, constraints and device profiles, each dict sorted by id / name."""

    cards: dict[str, Card]
    constraints: dict[str, Constraint]
    devices: dict[str, DeviceProfile]

    def card(self, card_id: str) -> Card:
        """Return card ``card_id`` (e.g. ``SK-01``, case-insensitive); raises NotFoundError listing known ids."""
        return _lookup(self.cards, card_id.strip().upper(), "card")

    def constraint(self, constraint_id: str) -> Constraint:
        """Return constraint ``constraint_id`` (e.g. ``C-TILE-02``); raises NotFoundError listing known ids."""
        return _lookup(self.constraints, constraint_id.strip().upper(), "constraint")

    def device(self, name: str) -> DeviceProfile:
        """Return device profile ``name`` (``a2``, ``a3``, ``a5``); raises NotFoundError listing known names."""
        return _lookup(self.devices, name.strip().lower(), "device")


def load_catalog_from(patterns_dir: Path | str, constraints_dir: Path | str) -> Catalog:
    """Load (uncached) the catalog from explicit folders; raises CatalogError on malformed data."""
    constraints_dir = Path(constraints_dir)
    return Catalog(
        cards=_load_cards(Path(patterns_dir)),
        constraints=_load_constraints(constraints_dir),
        devices=_load_devices(constraints_dir),
    )


@cache
def load_catalog() -> Catalog:
    """Load the shipped catalog once per process (``data_dir('patterns')``, ``data_dir('constraints')``)."""
    return load_catalog_from(data_dir("patterns"), data_dir("constraints"))


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


def read_index(index_file: Path, rel: str | None = None) -> list[dict[str, str]]:
    """Parse the card table of an ``index.md`` (markdown-it-py tokens) into rows keyed by column header.

    Raises CatalogError if the file has no table or the headers are not :data:`INDEX_COLUMNS`.
    """
    tokens = MarkdownIt("commonmark").enable("table").parse(index_file.read_text(encoding="utf-8"))
    rows: list[list[str]] = []
    for i, token in enumerate(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open"):
            inline = tokens[i + 1]
            rows[-1].append("".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline")).strip())
    if not rows or tuple(h.lower() for h in rows[0]) != INDEX_COLUMNS:
        raise CatalogError(f"{rel or index_file}: expected a table with columns {INDEX_COLUMNS}", {"file": rel})
    return [dict(zip(INDEX_COLUMNS, row)) for row in rows[1:]]


def index_mismatches(patterns_dir: Path | str | None = None) -> list[str]:
    """Compare ``patterns/{skeletons,atoms}/index.md`` with the cards; return one message per disagreement."""
    patterns_dir = Path(patterns_dir) if patterns_dir is not None else data_dir("patterns")
    cards = _load_cards(patterns_dir)
    problems: list[str] = []
    for card_type, folder in CARD_DIRS.items():
        rel = f"patterns/{folder}/index.md"
        expected = {c.id: c for c in cards.values() if c.type == card_type}
        rows = read_index(patterns_dir / folder / "index.md", rel)
        seen = [row["id"] for row in rows]
        problems += [f"{rel}: {i} listed more than once" for i in sorted(set(seen)) if seen.count(i) > 1]
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
                    problems.append(f"{rel}: {card.id} {column} is {row[column]!r}, card says {value!r}")
    return problems
