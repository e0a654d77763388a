"""The catalog kept between processes (opdesign.catalog.store): keyed by its sources, never stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from opdesign.catalog import load_catalog, load_catalog_from
from opdesign.catalog.pypto_api import _read_api_surface, load_api_surface
from opdesign.catalog.store import cache_file, load_cached, source_key
from opdesign.io.paths import data_dir

CARD = Path("patterns") / "skeletons" / "SK-01-online-flash-attention.md"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped cards and tables, and an empty cache folder."""
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "data"
    for name in ("patterns", "constraints"):
        shutil.copytree(data_dir(name), root / name)
    return root


def _load(root: Path, built: list[int]):
    files = [f for f in (root / "patterns").rglob("*.md")] + list((root / "constraints").glob("*.yaml"))

    def build():
        built.append(1)
        return load_catalog_from(root / "patterns", root / "constraints")

    return load_cached("catalog", root, files, build)


def test_second_load_comes_from_the_cache_and_equals_a_fresh_load(data: Path) -> None:
    built: list[int] = []
    first = _load(data, built)
    second = _load(data, built)
    assert built == [1]
    assert second == first == load_catalog_from(data / "patterns", data / "constraints")
    assert second.card("SK-01").title == first.card("SK-01").title


def test_an_edited_card_is_read_again(data: Path) -> None:
    built: list[int] = []
    before = _load(data, built).card("SK-01").title
    card = data / CARD
    card.write_text(card.read_text(encoding="utf-8").replace(f"title: {before}", "title: Edited title", 1),
                    encoding="utf-8")
    after = _load(data, built).card("SK-01").title
    assert built == [1, 1]
    assert (before, after) == (before, "Edited title") and before != "Edited title"


def test_a_damaged_cache_file_is_rebuilt(data: Path) -> None:
    built: list[int] = []
    _load(data, built)
    files = [f for f in (data / "patterns").rglob("*.md")] + list((data / "constraints").glob("*.yaml"))
    path = cache_file("catalog", source_key("catalog", data, files))
    assert path.is_file()
    path.write_bytes(b"not a pickle")
    assert _load(data, built).card("SK-01").id == "SK-01"
    assert built == [1, 1]


def test_an_unwritable_cache_folder_only_costs_the_rebuild(data: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(blocker / "cache"))  # under a file: mkdir fails
    built: list[int] = []
    assert _load(data, built).card("SK-01").id == "SK-01"
    assert _load(data, built).card("SK-01").id == "SK-01"
    assert built == [1, 1]


def test_shipped_loaders_match_an_uncached_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    load_catalog.cache_clear()
    load_api_surface.cache_clear()
    try:
        cold, api_cold = load_catalog(), load_api_surface()
        load_catalog.cache_clear()
        load_api_surface.cache_clear()
        warm, api_warm = load_catalog(), load_api_surface()
        assert sorted(p.name.split("-")[0] for p in (tmp_path / "cache" / "catalog").iterdir()) == [
            "catalog", "pypto_api"]
    finally:
        load_catalog.cache_clear()
        load_api_surface.cache_clear()
    assert warm is not cold
    assert warm == cold == load_catalog_from(data_dir("patterns"), data_dir("constraints"))
    assert api_warm == api_cold == _read_api_surface()


def test_an_unreadable_source_builds_without_the_cache(data: Path, tmp_path: Path) -> None:
    built: list[int] = []
    files = [data / CARD, data / "patterns" / "skeletons" / "no-such-card.md"]
    value = load_cached("catalog", data, files, lambda: built.append(1) or "built")
    assert (value, built) == ("built", [1])
    assert not (tmp_path / "cache" / "catalog").exists()
