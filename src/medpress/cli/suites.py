"""``medpress suites`` and the ``--suite`` option the pipeline commands share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from medpress.cli.common import clean_errors, console
from medpress.store import RunStore
from medpress.suites import (
    DEFAULT_SUITE,
    Suite,
    known_suites,
    load_manifest,
    resolve_suite,
    suite_summary,
)
from medpress.suites import stored_suite as _stored

SuiteOpt = Annotated[str, typer.Option(
    "--suite", help="Suite: a shipped suite's name (see `medpress suites`) or a directory")]
RunSuiteOpt = Annotated[str | None, typer.Option(
    "--suite", help="The run's suite, checked against the one it was made with (default: "
                    "the run's own)")]


def run_suite(store: RunStore, ref: str | None = None) -> Suite:
    """The suite ``store``'s run was made with (MedPRESS for runs without a ``suite`` key).

    Raises:
        ValueError: ``ref`` names another suite than the run's.
    """
    suite = _stored(store.get_meta("suite"))
    if ref is not None:
        asked = resolve_suite(ref)
        if asked.name != suite.name:
            raise ValueError(f"{store.run_dir} is a run of suite {suite.name!r}, not "
                             f"{asked.name!r}; leave --suite out or pass --suite {suite.name}")
    return suite


def judge_suite(suite: Suite) -> tuple[Path | None, str | None]:
    """The rubric file and suite name the judges of a run need (None, None for MedPRESS);
    the name is given only when the suite has no embedded judge, so asking for it fails."""
    if suite.is_default:
        return None, None
    return suite.rubric_path, (None if suite.manifest.embedded_judge else suite.name)


@clean_errors
def suites_cmd(
    dirs: Annotated[list[Path] | None, typer.Argument(help="Suite directories to list too")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """List the shipped suites and any suite directories given (manifests only are read)."""
    suites = [load_manifest(p, shipped=True) for p in known_suites().values()]
    suites += [load_manifest(d) for d in dirs or []]
    rows = [suite_summary(s) for s in suites]
    if as_json:
        print(json.dumps(rows))
        return
    table = Table(title="suites")
    for col in ("name", "version", "path", "records"):
        table.add_column(col, justify="right" if col == "records" else "left")
    for r in rows:
        table.add_row(r["name"], r["version"], r["path"], str(r["n_records"]))
    console.print(table)


__all__ = ["DEFAULT_SUITE", "RunSuiteOpt", "SuiteOpt", "judge_suite", "run_suite",
           "suites_cmd"]
