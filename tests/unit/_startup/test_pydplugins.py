"""opdesign._startup.pydplugins: pydantic's plugin discovery answered from the metadata files, and the stand-in
loader used only when pydantic itself would find no plugin (issue 15)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import EXAMPLES
from opdesign._startup import pydplugins

_PLUGIN = '''
import os
calls = []
class _Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        calls.append(schema_type.__name__)
        if os.environ.get("FAKEPLUG_LOG"):
            with open(os.environ["FAKEPLUG_LOG"], "a", encoding="utf-8") as fh:
                fh.write(getattr(schema_type, "__name__", "?") + "\\n")
        return None, None, None
plugin = _Plugin()
'''

_PROBE = '''
import json, sys
from opdesign import pydplugins
pydplugins.install()
from pydantic import BaseModel
class Tile(BaseModel):
    q_tile: int
tile = Tile(q_tile=128)
loader = sys.modules[pydplugins.LOADER]
plugin = sys.modules.get("fakeplug")
print(json.dumps({"q_tile": tile.q_tile, "stand_in": loader.__doc__.startswith("opdesign's stand-in") if loader.__doc__ else False,
                  "metadata_loaded": "importlib.metadata" in sys.modules,
                  "finder_left": any(f.__module__ == "opdesign._startup.pydplugins" for f in sys.meta_path if hasattr(f, "__module__")),
                  "plugin_calls": plugin.calls if plugin else None}))
'''


def _dist(folder: Path, name: str, entry_points: str | None) -> None:
    info = folder / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")


def _probe(extra_path: Path | None, env_extra: dict[str, str] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    src = str(Path(pydplugins.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([*([str(extra_path)] if extra_path else []), src])
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


def test_the_scan_agrees_with_importlib_metadata_here() -> None:
    declared = bool(list(importlib.metadata.entry_points(group="pydantic")))
    assert pydplugins.declares_plugins() is declared


def test_the_scan_reads_each_kind_of_metadata_folder(tmp_path) -> None:
    _dist(tmp_path / "none", "plain", None)
    _dist(tmp_path / "other", "tool", "[console_scripts]\ntool = tool:main\n")
    _dist(tmp_path / "plug", "fakeplug", "[console_scripts]\nx = y:z\n\n[pydantic]\nfake = fakeplug:plugin\n")
    _dist(tmp_path / "brackets", "odd", "# comment\r\n[[pydantic]]\r\n\todd = odd:plugin\r\n")  # read as [pydantic]
    _dist(tmp_path / "empty", "hollow", "[pydantic]\n# no entry\n\n[console_scripts]\nh = h:main\n")
    _dist(tmp_path / "upper", "shout", "[PYDANTIC]\nx = shout:plugin\n")  # another group: names are exact
    egg_info = tmp_path / "eggi" / "old.egg-info"
    egg_info.mkdir(parents=True)
    (egg_info / "entry_points.txt").write_text("[pydantic]\nold = old:plugin\n", encoding="utf-8")
    (tmp_path / "eggf").mkdir()
    (tmp_path / "eggf" / "legacy-1.0.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\n", encoding="utf-8")
    egg_on_path = tmp_path / "direct-1.0.egg" / "EGG-INFO"
    egg_on_path.mkdir(parents=True)
    (egg_on_path / "entry_points.txt").write_text("[pydantic]\nd = direct:plugin\n", encoding="utf-8")
    (tmp_path / "egg").mkdir()
    (tmp_path / "egg" / "thing-1.0-py3.11.egg").mkdir()
    with zipfile.ZipFile(tmp_path / "lib.zip", "w") as zf:
        zf.writestr("m.py", "")
    assert pydplugins.declares_plugins([str(tmp_path / "none"), str(tmp_path / "other")]) is False
    assert pydplugins.declares_plugins([str(tmp_path / "other"), str(tmp_path / "plug")]) is True
    assert pydplugins.declares_plugins([str(tmp_path / "eggi")]) is True
    assert pydplugins.declares_plugins([str(tmp_path / "eggf")]) is False  # an .egg-info file holds no entry points
    assert pydplugins.declares_plugins([str(tmp_path / "egg")]) is None  # an .egg: left to importlib.metadata
    assert pydplugins.declares_plugins([str(tmp_path / "lib.zip")]) is None  # a zip: likewise
    assert pydplugins.declares_plugins([str(tmp_path / "direct-1.0.egg")]) is None  # an egg as the path entry
    assert pydplugins.declares_plugins([str(tmp_path / "missing")]) is False  # a path entry that does not exist
    for folder in ("none", "other", "plug", "eggi", "eggf", "brackets", "empty", "upper"):
        paths = [str(tmp_path / folder)]
        found = [ep for dist in importlib.metadata.distributions(path=paths) for ep in dist.entry_points
                 if ep.group == "pydantic"]
        assert bool(found) is pydplugins.declares_plugins(paths)  # the same answer as importlib.metadata


def test_no_plugin_installed_builds_models_without_importlib_metadata() -> None:
    result = _probe(None)
    assert result == {"q_tile": 128, "stand_in": True, "metadata_loaded": False, "finder_left": False,
                      "plugin_calls": None}


def test_an_installed_plugin_is_loaded_and_called_by_pydantic(tmp_path) -> None:
    _dist(tmp_path, "fakeplug", "[pydantic]\nfake = fakeplug:plugin\n")
    (tmp_path / "fakeplug.py").write_text(_PLUGIN, encoding="utf-8")
    result = _probe(tmp_path)
    assert result["stand_in"] is False and result["finder_left"] is False
    assert result["plugin_calls"] == ["Tile"]  # pydantic's own loader found the plugin and used it


def test_pydantic_s_own_switch_is_left_to_pydantic(tmp_path) -> None:
    _dist(tmp_path, "fakeplug", "[pydantic]\nfake = fakeplug:plugin\n")
    (tmp_path / "fakeplug.py").write_text(_PLUGIN, encoding="utf-8")
    result = _probe(tmp_path, {"PYDANTIC_DISABLE_PLUGINS": "__all__"})
    assert result["stand_in"] is False and result["plugin_calls"] is None  # pydantic's loader, and it loads none


def test_a_plugin_is_called_in_a_typer_command_too(tmp_path) -> None:
    """Typer sets PYDANTIC_DISABLE_PLUGINS=1 for a moment while it builds its own validators; the plugin
    must still be used for opdesign's models afterwards, as it is without the finder."""
    _dist(tmp_path, "fakeplug", "[pydantic]\nfake = fakeplug:plugin\n")
    (tmp_path / "fakeplug.py").write_text(_PLUGIN, encoding="utf-8")
    log = tmp_path / "calls.txt"
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    src = str(Path(pydplugins.__file__).resolve().parents[1])
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), src]), FAKEPLUG_LOG=str(log))
    spec = EXAMPLES / "dense_fa_8192.yaml"
    run = subprocess.run([sys.executable, "-m", "opdesign", "estimate", "--spec", str(spec)], capture_output=True,
                         text=True, check=False, env=env)
    assert run.returncode == 0, run.stderr
    assert "Spec" in log.read_text(encoding="utf-8").split()  # the SPEC model was built with the plugin
