"""`medpress --help` imports typer and nothing heavy (issue 23 item 7); timing is in bench/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from medpress.cli import COMMANDS, app
from medpress.cli.lazy import load_command

# Packages a command needs and `medpress --help` must not import (each costs 30-300 ms).
HEAVY = ("numpy", "pydantic", "aiohttp", "yaml", "matplotlib", "jinja2", "rich", "sklearn",
         "torch", "llama_cpp", "pyarrow", "datasets", "inspect_ai", "importlib.metadata")


def imported_by(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(*sys.modules)"],
                         capture_output=True, text=True, check=True).stdout.split()
    return set(out)


def test_importing_the_cli_pulls_in_no_command() -> None:
    mods = imported_by("import medpress.cli")
    assert {m for m in mods if m.startswith("medpress")} == {
        "medpress", "medpress.cli", "medpress.cli.lazy"}
    assert {m for m in mods for h in HEAVY if m == h or m.startswith(h + ".")} == set()


def test_help_lists_every_command_and_imports_none() -> None:
    code = ("import contextlib, io\nfrom medpress.cli import app\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    app(['--help'])")
    mods = imported_by(code)
    assert not {m for m in mods if m.startswith("medpress.cli.") and m != "medpress.cli.lazy"}
    heavy = {h for h in HEAVY if h != "rich"}  # typer formats its help with rich
    assert {m for m in mods for h in heavy if m == h or m.startswith(h + ".")} == set()
    res = subprocess.run([sys.executable, "-m", "medpress.cli", "--help"], capture_output=True,
                         text=True, check=True, env={"COLUMNS": "200", "PATH": ""})
    listed = [line.split()[1] for line in res.stdout.splitlines()
              if line.startswith("│ ") and len(line.split()) > 2]
    assert [n for n in listed if n in COMMANDS] == list(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_listed_help_is_the_commands_own(name: str) -> None:
    """The table's line is what the command's docstring says (it drifts otherwise)."""
    cmd = load_command(name, COMMANDS[name])
    assert COMMANDS[name].help == cmd.get_short_help_str(limit=10**6)


def test_a_lazy_command_runs_and_typos_are_suggested() -> None:
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["suites"])
    assert res.exit_code == 0 and "medpress" in res.output
    res = CliRunner().invoke(app, ["sweeep"])
    assert res.exit_code == 2 and "Did you mean 'sweep'" in res.output
