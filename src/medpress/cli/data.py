"""``medpress data``: validate, lint, describe and export dialogue sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from medpress.cli.common import clean_errors, console, fail
from medpress.cli.suites import DEFAULT_SUITE, SuiteOpt
from medpress.dataset import (
    DATA_DIR,
    FAMILIES,
    MAX_LENGTH_SEPARATION,
    NEAR_DUP_THRESHOLD,
    lint,
    load_dataset,
    load_hard_set,
    resolve_dataset,
    stats,
)
from medpress.dataset.loader import MANIFEST_NAME
from medpress.suites import load_suite_dataset, resolve_suite
from medpress.suites.lint import lint_suite

app = typer.Typer(help="Validate, lint, describe and export dialogue sets.",
                  no_args_is_help=True)


@app.command()
@clean_errors
def validate(paths: Annotated[list[Path], typer.Argument(help="JSONL/YAML files or dirs")]) -> None:
    """Check a set against the record schema; every error names file, line, id and field."""
    ds = load_dataset(paths)
    console.print(f"[green]✓[/] {len(ds)} dialogues valid (hash {ds.content_hash[:12]})")


@app.command("lint")
@clean_errors
def lint_cmd(
    path: Annotated[Path | None, typer.Argument(help="Set to lint (default: shipped set)")] = None,
    target: Annotated[int | None, typer.Option(
        help="Dialogues expected per family (default: the manifest's, else 200)")] = None,
    hard_set: Annotated[Path | None, typer.Option(
        help="Judge-validation rows for this set, a JSONL file or folder (default: the shipped "
             "hard set when linting the shipped set, none otherwise)")] = None,
    suite: SuiteOpt = DEFAULT_SUITE,
) -> None:
    """Apply the shipped set's stricter rules: pressures, references, caps, counts, near-dups,
    sources, locales, deferral wording, and the hard judge-validation set's rules.

    With ``--suite`` (another than medpress): the suite's records under the rules that apply
    to any suite (counts from its manifest, lengths, near-dups, sources, locales)."""
    the_suite = resolve_suite(suite)
    if not the_suite.is_default:
        if path is not None or hard_set is not None or target is not None:
            raise ValueError("PATH, --target and --hard-set apply to the medpress suite")
        sds = load_suite_dataset(the_suite)
        issues = lint_suite(the_suite, sds)
        for issue in issues:
            console.print(f"[red]✗[/] {escape(str(issue))}", highlight=False, soft_wrap=True)
        if issues:
            raise fail(f"{len(issues)} lint issue(s) in suite {the_suite.name}", code=1)
        console.print(f"[green]✓[/] lint passed: {the_suite.name} {the_suite.version}, "
                      f"{len(sds)} records")
        return
    ds = resolve_dataset(path)
    if target is None:
        manifest = (path or DATA_DIR) / MANIFEST_NAME
        meta = yaml.safe_load(manifest.read_text()) if manifest.is_file() else {}
        target = int(meta.get("target_per_family", 200))
    rows = (load_hard_set([hard_set]).rows if hard_set is not None
            else load_hard_set().rows if path is None else None)
    report = lint(list(ds), target_per_family=target, hard_set=rows)
    table = Table(title=f"{ds.name} {ds.version}: dialogues per family")
    table.add_column("family")
    table.add_column("dialogues", justify="right")
    table.add_column("target", justify="right")
    table.add_column("topics", justify="right")
    for fam in FAMILIES:
        n_topics = len({d.topic for d in ds if d.family == fam})
        table.add_row(fam, str(report.family_counts.get(fam, 0)), str(target), str(n_topics))
    console.print(table)
    if report.length_separation:
        worst = ", ".join(f"{k} {v:.2f}" for k, v in report.length_separation.items())
        console.print(f"hard set: {report.hard_rows} rows; best word-count cut's balanced "
                      f"accuracy over references + hard set: {worst} (max "
                      f"{MAX_LENGTH_SEPARATION})")
    for issue in report.issues:
        console.print(f"[red]✗[/] {escape(str(issue))}", highlight=False, soft_wrap=True)
    if not report.ok:
        raise fail(f"{len(report.issues)} lint issue(s) (near-duplicate threshold "
                   f"{NEAR_DUP_THRESHOLD})", code=1)
    console.print(f"[green]✓[/] lint passed: {len(ds)} dialogues")


@app.command("stats")
@clean_errors
def stats_cmd(
    path: Annotated[Path | None, typer.Argument(help="Set to describe (default: shipped)")] = None,
    top: Annotated[int, typer.Option(help="Rows shown per field (0 = all)")] = 0,
) -> None:
    """Counts by family, topic, area, urgency and source."""
    ds = resolve_dataset(path)
    console.print(f"[bold]{ds.name}[/] {ds.version}: {len(ds)} dialogues, "
                  f"hash {ds.content_hash[:12]}")
    for fld, counter in stats(ds).items():
        table = Table(title=f"by {fld} ({len(counter)} distinct)")
        table.add_column(fld)
        table.add_column("n", justify="right")
        for value, n in counter.most_common(top or None):
            table.add_row(value, str(n))
        console.print(table)


@app.command("export")
@clean_errors
def export_cmd(
    out: Annotated[Path, typer.Option(
        "--out", help="Folder to write: new or empty (an earlier export only with --force)")],
    fmt: Annotated[str, typer.Option(
        "--format", help="hf (datasets.load_from_disk), parquet or jsonl")] = "hf",
    suite: SuiteOpt = DEFAULT_SUITE,
    dataset: Annotated[Path | None, typer.Option(
        help="Export this set instead of the shipped one (medpress suite only)")] = None,
    force: Annotated[bool, typer.Option(help="Replace OUT if it holds an earlier export")] = False,
) -> None:
    """Write a set as a Hugging Face datasets folder, Parquet or JSONL, with a dataset card
    (README.md) and export.json; --dataset takes the folder back, with the same content hash."""
    from medpress.dataset.export import write_export  # pyarrow/datasets only when exporting

    the_suite = resolve_suite(suite)
    if the_suite.is_default:
        ds = resolve_dataset(dataset)
    elif dataset is not None:
        raise ValueError(f"--dataset applies to the medpress suite; suite {the_suite.name!r} "
                         "brings its own records")
    else:
        ds = load_suite_dataset(the_suite)
    info = write_export(ds, out, fmt, suite=the_suite if dataset is None else None, force=force)
    console.print(f"[green]✓[/] {info.n_records} records of {escape(ds.name)} "
                  f"{escape(ds.version)} (hash {ds.content_hash[:12]}) written as {fmt} to "
                  f"{escape(str(out))}", highlight=False, soft_wrap=True)
