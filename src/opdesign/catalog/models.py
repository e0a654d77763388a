"""Typed catalog entries: pattern cards, constraints and device profiles (pydantic, frozen).

Code reads thresholds via :meth:`Card.param` / :meth:`Constraint.param` instead
of hard-coding them; a missing one raises :class:`~opdesign.errors.CatalogError`
naming the owner. Loading the files is :mod:`opdesign.catalog.loader`'s job.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator

from opdesign.errors import CatalogError, NotFoundError

Level = Literal["must", "must_not", "should"]
Area = Literal["TILE", "LOOP", "SYM", "DATA", "API"]
Text = Annotated[str, Field(min_length=1)]

#: Constraint area -> table file under ``constraints/``.
CONSTRAINT_FILES: dict[str, str] = {
    "TILE": "tiling.yaml", "LOOP": "loop.yaml", "SYM": "symbolic.yaml",
    "DATA": "dataflow.yaml", "API": "api.yaml",
}  # fmt: skip
#: Card type -> folder under ``patterns/``.
CARD_DIRS: dict[str, str] = {"skeleton": "skeletons", "atom": "atoms"}
#: Column headers of ``patterns/*/index.md``.
INDEX_COLUMNS = ("id", "title", "tags", "flow", "file")
#: Scalar figures of a device profile; each needs an entry in ``sources``.
DEVICE_FIGURES = (
    "sku", "soc_version", "npu_arch", "aic_cores", "aiv_per_aic", "ub_bytes", "l1_bytes",
    "l0a_bytes", "l0b_bytes", "l0c_bytes", "cube_macs_per_cycle", "fp8_matmul", "ub_to_l1",
)  # fmt: skip
#: Figures a SKU of ``devices.yaml`` ``skus`` may override (the rest come from its family's default SKU).
SKU_FIGURES = ("aic_cores", "aiv_per_aic", "ub_bytes", "l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes",
               "cube_macs_per_cycle")
#: Alignment entries every device profile must give (bytes).
ALIGN_KEYS = ("ub", "l1", "l0a", "l0b", "l0c", "gm_burst")


class _Model(BaseModel):
    # defer_build: schemas are built on first use, so `opdesign validate` builds only the models it reads
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


def _param(owner: Card | Constraint, name: str) -> Any:
    if name not in owner.parameters:
        known = ", ".join(sorted(owner.parameters)) or "none"
        raise CatalogError(f"{owner.id} ({owner.path}) has no parameter {name!r}; known: {known}")
    return owner.parameters[name]


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
    """A skeleton (SK) or atom (AT) card; ``path`` is relative (``patterns/atoms/AT-08-...md``)."""

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
        return _param(self, name)

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
        return _param(self, name)


class _ConstraintTable(_Model):
    area: Area
    title: Text
    constraints: list[_ConstraintEntry] = Field(min_length=1)

    @field_validator("constraints")
    @classmethod
    def _ids_in_area(cls, entries: list[_ConstraintEntry], info: ValidationInfo) -> list[Any]:
        area = info.data.get("area")
        wrong = [e.id for e in entries if area and not e.id.startswith(f"C-{area}-")]
        if wrong:
            raise ValueError(f"ids outside area {area}: {wrong}")
        _require_unique([e.id for e in entries], "constraint id")
        return entries


class _SkuEntry(_Model):
    """Another SKU of a device family: only the figures that differ from the family's default SKU."""

    description: str = ""
    soc_version: Text
    platform: Text
    aic_cores: PositiveInt | None = None
    aiv_per_aic: PositiveInt | None = None
    ub_bytes: PositiveInt | None = None
    l1_bytes: PositiveInt | None = None
    l0a_bytes: PositiveInt | None = None
    l0b_bytes: PositiveInt | None = None
    l0c_bytes: PositiveInt | None = None
    cube_macs_per_cycle: PositiveInt | None = None
    sources: dict[str, Text]

    @field_validator("sources")
    @classmethod
    def _all_sourced(cls, sources: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        figures = {"sku", "soc_version"} | {k for k in SKU_FIGURES if info.data.get(k) is not None}
        missing, unknown = sorted(figures - set(sources)), sorted(set(sources) - figures)
        if missing or unknown:
            raise ValueError(f"each figure of the SKU needs a source: missing {missing}, not a figure {unknown}")
        return sources

    def overrides(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in SKU_FIGURES if getattr(self, k) is not None}


class _SimPlatform(_Model):
    """The one platform the pinned PyPTO release compiles and simulates on (its SIM topology)."""

    release: Text
    soc_version: Text
    npu_arch: Text
    aic_cores: PositiveInt
    aiv_cores: PositiveInt
    ub_bytes: PositiveInt
    l1_bytes: PositiveInt
    l0c_bytes: PositiveInt
    sources: dict[str, Text]

    @field_validator("sources")
    @classmethod
    def _all_sourced(cls, sources: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        figures = {"soc_version", "npu_arch", "aic_cores", "aiv_cores", "ub_bytes", "l1_bytes", "l0c_bytes"}
        missing, unknown = sorted(figures - set(sources)), sorted(set(sources) - figures)
        if missing or unknown:
            raise ValueError(f"each figure needs a source: missing {missing}, not a figure {unknown}")
        return sources


class SimPlatform(_SimPlatform):
    """``devices.yaml`` ``sim_platform``: what every compile, SIM and verify of the release runs on."""


class _DeviceEntry(_Model):
    description: str = ""
    sku: Text = Field(description="the SKU this profile describes (the family's default)")
    soc_version: Text = Field(description="SoC_version of the platform file the figures come from")
    npu_arch: Text = Field(description="NpuArch of that file, as PyPTO names it (DAV_2201, DAV_3510)")
    platform: Text = Field(description="the platform file that describes the SKU")
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
    fp8_matmul: bool = Field(description="FP8 E4M3 matmul and cast are supported (AT-08 / AT-06 designs)")
    ub_to_l1: bool = Field(description="the AIV hands a tile (P) straight from its UB to the AIC's L1; "
                                       "false: AIV and AIC exchange tiles through a GM workspace")
    sources: dict[str, Text]
    skus: dict[str, _SkuEntry] = Field(default_factory=dict, description="other SKUs of the family")

    @field_validator("align_bytes")
    @classmethod
    def _align_keys(cls, value: dict[str, int]) -> dict[str, int]:
        missing = [k for k in ALIGN_KEYS if k not in value]
        if missing:
            raise ValueError(f"missing alignment entries {missing}")
        return value

    @field_validator("sources")
    @classmethod
    def _all_sourced(cls, sources: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        figures = set(DEVICE_FIGURES)
        for mapping in ("align_bytes", "bandwidth"):
            figures |= {f"{mapping}.{key}" for key in info.data.get(mapping, {})}
        missing = sorted(figures - set(sources))
        unknown = sorted(set(sources) - figures)
        if missing or unknown:
            raise ValueError(f"each figure needs a source: missing {missing}, not a figure {unknown}")
        return sources


class DeviceProfile(_DeviceEntry):
    """Hardware profile (domain.md section 1).

    Sizes in bytes (``ub_bytes`` per vector sub-block), ``align_bytes`` start-address
    alignment in bytes, ``cube_macs_per_cycle`` per cube core. ``bandwidth`` is optional
    (name -> figure; put the unit in the name, e.g. ``gm_bytes_per_cycle``). ``sources``
    names the source of every figure, dotted keys for mapping entries
    (``align_bytes.ub``); a figure without a source is rejected.
    """

    name: Text
    family: Text = Field(description="the profile family of devices.yaml (a2, a3, a5)")
    overridden: tuple[str, ...] = Field((), description="figures the SKU gives itself (devices.yaml skus)")

    @property
    def aiv_cores(self) -> int:
        """Vector sub-blocks on the device: ``aic_cores * aiv_per_aic``."""
        return self.aic_cores * self.aiv_per_aic

    def ref(self, figure: str) -> str:
        """Where ``figure`` is written in devices.yaml: ``a5.aic_cores`` or ``a5.skus.950PR_957x.aic_cores``."""
        if figure in self.overridden:
            return f"{self.family}.skus.{self.sku}.{figure}"
        return f"{self.family}.{figure}"


class _DeviceFile(_Model):
    sim_platform: _SimPlatform
    devices: dict[str, _DeviceEntry] = Field(min_length=1)


_T = TypeVar("_T")


def _require_unique(values: list[str], what: str) -> None:
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"duplicate {what}: {dupes}")


def _lookup(items: dict[str, _T], key: str, what: str) -> _T:
    if key not in items:
        known = list(items)
        raise NotFoundError(f"unknown {what} {key!r}; known: {', '.join(known)}", {"known": known})
    return items[key]
