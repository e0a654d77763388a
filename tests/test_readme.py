"""The README's test command is the one CI runs."""

from conftest import REPO


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    command = ci[-1]
    assert command.startswith("python -m pip install") and command.endswith("python -m pytest")
    assert f"python3 -m venv .venv && . .venv/bin/activate && {command}" in readme


def test_installed_wheel_carries_its_data():
    import opdesign
    from opdesign.paths import DATA_NAMES, data_dir

    for name in DATA_NAMES:
        assert data_dir(name).is_dir()
    if "site-packages" in opdesign.__file__:  # CI installs the wheel, not the checkout
        assert data_dir("patterns").parent.name == "_data"
        assert (data_dir("templates") / "DESIGN.md.j2").is_file()
