"""The README's test command is the one CI runs."""

from conftest import REPO


def test_ci_runs_the_readme_test_commands():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    fast, marked = ci[-2], ci[-1]
    assert fast.startswith("python -m pip install") and "'.[test,mcp,pypto,cluster,plot]'" in fast
    assert fast.endswith("python -m pytest && ruff check src tests benchmarks scripts")
    assert f"python3 -m venv .venv && . .venv/bin/activate && {fast}\n" in readme
    assert marked == 'python -m pytest -m "slow or pypto"' and f"\n{marked}\n" in readme


def test_the_default_run_is_the_fast_set():
    import tomllib

    addopts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-m 'not slow and not pypto'" in addopts and "-rs" in addopts  # skip reasons are printed
    assert "-n auto" in addopts  # on every core (pytest-xdist, in the test extra)
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(dep.startswith("pytest-xdist") for dep in extra)


def test_installed_wheel_carries_its_data():
    import opdesign
    from opdesign.io.paths import DATA_NAMES, data_dir

    for name in DATA_NAMES:
        assert data_dir(name).is_dir()
    if "site-packages" in opdesign.__file__:  # CI installs the wheel, not the checkout
        assert data_dir("patterns").parent.name == "_data"
        assert (data_dir("templates") / "DESIGN.md.j2").is_file()


def test_the_for_agents_section_names_every_tool():
    """The README's "For agents" paragraph lists the tools that `opdesign tool list` serves, no more, no less."""
    from markdown_it import MarkdownIt

    from opdesign.agent.tools import TOOLS

    tokens = MarkdownIt().parse((REPO / "README.md").read_text(encoding="utf-8"))
    start = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content == "For agents")
    paragraph = next(t for t in tokens[start + 1:] if t.type == "inline")
    named = {child.content for child in paragraph.children
             if child.type == "code_inline" and child.content.isidentifier()}  # not skills/opdesign/SKILL.md
    assert named == set(TOOLS)
