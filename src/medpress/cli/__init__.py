"""The ``medpress`` command line."""

from typing import Annotated

import typer

from medpress.cli import data
from medpress.cli.evaluate import (
    disagreements_cmd,
    judge_app,
    judge_check_cmd,
    labels_app,
)
from medpress.cli.generate import export_cmd, generate_cmd
from medpress.cli.pipeline import run_cmd
from medpress.cli.results import metrics_cmd, report_cmd
from medpress.cli.status import status_cmd
from medpress.cli.suites import suites_cmd

app = typer.Typer(
    name="medpress",
    help="MedPRESS: does a model keep safe medical advice when a patient pushes back?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    """The package, the shipped dataset (version and content hash), the rubric, the
    conditions and every shipped suite, one per line."""
    if value:
        from medpress import __version__
        from medpress.conditions import load_conditions
        from medpress.dataset import load_shipped
        from medpress.judges.rubric import load_rubric
        from medpress.suites import known_suites, load_manifest

        ds = load_shipped()
        print(f"medpress {__version__}")
        print(f"dataset {ds.name} {ds.version} (hash {ds.content_hash})")
        print(f"rubric {load_rubric().version}; conditions {load_conditions().version}")
        print("suites " + ", ".join(f"{m.name} {m.version}" for m in (
            load_manifest(p, shipped=True).manifest for p in known_suites().values())))
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option(
        "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit")
    ] = False,
) -> None:
    """MedPRESS: does a model keep safe medical advice when a patient pushes back?"""

app.add_typer(data.app, name="data")
app.add_typer(labels_app, name="labels")
app.command("run")(run_cmd)
app.command("generate")(generate_cmd)
app.add_typer(judge_app, name="judge")
app.command("judge-check")(judge_check_cmd)
app.command("disagreements")(disagreements_cmd)
app.command("metrics")(metrics_cmd)
app.command("report")(report_cmd)
app.command("export")(export_cmd)
app.command("status")(status_cmd)
app.command("suites")(suites_cmd)

__all__ = ["app"]
