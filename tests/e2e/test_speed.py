"""Start-up and render-speed behaviour (issue 15): what each command imports, the shared Jinja
environment and its bytecode cache, the libyaml SPEC loader. Figures are in benchmarks/bench_startup.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES
from jinja2 import Environment, FileSystemLoader

from opdesign.io.yamlload import safe_load
from opdesign.render import design

REPO_GOLDEN = EXAMPLES.parents[1] / "tests" / "goldens" / "dense_forward_golden.py"
# the catalog proper (its package also holds plain tables)
HEAVY = ("numpy", "jinja2", "opdesign.tuning", "opdesign.catalog.loader")

_PROBE = """
import contextlib, io, json, sys
argv = json.loads(sys.argv[1])
sys.argv = ["opdesign", *argv]
from opdesign.cli.entry import main
code = None
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "loaded": [m for m in %r if m in sys.modules]}))
"""


def _loaded(argv: list[str], modules: tuple[str, ...] = HEAVY) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE % (modules,), json.dumps(argv)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("argv,allowed", [
    (["--help"], []),
    (["golden", str(REPO_GOLDEN)], []),
    (["golden", str(REPO_GOLDEN), "--json"], []),
    (["rules"], ["opdesign.catalog.loader"]),
    (["cards", "list"], ["opdesign.catalog.loader"]),
    (["cards", "show", "SK-01"], ["opdesign.catalog.loader"]),
])
def test_light_commands_load_neither_numpy_nor_jinja_nor_the_cost_model(argv, allowed) -> None:
    result = _loaded(argv)
    assert result["code"] == 0
    assert result["loaded"] == allowed


def test_estimate_does_not_load_the_cost_model() -> None:
    result = _loaded(["estimate", "--spec", str(EXAMPLES / "dense_fa_8192.yaml")])
    assert result["code"] == 0 and "opdesign.tuning" not in result["loaded"] and "numpy" not in result["loaded"]


def test_new_renders_the_kernel_without_loading_the_self_check_runner(tmp_path) -> None:
    # importlib.metadata is no longer in this list: pydantic's plugin scan loads it since the pydplugins
    # shortcut went (issue 29: it saved under 5 % of any command)
    runner = ("opdesign.pypto_run.selfcheck", "argparse", "subprocess")
    result = _loaded(["new", "--spec", str(EXAMPLES / "dense_fa_8192.yaml"), "--out", str(tmp_path / "d")], runner)
    assert result == {"code": 0, "loaded": []}
    assert (tmp_path / "d" / "dense_fa_8192_kernel.py").read_text(encoding="utf-8").count("# --- self-check") == 1


def test_one_jinja_environment_per_process() -> None:
    assert design._env() is design._env()
    assert isinstance(design._env().bytecode_cache, design._BytecodeCache)


def test_bytecode_cache_recompiles_an_edited_template(tmp_path) -> None:
    templates, cache = tmp_path / "t", tmp_path / "cache"
    templates.mkdir()
    (templates / "a.j2").write_text("one {{ x }}\n")

    def render() -> str:
        env = Environment(loader=FileSystemLoader(str(templates)), bytecode_cache=design._BytecodeCache(str(cache)))
        return env.get_template("a.j2").render(x=1)

    assert render() == "one 1"
    assert len(list(cache.iterdir())) == 1  # compiled once, stored
    assert render() == "one 1"  # from the cache
    (templates / "a.j2").write_text("two {{ x }}\n")
    assert render() == "two 1"  # the changed source is compiled again, never served stale


def test_bytecode_cache_in_a_refused_folder_only_means_compiling(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    templates = tmp_path / "t"
    templates.mkdir()
    (templates / "a.j2").write_text("{{ x }}!")
    env = Environment(loader=FileSystemLoader(str(templates)),
                      bytecode_cache=design._BytecodeCache(str(blocker / "cache")))
    assert env.get_template("a.j2").render(x=3) == "3!"


def _outcome(fn, text):
    try:
        return ("ok", fn(text))
    except RecursionError:
        return ("recursion",)
    except yaml.YAMLError as err:
        return ("yaml", str(err))


@pytest.mark.parametrize("text", [
    (EXAMPLES / "causal_gqa_tail.yaml").read_text(),
    (EXAMPLES / "sk16_backward_lm.yaml").read_text(),
    "a: 1\na: 2\n", "a: [1, 2\n", "a: b: c\n", "key: 'unterminated\n", "- 1\n- [2, {x: 1e3, y: .5, z: 0o17}]\n",
    "x: !!python/object:os.system ls\n", "[" * 40 + "]" * 40, "[" * 400 + "]" * 400, "[" * 5000 + "]" * 5000,
    "{a: " * 200 + "1" + "}" * 200, "\t- tab\n", "",
])
def test_spec_yaml_loader_matches_safe_load(text) -> None:
    assert _outcome(safe_load, text) == _outcome(yaml.safe_load, text)


def test_the_release_a_plan_names_is_the_manifest_release_read_from_its_release_line() -> None:
    from opdesign.catalog.pypto_api import api_release, load_api_surface
    from opdesign.workflows.new import plan_from_spec_file

    assert api_release() == load_api_surface().release == "0.2.0"
    assert plan_from_spec_file(EXAMPLES / "dense_fa_8192.yaml").pypto_release == "0.2.0"


_BUILT = """
import contextlib, io, json, sys
sys.argv = ["opdesign", "validate", sys.argv[1]]
from opdesign.cli.entry import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exit:
        code = exit.code
from opdesign.plan.models import Budget, Plan
from opdesign.spec import Spec
from opdesign.validate.model import Report
print(json.dumps({"code": code, "built": {m.__name__: m.__pydantic_complete__ for m in (Plan, Spec, Budget, Report)}}))
"""


def test_validate_builds_only_the_models_it_reads(tmp_path) -> None:
    """Plan and Spec are defined on import (the rules import the planner's modules) but never built by
    `validate`; the budgets it re-derives and its report are."""
    from opdesign.workflows.new import new_design

    new_design(EXAMPLES / "causal_gqa_tail.yaml", str(tmp_path / "d"))
    out = subprocess.run([sys.executable, "-c", _BUILT, str(tmp_path / "d")], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == {"code": 0,
                                      "built": {"Plan": False, "Spec": False, "Budget": True, "Report": True}}



_THREADS = """
import json, os, sys
from pathlib import Path
if sys.argv[1] == "opdesign":
    from opdesign._startup.npthreads import import_numpy
    import_numpy()
import numpy  # noqa: F401,E402 - loaded already after import_numpy() unless the user set the thread count
status = Path("/proc/self/status").read_text().splitlines()
threads = int(next(line.split()[1] for line in status if line.startswith("Threads:")))
print(json.dumps({"threads": threads, "env": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def _numpy_threads(how: str, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _THREADS, how], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="counts threads in /proc (Linux only)")
def test_the_ranking_commands_load_numpy_without_openblas_worker_threads() -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    plain = _numpy_threads("numpy", env)
    if plain["threads"] == 1:
        pytest.skip("numpy starts no OpenBLAS worker on this machine (one core): nothing to compare")
    ours = _numpy_threads("opdesign", env)
    assert ours == {"threads": 1, "env": None}  # no worker thread, and the variable is gone for child processes
    chosen = _numpy_threads("opdesign", {**env, "OPENBLAS_NUM_THREADS": "2"})
    assert chosen == {"threads": 2, "env": "2"}  # the user's own setting is kept


