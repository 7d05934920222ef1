"""``medpress metrics`` and ``medpress report``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from medpress.cli.common import clean_errors, console
from medpress.judges import label_rows
from medpress.metrics import LabelRow, compute_groups, metrics_table, read_labels
from medpress.reports import write_report
from medpress.store import RunStore

EMBEDDED = "embedded-"

RunJudgeOpt = Annotated[str | None, typer.Option(
    "--judge", help="Whose labels: a judge name, or 'ensemble' (default: the only judge, "
    "else the ensemble of all)")]
BootOpt = Annotated[int, typer.Option(help="Bootstrap resamples")]
SeedOpt = Annotated[int, typer.Option(help="Bootstrap seed")]


def run_provenance(store: RunStore) -> dict[str, Any]:
    """The run's provenance for reports, without the (long) list of dialogue ids."""
    prov = store.provenance()
    ds = dict(prov.get("dataset") or {})
    ds.pop("ids", None)
    prov["dataset"] = ds
    prov["run_dir"] = str(store.run_dir)
    prov["errors"] = store.error_counts()
    return prov


def rows_from_runs(run_dirs: list[Path], judge: str | None
                   ) -> tuple[list[LabelRow], list[dict[str, Any]], str]:
    """Label rows of several runs, their provenance, and the judge description."""
    rows: list[LabelRow] = []
    provs, judges = [], []
    for rd in run_dirs:
        store = RunStore.open_existing(rd)
        r, desc = label_rows(store, judge)
        rows.extend(r)
        prov = run_provenance(store)
        prov["judge"] = desc
        provs.append(prov)
        judges.append(desc)
    return rows, provs, "; ".join(sorted(set(judges)))


@clean_errors
def metrics_cmd(
    run_dir: Annotated[Path | None, typer.Argument(help="Run directory")] = None,
    labels: Annotated[Path | None, typer.Option(help="CSV/JSONL label file instead")] = None,
    judge: RunJudgeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    n_boot: BootOpt = 1000,
    seed: SeedOpt = 0,
) -> None:
    """UAR, SAR, AR, FR, ToF, NoF with bootstrap CIs per model x condition x family."""
    if (run_dir is None) == (labels is None):
        raise ValueError("give either RUN_DIR or --labels FILE")
    if labels is not None:
        rows, source = read_labels(labels), f"file {labels}"
    else:
        assert run_dir is not None
        rows, _, source = rows_from_runs([run_dir], judge)
    if not rows:
        raise ValueError("no labelled turns to measure")
    groups = compute_groups(rows, n_boot=n_boot, seed=seed)
    if as_json:
        print(json.dumps({"labels": source, "groups": [g.to_dict() for g in groups]}))
        return
    console.print(f"labels: {source}")
    if EMBEDDED in source:
        from medpress.judges.embedded import trust_note

        console.print(f"[yellow]{trust_note()}[/]")
    console.print(metrics_table(groups))


def make_report(run_dirs: list[Path], out: Path | None, judge: str | None,
                label_note: str | None = None, n_boot: int = 1000, seed: int = 0) -> Path:
    rows, provs, desc = rows_from_runs(run_dirs, judge)
    if all(r.label is None for r in rows):
        raise ValueError(f"no labels in {', '.join(map(str, run_dirs))}: judge the run first "
                         "(medpress judge RUN_DIR --judge SPEC) or import labels")
    if label_note is None and EMBEDDED in desc:
        from medpress.judges.embedded import trust_note

        label_note = trust_note()
    out_dir = out or run_dirs[0] / "report"
    return write_report(out_dir, rows, provs, judge=desc, label_note=label_note,
                        n_boot=n_boot, seed=seed)


@clean_errors
def report_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories")],
    out: Annotated[Path | None, typer.Option(help="Report folder (default RUN_DIR/report)")] = None,
    judge: RunJudgeOpt = None,
    n_boot: BootOpt = 1000,
    seed: SeedOpt = 0,
) -> None:
    """Write report.md, metrics.json, CSVs and plots; several runs give a leaderboard."""
    path = make_report(run_dirs, out, judge, n_boot=n_boot, seed=seed)
    console.print(f"report: [bold]{path}[/]")
