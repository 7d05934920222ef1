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
    if value:
        from medpress import __version__

        print(f"medpress {__version__}")
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
