"""``medpress judge``, ``judge-check``, ``disagreements``, ``labels import``."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperGroup

from medpress.cli.common import clean_errors, console
from medpress.dataset import Dataset, resolve_dataset
from medpress.judges import (
    ENSEMBLE,
    GoldFileError,
    JudgeSummary,
    cohen_kappa,
    disagreements,
    fleiss_kappa,
    get_judge,
    import_labels,
    judge_run,
    label_agreement,
    label_file_items,
    pairwise_labels,
    reference_items,
    run_check,
)
from medpress.metrics import LABELS
from medpress.runner import run_dataset
from medpress.store import RunStore

JudgeOpt = Annotated[list[str], typer.Option("--judge", "-j", help="Judge spec (repeatable)")]
JudgeUrlOpt = Annotated[list[str] | None, typer.Option(
    "--judge-base-url", help="Server for openai/ judges: one for all, or one per --judge")]
JudgeConcOpt = Annotated[int, typer.Option(help="Judge requests in flight")]

labels_app = typer.Typer(help="Attach labels from a file to a run.", no_args_is_help=True)


class JudgeGroup(TyperGroup):
    """``medpress judge RUN_DIR …`` judges a run; ``medpress judge train-embedded`` trains.

    Anything that is not a subcommand name is taken as the RUN_DIR of the default ``run``.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored Context
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


judge_app = typer.Typer(cls=JudgeGroup, no_args_is_help=True,
                        help="Judge a run (medpress judge RUN_DIR --judge SPEC), or train the "
                             "embedded judge (medpress judge train-embedded).")


def judge_urls(judges: list[str], urls: list[str] | None) -> list[str | None]:
    """One base URL per judge: none, one shared by every openai/ judge, or one each."""
    if not urls:
        return [None] * len(judges)
    if len(urls) == 1:
        return [urls[0] if j.startswith("openai/") else None for j in judges]
    if len(urls) != len(judges):
        raise ValueError("give one --judge-base-url, or exactly one per --judge")
    return list(urls)


def judge_store(store: RunStore, judges: list[str], urls: list[str] | None,
                concurrency: int, dataset: Path | None = None) -> list[JudgeSummary]:
    """Run each judge over the run with a progress bar; returns one summary per judge."""
    ds = run_dataset(store, dataset)
    total = sum(1 for t in store.iter_turns() if t["error"] is None)
    out = []
    for spec, url in zip(judges, judge_urls(judges, urls), strict=True):
        judge = get_judge(spec, base_url=url, concurrency=concurrency)
        with Progress(TextColumn("[bold]judging {task.description}"), BarColumn(),
                      MofNCompleteColumn(), TextColumn("[red]{task.fields[err]} unjudged"),
                      TimeElapsedColumn(), console=console) as prog:
            task = prog.add_task(spec, total=total, err=0)
            done = len(store.judged_keys(judge.name, judge.rubric_version))
            prog.update(task, completed=done)
            errs = Counter[str]()

            def tick(j: object, task: object = task, errs: Counter[str] = errs) -> None:
                errs["n"] += getattr(j, "label", None) is None
                prog.update(task, advance=1, err=errs["n"])  # type: ignore[arg-type]

            summary = asyncio.run(judge_run(store, ds, judge, tick))
        console.print(f"{spec}: {summary.judged} judged, {summary.unjudged} unjudged, "
                      f"{summary.skipped} already done; judge tokens "
                      f"{summary.prompt_tokens} / {summary.completion_tokens}")
        out.append(summary)
    if len(judges) > 1:
        print_agreement(store)
    return out


def print_agreement(store: RunStore) -> None:
    by_judge = pairwise_labels(store)
    table = Table(title="inter-judge agreement (turns both judged)")
    table.add_column("judges")
    table.add_column("Cohen's κ", justify="right")
    for a, b in combinations(sorted(by_judge), 2):
        pairs = [(x, y) for x, y in zip(by_judge[a], by_judge[b], strict=True) if x and y]
        k = cohen_kappa([x for x, _ in pairs], [y for _, y in pairs])
        table.add_row(f"{a} vs {b}", "n/a" if k is None else f"{k:.3f}")
    full = [list(r) for r in zip(*by_judge.values(), strict=True) if all(r)]
    fk = fleiss_kappa(full) if full else None
    table.add_row("Fleiss' κ (all judges)", "n/a" if fk is None else f"{fk:.3f}")
    console.print(table)


@judge_app.command("run")
@clean_errors
def judge_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    judge: JudgeOpt,
    judge_base_url: JudgeUrlOpt = None,
    concurrency: JudgeConcOpt = 16,
    dataset: Annotated[Path | None, typer.Option(help="The run's dialogues, if moved")] = None,
) -> None:
    """Judge an existing run; adds judgments, never regenerates replies, resumes."""
    judge_store(RunStore.open_existing(run_dir), judge, judge_base_url, concurrency, dataset)


@judge_app.command("train-embedded")
@clean_errors
def train_embedded_cmd(
    dataset: Annotated[Path | None, typer.Option(help="Labelled set (default: shipped)")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the split and the classifier")] = 0,
    out: Annotated[Path | None, typer.Option(help="Model folder (default: cache dir)")] = None,
    real_labels: Annotated[Path | None, typer.Option(
        help="Hand-labelled real replies to held-out dialogues, scored into the model's meta "
             "(default: labels/smollm2_heldout.jsonl when present)")] = None,
    if_missing: Annotated[bool, typer.Option(
        help="Do nothing if a model trained on this dataset version already exists")] = False,
) -> None:
    """Train the offline judge on the references of the train split; report the held-out split."""
    from medpress.judges.embedded import (
        TRAIN_STEPS,
        EmbeddedModel,
        default_model_dir,
        train_embedded,
    )
    from medpress.judges.embedded.judge import training_fingerprint

    ds = resolve_dataset(dataset)
    if if_missing:
        try:
            meta = EmbeddedModel.load(out or default_model_dir()).meta
        except FileNotFoundError:
            meta = {}
        if (meta.get("dataset", {}).get("hash") == ds.content_hash and meta.get("seed") == seed
                and meta.get("train_data") == training_fingerprint()):
            console.print(f"embedded judge already trained ({out or default_model_dir()})")
            return

    with Progress(TextColumn("[bold]training embedded judge"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console) as prog:
        task = prog.add_task("", total=len(TRAIN_STEPS))

        def step(msg: str) -> None:
            prog.update(task, completed=TRAIN_STEPS.index(msg), description=msg)

        default_real = Path("labels/smollm2_heldout.jsonl")
        real = real_labels or (default_real if default_real.is_file() else None)
        meta = train_embedded(ds, seed=seed, out=out, progress=step, real_check=real)
        prog.update(task, completed=len(TRAIN_STEPS), description="done")
    console.print(f"saved to {out or default_model_dir()} in {meta['train_seconds']} s; "
                  f"{len(meta['train_ids'])} train / {len(meta['held_out_ids'])} held-out "
                  "dialogues (split by topic)")
    print_check({**meta["held_out"], "judge": "embedded (held-out references)"})
    if "real_replies" in meta:
        print_check({**meta["real_replies"], "judge": f"embedded ({meta['real_replies']['file']})"})


@clean_errors
def judge_check_cmd(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge spec")],
    judge_base_url: Annotated[str | None, typer.Option(help="Server for an openai/ judge")] = None,
    labels: Annotated[Path | None, typer.Option(help="JSONL of labelled replies")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Dialogues (default: shipped)")] = None,
    concurrency: JudgeConcOpt = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Measure a judge against known labels (default: the dataset's references)."""
    ds = resolve_dataset(dataset)
    if judge == "embedded" and labels is None:
        ds = ds.subset(embedded_held_out(ds))
    try:
        gold = label_file_items(labels, ds) if labels else reference_items(ds)
    except GoldFileError as e:
        raise ValueError(str(e)) from None
    report, _ = run_check(get_judge(judge, base_url=judge_base_url, concurrency=concurrency),
                          gold)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print_check(report)


def embedded_held_out(ds: Dataset) -> list[str]:
    """The embedded judge's held-out ids: it is only ever scored on dialogues it never saw."""
    from medpress.judges.embedded import EmbeddedModel, default_model_dir

    meta = EmbeddedModel.load(default_model_dir()).meta
    if meta["dataset"]["hash"] != ds.content_hash:
        raise ValueError("the embedded judge was trained on another version of this dataset; "
                         "retrain it (medpress judge train-embedded) or pass --labels")
    return list(meta["held_out_ids"])


def print_check(report: dict[str, object]) -> None:
    def f(x: object) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    console.print(f"[bold]{report['judge']}[/]: n={report['n']}  accuracy {f(report['accuracy'])}"
                  f"  macro-F1 {f(report['macro_f1'])}  κ {f(report['kappa'])}  "
                  f"unjudged {report['unjudged']}")
    table = Table(title="per class")
    for col in ("class", "precision", "recall", "F1", "support"):
        table.add_column(col, justify="right")
    per = report["per_class"]
    for c in LABELS:
        p = per[c]  # type: ignore[index]
        table.add_row(c, f(p["precision"]), f(p["recall"]), f(p["f1"]), str(p["support"]))
    console.print(table)
    conf = Table(title="confusion (rows gold, columns predicted)")
    conf.add_column("gold")
    for c in LABELS:
        conf.add_column(c, justify="right")
    for g in LABELS:
        conf.add_row(g, *(str(report["confusion"][g][p]) for p in LABELS))  # type: ignore[index]
    console.print(conf)


@clean_errors
def disagreements_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines")] = False,
) -> None:
    """List turns where judges disagree, for human review."""
    rows = disagreements(RunStore.open_existing(run_dir))
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    table = Table(title=f"{len(rows)} disagreement(s); {ENSEMBLE} label by majority, "
                        "ties to the more severe")
    for col in ("condition", "repeat", "dialogue", "turn", "labels", ENSEMBLE):
        table.add_column(col)
    for r in rows:
        table.add_row(r["condition"], str(r["repeat"]), r["dialogue_id"], str(r["turn"]),
                      ", ".join(f"{k}: {v}" for k, v in r["labels"].items()), str(r["ensemble"]))
    console.print(table)


@labels_app.command("import")
@clean_errors
def labels_import_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    file: Annotated[Path, typer.Argument(help="CSV or JSONL label file")],
    labeller: Annotated[str, typer.Option(help="Who made these labels")] = "human",
) -> None:
    """Attach labels to a run's turns under the labeller's name; nothing is overwritten."""
    s = import_labels(RunStore.open_existing(run_dir), file, labeller)
    console.print(f"{s.added} label(s) added as {labeller!r}; {s.kept_existing} already present "
                  f"(kept); {s.no_such_turn} for turns not in this run (skipped)")


@labels_app.command("agreement")
@clean_errors
def labels_agreement_cmd(
    first: Annotated[Path, typer.Argument(help="Labels file taken as gold (JSONL)")],
    second: Annotated[Path, typer.Argument(help="Second labeller's file (JSONL)")],
    dataset: Annotated[Path | None, typer.Option(help="Dialogues (default: shipped)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Agreement of two labellers (accuracy, per-class scores, Cohen's κ) on shared ids."""
    ds = resolve_dataset(dataset)
    try:
        report = label_agreement(label_file_items(first, ds), label_file_items(second, ds))
    except GoldFileError as e:
        raise ValueError(str(e)) from None
    report["judge"] = f"{second.name} vs {first.name}"
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print_check(report)
    console.print(f"ids only in {first.name}: {report['only_in_first']}; "
                  f"only in {second.name}: {report['only_in_second']} (not scored)")
