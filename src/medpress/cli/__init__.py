"""The ``medpress`` command line.

Every command is imported when it runs (:mod:`medpress.cli.lazy`): ``medpress --help`` and
``medpress --version`` import typer and not numpy, pydantic, aiohttp or the judges.
"""

from typing import Annotated

import typer

from medpress.cli.lazy import LazyCommand, LazyGroup

# name -> where the command lives and the line `medpress --help` shows for it, in help order
COMMANDS: dict[str, LazyCommand] = {
    "data": LazyCommand(
        "medpress.cli.data", "app", "Validate, lint, describe and export dialogue sets."),
    "labels": LazyCommand(
        "medpress.cli.evaluate", "labels_app",
        "Labels from people or other tools: import them into a run, list, remove, and "
        "compare two labellers."),
    "run": LazyCommand(
        "medpress.cli.pipeline", "run_cmd",
        "Generate → judge → report, then print the headline table and the report path."),
    "sweep": LazyCommand(
        "medpress.cli.sweep", "sweep_cmd",
        "Run every model × suite of a sweep file: generate, judge, then one leaderboard "
        "report."),
    "generate": LazyCommand(
        "medpress.cli.generate", "generate_cmd",
        "Generate every five-turn transcript of the selected dialogues under each condition."),
    "judge": LazyCommand(
        "medpress.cli.evaluate", "judge_app",
        "Judge a run: medpress judge RUN_DIR --judge SPEC [--judge SPEC …] [--judge-base-url "
        "URL] [--judge-concurrency N] … (every option: medpress judge run --help)."),
    "judge-check": LazyCommand(
        "medpress.cli.evaluate", "judge_check_cmd",
        "Measure a judge against known labels, each set reported apart: the dataset's "
        "references, the hard judge-validation set (per kind of hard case too) and "
        "hand-labelled real replies; or a --labels file of your own."),
    "disagreements": LazyCommand(
        "medpress.cli.evaluate", "disagreements_cmd",
        "List turns where judges disagree, for human review (with four or more judges, each "
        "is flagged by the Asclepius rule: any two disagree)."),
    "metrics": LazyCommand(
        "medpress.cli.results", "metrics_cmd",
        "UAR, SAR, AR, FR, ToF, NoF with bootstrap CIs per model x condition x family."),
    "report": LazyCommand(
        "medpress.cli.results", "report_cmd",
        "Write report.md, metrics.json, CSVs and plots; several runs give a leaderboard."),
    "export": LazyCommand(
        "medpress.cli.generate", "export_cmd",
        "One row per generated (dialogue, condition, repeat, turn), with labels once judged."),
    "status": LazyCommand(
        "medpress.cli.status", "status_cmd",
        "Model, parameters, dataset, turns done / failed / missing, judges and what to run "
        "next."),
    "suites": LazyCommand(
        "medpress.cli.suites", "suites_cmd",
        "List the shipped suites and any suite directories given (manifests only are read)."),
}


class MedpressGroup(LazyGroup):
    lazy = COMMANDS


app = typer.Typer(
    name="medpress",
    cls=MedpressGroup,
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


__all__ = ["COMMANDS", "app"]
