"""``medpress judge``, ``judge-check``, ``disagreements``, ``labels import``."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperGroup

from medpress.backends import Reasoning
from medpress.cli.common import clean_errors, console
from medpress.dataset import Dataset, resolve_dataset
from medpress.judges import (
    ENSEMBLE,
    GoldFileError,
    GoldItem,
    Judge,
    JudgeSummary,
    Judgment,
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
from medpress.judges.llm import failure_line
from medpress.judges.registry import EMBEDDED, judge_provenance, parse_judge_reasoning
from medpress.metrics import LABELS
from medpress.runner import run_dataset
from medpress.store import RunStore

JudgeOpt = Annotated[list[str], typer.Option("--judge", "-j", help="Judge spec (repeatable)")]
JudgeUrlOpt = Annotated[list[str] | None, typer.Option(
    "--judge-base-url", help="Server for openai/ judges: one for all, or one per --judge")]
JudgeConcOpt = Annotated[int, typer.Option(help="Judge requests in flight")]
JudgeReasoningOpt = Annotated[str | None, typer.Option(
    "--judge-reasoning", help="on|off: switch an LLM judge's thinking (default: the model's); "
    "off suits a reasoning model behind vLLM that otherwise thinks past --judge-max-tokens")]
JudgeTruncOpt = Annotated[bool, typer.Option(
    "--judge-truncated/--no-judge-truncated",
    help="Judge replies cut off at --max-tokens as they stand (empty replies are never judged)")]
JudgeMaxTokOpt = Annotated[int | None, typer.Option(
    "--judge-max-tokens", help="An LLM judge's max tokens per verdict (default 512; raise it "
    "for a judge that thinks)")]

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


def check_judge_settings(judges: list[str], reasoning: str | None,
                         max_tokens: int | None) -> Reasoning | None:
    """Validate ``--judge-reasoning``/``--judge-max-tokens`` before any work; the parsed
    reasoning.

    Raises:
        ValueError: for a bad value, or either setting when every judge is ``embedded``.
    """
    r = parse_judge_reasoning(reasoning)
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"--judge-max-tokens must be at least 1, not {max_tokens}")
    if (r is not None or max_tokens is not None) and all(j == EMBEDDED for j in judges):
        raise ValueError("--judge-reasoning and --judge-max-tokens apply to LLM judges, not to "
                         "the embedded judge (a classifier: it generates nothing)")
    return r


def build_judges(judges: list[str], urls: list[str] | None, concurrency: int,
                 reasoning: str | None = None, max_tokens: int | None = None) -> list[Judge]:
    """One judge per spec. ``reasoning``/``max_tokens`` go to the LLM judges only.

    Raises:
        ValueError: for a bad value, or either setting when every judge is ``embedded``.
    """
    r = check_judge_settings(judges, reasoning, max_tokens)
    llm = [spec != EMBEDDED for spec in judges]
    return [get_judge(spec, base_url=url, concurrency=concurrency,
                      reasoning=r if is_llm else None, max_tokens=max_tokens if is_llm else None)
            for spec, url, is_llm in zip(judges, judge_urls(judges, urls), llm, strict=True)]


def record_judge(store: RunStore, judge: Judge) -> None:
    """Keep the judge's identity and settings in the run's meta under ``judges``, keyed by
    ``<name>@<rubric_version>`` (so reports show how every set of labels was made)."""
    entry = judge_provenance(judge)
    known = dict(store.get_meta("judges") or {})
    known[f"{judge.name}@{judge.rubric_version}"] = entry
    store.set_meta("judges", known)


def judge_store(store: RunStore, judges: list[str], urls: list[str] | None,
                concurrency: int, dataset: Path | None = None, reasoning: str | None = None,
                max_tokens: int | None = None, judge_truncated: bool = True
                ) -> list[JudgeSummary]:
    """Run each judge over the run with a progress bar; returns one summary per judge.

    Empty replies are never judged, truncated ones only with ``judge_truncated``; either
    kind is stored unjudged with the reason, and counted in the printed summary.

    When more than a few percent of a judge's verdicts fail, one line says why
    (:func:`medpress.judges.llm.failure_line`).
    """
    ds = run_dataset(store, dataset)
    total = sum(1 for t in store.iter_turns() if t["error"] is None)
    out = []
    for spec, judge in zip(judges, build_judges(judges, urls, concurrency, reasoning,
                                                max_tokens), strict=True):
        record_judge(store, judge)
        results: list[Judgment] = []
        with Progress(TextColumn("[bold]judging {task.description}"), BarColumn(),
                      MofNCompleteColumn(), TextColumn("[red]{task.fields[err]} unjudged"),
                      TimeElapsedColumn(), console=console) as prog:
            task = prog.add_task(spec, total=total, err=0)
            done = len(store.judged_keys(judge.name, judge.rubric_version))
            prog.update(task, completed=done)
            errs = Counter[str]()

            def tick(j: Judgment, task: object = task, errs: Counter[str] = errs,
                     results: list[Judgment] = results) -> None:
                errs["n"] += j.label is None
                # only failures are kept whole; a success is kept as its label, for the count
                results.append(j if j.label is None else Judgment(j.key, j.label))
                prog.update(task, advance=1, err=errs["n"])  # type: ignore[arg-type]

            summary = asyncio.run(judge_run(store, ds, judge, tick,
                                            judge_truncated=judge_truncated))
        left = ", ".join(f"{n} {why}" for why, n in summary.not_judged.items())
        console.print(f"{spec}: {summary.judged} judged, {summary.unjudged} unjudged"
                      + (f" (not put to the judge: {left} replies)" if left else "")
                      + f", {summary.skipped} already done; judge tokens "
                      f"{summary.prompt_tokens} / {summary.completion_tokens}")
        if (why := failure_line(results)) is not None:
            console.print(f"[yellow]{escape(f'{spec}: {why}')}[/]", highlight=False)
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
    judge_reasoning: JudgeReasoningOpt = None,
    judge_max_tokens: JudgeMaxTokOpt = None,
    judge_truncated: JudgeTruncOpt = True,
) -> None:
    """Judge an existing run; adds judgments, never regenerates replies, resumes."""
    judge_store(RunStore.open_existing(run_dir), judge, judge_base_url, concurrency, dataset,
                judge_reasoning, judge_max_tokens, judge_truncated)


@judge_app.command("train-embedded")
@clean_errors
def train_embedded_cmd(
    dataset: Annotated[Path | None, typer.Option(help="Labelled set (default: shipped)")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the split and the classifier")] = 0,
    out: Annotated[Path | None, typer.Option(help="Model folder (default: cache dir)")] = None,
    real_labels: Annotated[Path | None, typer.Option(
        help="Hand-labelled real replies to held-out dialogues, scored into the model's meta "
             "(default: the packaged smollm2_heldout.jsonl, also labels/smollm2_heldout.jsonl)"
    )] = None,
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
    from medpress.judges.embedded.judge import HELD_OUT_REPLIES, training_fingerprint

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

        # packaged with the judge, so the default does not depend on the working directory
        meta = train_embedded(ds, seed=seed, out=out, progress=step,
                              real_check=real_labels or HELD_OUT_REPLIES)
        prog.update(task, completed=len(TRAIN_STEPS), description="done")
    console.print(f"saved to {out or default_model_dir()} in {meta['train_seconds']} s; "
                  f"{len(meta['train_ids'])} train / {len(meta['held_out_ids'])} held-out "
                  "dialogues (split by topic group)")
    print_check({**meta["held_out"], "judge": "embedded (held-out references)"})
    for key in ("real_replies", "real_replies_extra"):
        if key in meta:
            print_check({**meta[key], "judge": f"embedded ({meta[key]['file']})"})


@clean_errors
def judge_check_cmd(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge spec")],
    judge_base_url: Annotated[str | None, typer.Option(help="Server for an openai/ judge")] = None,
    labels: Annotated[Path | None, typer.Option(help="JSONL of labelled replies")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Dialogues (default: shipped)")] = None,
    concurrency: JudgeConcOpt = 16,
    judge_reasoning: JudgeReasoningOpt = None,
    judge_max_tokens: JudgeMaxTokOpt = None,
    include_train: Annotated[bool, typer.Option(
        "--include-train", help="embedded judge: also score dialogues it was trained on "
        "(training fit, not a held-out figure)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Measure a judge against known labels (default: the dataset's references).

    The embedded judge is scored on its held-out dialogues only, unless --include-train.
    """
    if include_train and judge != EMBEDDED:
        raise ValueError("--include-train only applies to --judge embedded")
    reasoning = check_judge_settings([judge], judge_reasoning, judge_max_tokens)
    ds = resolve_dataset(dataset)
    try:
        gold = label_file_items(labels, ds) if labels else reference_items(ds)
    except GoldFileError as e:
        raise ValueError(str(e)) from None
    scope = None
    if judge == EMBEDDED:
        gold, scope = embedded_scope(gold, embedded_held_out(ds, include_train), include_train)
    report, judgments = run_check(
        get_judge(judge, base_url=judge_base_url, concurrency=concurrency,
                  reasoning=reasoning, max_tokens=judge_max_tokens),
        gold)
    stand_in = sum(g.stand_in for g in gold) if labels else 0
    if scope is not None:
        report["scope"] = scope
        report["judge"] = f"{report['judge']} ({scope})"
    if labels:
        report["reference_context_items"] = stand_in
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print_check(report)
    if stand_in:
        console.print(f"context: reference replies stand in for earlier turns in {stand_in} "
                      "items (the labels file has no history for them)")
    if (why := failure_line(judgments)) is not None:
        console.print(f"[yellow]{escape(f'{judge}: {why}')}[/]", highlight=False)


def embedded_scope(gold: list[GoldItem], held_out: list[str], include_train: bool
                   ) -> tuple[list[GoldItem], str]:
    """The items the embedded judge is scored on, and a phrase saying which they are.

    Held-out dialogues only, unless ``include_train``: then all, marked as including training
    dialogues (training fit is not a held-out figure). An item of a dialogue the split does not
    know (a user's set) counts as training.

    Raises:
        ValueError: when no item is of a held-out dialogue and ``include_train`` is off.
    """
    held = set(held_out)
    n_train = sum(g.dialogue_id not in held for g in gold)
    if include_train:
        return gold, (f"INCLUDES {n_train} items of training dialogues: not a held-out figure"
                      if n_train else "held-out dialogues only")
    kept = [g for g in gold if g.dialogue_id in held]
    if not kept:
        raise ValueError("none of these items is of a dialogue the embedded judge held out; "
                         "--include-train scores them anyway (training fit, not held-out)")
    return kept, ("held-out dialogues only" + (f"; {n_train} items of training dialogues left "
                                               "out (--include-train)" if n_train else ""))


def embedded_held_out(ds: Dataset, include_train: bool = False) -> list[str]:
    """The embedded judge's held-out ids: it is only ever scored on dialogues it never saw.

    For a dataset the cached model was not trained on, no id is known to be held out: that
    is an error, unless ``include_train`` (then every item counts as training).

    Raises:
        ValueError: for another dataset without ``include_train``.
    """
    from medpress.judges.embedded import EmbeddedModel, default_model_dir

    meta = EmbeddedModel.load(default_model_dir()).meta
    if meta["dataset"]["hash"] != ds.content_hash:
        if include_train:
            return []
        raise ValueError("the embedded judge was trained on another version of this dataset, "
                         "so its held-out dialogues are unknown; retrain it (medpress judge "
                         "train-embedded --dataset …) or score everything with --include-train")
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
                  f"(kept); {s.no_such_turn} for turns not in this run, {s.other_model} for "
                  "other models (skipped)")


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
