"""The ``medpress`` command line."""

import typer

from medpress.cli import data
from medpress.cli.generate import export_cmd, generate_cmd

app = typer.Typer(
    name="medpress",
    help="MedPRESS: does a model keep safe medical advice when a patient pushes back?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(data.app, name="data")
app.command("generate")(generate_cmd)
app.command("export")(export_cmd)

__all__ = ["app"]
