"""``medpress judge``, ``judge-check``, ``disagreements``, ``labels import|list|remove|…``."""

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

from medpress.backends import Reasoning, get_backend
from medpress.cli.checks import (
    SETS,
    embedded_held_out,
    embedded_scope,
    print_check,
    suite_references,
    validation_sets,
)
from medpress.cli.common import at_least, clean_errors, console, err_console, fail, interrupted
from medpress.cli.suites import DEFAULT_SUITE, RunSuiteOpt, SuiteOpt, judge_suite, run_suite
from medpress.dataset import resolve_dataset
from medpress.judges import (
    ENSEMBLE,
    IMPORT_VERSION,
    GoldFileError,
    Judge,
    JudgeSummary,
    Judgment,
    classification_report,
    cohen_kappa,
    disagreements,
    fleiss_kappa,
    get_judge,
    import_labels,
    judge_run,
    kind_report,
    label_agreement,
    label_file_items,
    pairwise_labels,
    resolve_view,
    run_check,
)
from medpress.judges.labels_import import remove_labels
from medpress.judges.llm import failure_line
from medpress.judges.registry import (
    EMBEDDED,
    check_judge_spec,
    embedded_refusal,
    judge_provenance,
    parse_judge_reasoning,
)
from medpress.judges.reliability import FLIP_FLAG, flip_report
from medpress.judges.rubric import load_rubric, load_rubric_variants
from medpress.metrics import LABELS, LabelFileError
from medpress.runner import run_dataset
from medpress.store import RunStore
from medpress.suites import Suite, load_suite_dataset, resolve_suite

JudgeOpt = Annotated[list[str], typer.Option("--judge", "-j", help="Judge spec (repeatable)")]
JudgeUrlOpt = Annotated[list[str] | None, typer.Option(
    "--judge-base-url", help="Server for openai/ judges: one for all, or one per --judge")]
# One name for judge requests in flight in judge, judge-check and run; the old
# --concurrency still works on judge and judge-check (hidden), so old scripts run.
JudgeConcOpt = Annotated[int, typer.Option("--judge-concurrency", help="Judge requests in flight")]
OLD_CONCURRENCY = "--concurrency"
JudgeReasoningOpt = Annotated[str | None, typer.Option(
    "--judge-reasoning", help="on|off: switch an LLM judge's thinking (default: the model's); "
    "off suits a reasoning model behind vLLM that otherwise thinks past --judge-max-tokens")]
JudgeTruncOpt = Annotated[bool, typer.Option(
    "--judge-truncated/--no-judge-truncated",
    help="Judge replies cut off at --max-tokens as they stand (empty replies are never judged)")]
JudgeMaxTokOpt = Annotated[int | None, typer.Option(
    "--judge-max-tokens", help="An LLM judge's max tokens per verdict (default 512; raise it "
    "for a judge that thinks)")]

labels_app = typer.Typer(
    help="Labels from people or other tools: import them into a run, list, remove, and compare "
         "two labellers. One format for every labels file: docs/labels.md.",
    no_args_is_help=True)


class JudgeGroup(TyperGroup):
    """``medpress judge RUN_DIR …`` judges a run; ``medpress judge train-embedded`` trains.

    Anything that is not a subcommand name is taken as the RUN_DIR of the default ``run``.
    The old ``--concurrency`` of ``run`` is read as ``--judge-concurrency`` (hidden alias).
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored Context
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        if args and args[0] == "run":
            args = [_renamed(a) for a in args]
        return super().parse_args(ctx, args)

    def get_usage(self, ctx: Any) -> str:
        # The documented form comes first: "judge RUN_DIR" is not a subcommand click knows.
        path = ctx.command_path
        return (f"Usage: {path} RUN_DIR --judge SPEC [OPTIONS]\n"
                f"       {path} COMMAND [ARGS]...")


def _renamed(arg: str) -> str:
    """``--concurrency[=N]`` as ``--judge-concurrency[=N]``; any other argument as it is."""
    name, eq, value = arg.partition("=")
    return f"--judge-concurrency{eq}{value}" if name == OLD_CONCURRENCY else arg


judge_app = typer.Typer(
    cls=JudgeGroup, no_args_is_help=True,
    help="Judge a run: medpress judge RUN_DIR --judge SPEC [--judge SPEC …] [--judge-base-url "
         "URL] [--judge-concurrency N] … (every option: medpress judge run --help). Or train "
         "the embedded judge: medpress judge train-embedded.")


def judge_urls(judges: list[str], urls: list[str] | None) -> list[str | None]:
    """One base URL per judge: none, one shared by every openai/ judge, or one each.

    Raises:
        ValueError: for a URL with no openai/ judge to use it (it would be ignored), or a
            count of URLs that is neither one nor one per judge.
    """
    if not urls:
        return [None] * len(judges)
    if not any(j.startswith("openai/") for j in judges):
        raise ValueError(f"--judge-base-url applies to openai/ judges, and none of "
                         f"{', '.join(judges)} is one; leave it out")
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


def check_judge_options(judges: list[str], urls: list[str] | None, concurrency: int,
                        concurrency_option: str = "--judge-concurrency") -> None:
    """Judge specs, base URLs and concurrency, checked before any work (for ``run``: before
    generating anything that a misspelled judge would then fail to label).

    Raises:
        ValueError: an unknown spec (the list of valid ones includes ``embedded``), a base URL
            no judge would use, or a concurrency below 1 (it would wait forever).
    """
    for spec in judges:
        check_judge_spec(spec)
    judge_urls(judges, urls)
    at_least(concurrency_option, concurrency, 1)


def preflight_judges(judges: list[str], urls: list[str] | None) -> None:
    """Check once that each ``openai/`` judge can work: its API key where the hosted API needs
    one, and a connection to its server (:meth:`medpress.backends.Backend.preflight`).

    Raises:
        medpress.backends.PreflightError: naming the judge's URL or key variable.
    """
    for spec, url in zip(judges, judge_urls(judges, urls), strict=True):
        if spec.startswith("openai/"):
            asyncio.run(get_backend(spec, base_url=url).preflight("--judge-base-url"))


def build_judges(judges: list[str], urls: list[str] | None, concurrency: int,
                 reasoning: str | None = None, max_tokens: int | None = None,
                 suite: Suite | None = None) -> list[Judge]:
    """One judge per spec. ``reasoning``/``max_tokens`` go to the LLM judges only; a
    ``suite`` other than MedPRESS gives the LLM judges its rubric and refuses ``embedded``
    unless the suite declares one.

    Raises:
        ValueError: for a bad value, or either setting when every judge is ``embedded``.
    """
    r = check_judge_settings(judges, reasoning, max_tokens)
    llm = [spec != EMBEDDED for spec in judges]
    rubric_path, no_embedded = judge_suite(suite) if suite is not None else (None, None)
    rubric = load_rubric(rubric_path) if rubric_path is not None else None
    return [get_judge(spec, base_url=url, concurrency=concurrency,
                      reasoning=r if is_llm else None, max_tokens=max_tokens if is_llm else None,
                      rubric=rubric if is_llm else None, suite=no_embedded)
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
                max_tokens: int | None = None, judge_truncated: bool = True, *,
                again: str = "the same command", suite: str | None = None
                ) -> list[JudgeSummary]:
    """Run each judge over the run with a progress bar; returns one summary per judge.

    Empty replies are never judged, truncated ones only with ``judge_truncated``; either
    kind is stored unjudged with the reason, and counted in the printed summary. The run's
    suite gives the rubric (``suite``, a ``--suite`` value, must be the run's own).

    When more than a few percent of a judge's verdicts fail, one line says why
    (:func:`medpress.judges.llm.failure_line`). ``again`` is how messages say to rerun.

    Raises:
        ValueError: a bad judge option, or an ``openai/`` judge that fails its preflight.
        typer.Exit: 1 after every judge ran when one of them could judge nothing (every
            verdict it was asked for failed); 130 on Ctrl-C (labels so far are kept).
    """
    check_judge_options(judges, urls, concurrency)
    check_judge_settings(judges, reasoning, max_tokens)
    preflight_judges(judges, urls)  # before loading anything: a wrong URL fails in a second
    the_suite = run_suite(store, suite)
    ds = run_dataset(store, dataset)
    built = build_judges(judges, urls, concurrency, reasoning, max_tokens, the_suite)
    total = sum(1 for t in store.iter_turns() if t["error"] is None)
    out = []
    for spec, judge in zip(judges, built, strict=True):
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

            try:
                summary = asyncio.run(judge_run(store, ds, judge, tick,
                                                judge_truncated=judge_truncated))
            except KeyboardInterrupt:
                n = len(store.judged_keys(judge.name, judge.rubric_version))
                raise interrupted(n, f"labels of {spec}", again) from None
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
    if failed := [s.judge for s in out if judged_nothing(s)]:
        raise fail(f"{', '.join(failed)} judged nothing: every verdict failed (reasons above); "
                   f"fix the cause and run {again} to retry them", code=1)
    return out


def judged_nothing(s: JudgeSummary) -> bool:
    """Whether a judge call was asked for verdicts and every one failed.

    Replies not put to the judge (empty, truncated) are no verdicts; a call with nothing left
    to judge (all labelled before) did not fail.
    """
    asked = s.judged + s.unjudged - sum(s.not_judged.values())
    return asked > 0 and s.judged == 0


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
    suite: RunSuiteOpt = None,
) -> None:
    """Judge an existing run; adds judgments, never regenerates replies, resumes.

    Exits 1 when a judge could judge nothing (every verdict failed), 130 on Ctrl-C.
    """
    judge_store(RunStore.open_existing(run_dir), judge, judge_base_url, concurrency, dataset,
                judge_reasoning, judge_max_tokens, judge_truncated, suite=suite)


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
    if "held_out_hard" in meta:
        print_check({**meta["held_out_hard"], "judge": "embedded (held-out hard set)"})
    for key in ("real_replies", "real_replies_extra"):
        if key in meta:
            print_check({**meta[key], "judge": f"embedded ({meta[key]['file']})"})
    from medpress.judges.embedded.judge import (
        SCRIPTED_FLOOR,
        SCRIPTED_STANCES,
        helpfulness_lines,
    )

    for behaviour, share in meta.get("scripted", {}).items():
        mark = "" if share >= SCRIPTED_FLOOR else f"  [red]below the {SCRIPTED_FLOOR:.0%} floor[/]"
        console.print(f"scripted/{behaviour}: {share:.1%} of its replies labelled "
                      f"{SCRIPTED_STANCES[behaviour]}{mark}")
    for line in helpfulness_lines(meta):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@clean_errors
def judge_check_cmd(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge spec")],
    judge_base_url: Annotated[str | None, typer.Option(help="Server for an openai/ judge")] = None,
    labels: Annotated[Path | None, typer.Option(
        help="Labelled replies, CSV or JSONL (docs/labels.md), instead of the packaged sets"
    )] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="references | hard | real (repeatable; default: all three)")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Dialogues (default: shipped)")] = None,
    concurrency: JudgeConcOpt = 16,
    old_concurrency: Annotated[int | None, typer.Option(
        OLD_CONCURRENCY, hidden=True, help="Old name of --judge-concurrency")] = None,
    judge_reasoning: JudgeReasoningOpt = None,
    judge_max_tokens: JudgeMaxTokOpt = None,
    include_train: Annotated[bool, typer.Option(
        "--include-train", help="embedded judge: also score dialogues it was trained on "
        "(training fit, not a held-out figure)")] = False,
    repeats: Annotated[int, typer.Option(
        help="LLM judge: judge everything K more times at --repeat-temperature (seeds 0..K-1) "
             "and report how often a reply's label changes (self-consistency)")] = 0,
    repeat_temperature: Annotated[float, typer.Option(
        help="Temperature of the --repeats runs")] = 0.7,
    rubric_variants: Annotated[bool, typer.Option(
        "--rubric-variants", help="LLM judge: also judge with each paraphrase of the rubric "
        "(judges/data/rubric_variants.yaml) and report how often labels flip")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    suite: SuiteOpt = DEFAULT_SUITE,
) -> None:
    """Measure a judge against known labels, each set reported apart: the dataset's
    references, the hard judge-validation set (per kind of hard case too) and hand-labelled
    real replies; or a --labels file of your own.

    The embedded judge is scored on its held-out dialogues only, unless --include-train. A set
    with no item for the dataset (a user's set has no hard set) is skipped and said so. JSON:
    {"judge": …, "sets": {name: report}}.

    With --suite (another than medpress): the suite's references, labelled by its manifest's
    ``references`` mapping, judged with its rubric and scored over its labels; JSON adds
    ``suite`` and ``labels``.
    """
    the_suite = resolve_suite(suite)
    rubric_path, no_embedded = judge_suite(the_suite)
    if not the_suite.is_default:
        if judge == EMBEDDED and no_embedded is not None:
            raise ValueError(embedded_refusal(no_embedded))
        asked = [name for name, given in (("--labels", labels is not None),
                                          ("--dataset", dataset is not None),
                                          ("--rubric-variants", rubric_variants)) if given]
        if asked:
            raise ValueError(f"{asked[0]} applies to the medpress suite; suite "
                             f"{the_suite.name!r} is checked on its own references")
    if old_concurrency is not None:
        concurrency = old_concurrency
    if include_train and judge != EMBEDDED:
        raise ValueError("--include-train only applies to --judge embedded")
    if (repeats or rubric_variants) and judge == EMBEDDED:
        raise ValueError("--repeats and --rubric-variants apply to LLM judges; the embedded "
                         "judge is a deterministic classifier with no prompt")
    if repeats == 1 or repeats < 0:
        raise ValueError("--repeats needs at least 2 runs to compare")
    if labels is not None and sets:
        raise ValueError("--set chooses among the packaged sets; it cannot go with --labels")
    urls = [judge_base_url] if judge_base_url is not None else None
    check_judge_options([judge], urls, concurrency)
    reasoning = check_judge_settings([judge], judge_reasoning, judge_max_tokens)
    if the_suite.is_default:
        ds, label_set = resolve_dataset(dataset), list(LABELS)
    else:
        ds, label_set = load_suite_dataset(the_suite), suite_references(the_suite)[2]
    try:
        golds = ({labels.name: label_file_items(labels, ds)} if labels is not None
                 else validation_sets(ds, sets or (list(SETS) if the_suite.is_default
                                                   else ["references"]), the_suite))
    except GoldFileError as e:
        raise ValueError(str(e)) from None
    scopes: dict[str, str] = {}
    if judge == EMBEDDED:
        held = embedded_held_out(ds, include_train)
        for name in list(golds):
            golds[name], scopes[name] = embedded_scope(golds[name], held, include_train)
    skipped = [name for name, gold in golds.items() if not gold]
    if skipped and (labels is not None or sets):
        raise ValueError(f"nothing to score in {', '.join(skipped)}" + (
            ": no item is of a dialogue the embedded judge held out (--include-train scores "
            "them anyway, as training fit)" if judge == EMBEDDED else " for this dataset"))
    golds = {name: gold for name, gold in golds.items() if gold}
    if not golds:
        raise ValueError("nothing to score: no set has an item for this dataset")
    preflight_judges([judge], urls)
    everything = [g for gold in golds.values() for g in gold]

    # A suite's LLM judge uses its rubric (the embedded judge is MedPRESS's, refused above).
    own = ({"rubric": load_rubric(rubric_path)} if rubric_path is not None and judge != EMBEDDED
           else {})

    def labels_with(**kw: Any) -> tuple[list[Judgment], str]:
        j = get_judge(judge, base_url=judge_base_url, concurrency=concurrency,
                      reasoning=reasoning, max_tokens=judge_max_tokens, **(own | kw))
        return run_check(j, everything, label_set)[1], j.rubric_version

    judgments, base_version = labels_with()
    reliability: dict[str, Any] = {}
    if repeats:
        runs = [labels_with(temperature=repeat_temperature, seed=k)[0] for k in range(repeats)]
        reliability["self_consistency"] = {
            "temperature": repeat_temperature,
            **flip_report([[j.label for j in r] for r in runs],
                          [f"seed {k}" for k in range(repeats)])}
    if rubric_variants:
        runs, names = [judgments], [base_version]
        for rubric in load_rubric_variants():
            js, version = labels_with(rubric=rubric)
            runs.append(js)
            names.append(version)
        rep = flip_report([[j.label for j in r] for r in runs], names)
        rep["accuracy"] = {
            name: classification_report([g.gold for g in everything], [j.label for j in r],
                                        label_set)["accuracy"] for name, r in zip(names, runs,
                                                                               strict=True)}
        reliability["rubric_variants"] = rep
    reports: dict[str, dict[str, Any]] = {}
    at = 0
    for name, gold in golds.items():
        mine = judgments[at : at + len(gold)]
        at += len(gold)
        report = classification_report([g.gold for g in gold], [j.label for j in mine],
                                       label_set)
        if any(g.kind for g in gold):
            report["by_kind"] = kind_report(gold, mine)
        if name in scopes:
            report["scope"] = scopes[name]
        if labels is not None:
            report["reference_context_items"] = sum(g.stand_in for g in gold)
        reports[name] = report
    if as_json:
        print(json.dumps({"judge": judge, "sets": reports, "skipped": skipped}
                         | ({"reliability": reliability} if reliability else {})
                         | ({} if the_suite.is_default else
                            {"suite": the_suite.name, "labels": label_set}), indent=2))
        return
    for name, report in reports.items():
        what = SETS.get(name, "your labels file") if the_suite.is_default else (
            f"suite {the_suite.name}'s references (" + ", ".join(
                f"{k} → {v}" for k, v in the_suite.manifest.references.items()) + ")")
        scope = f" ({report['scope']})" if "scope" in report else ""
        console.print(f"\n[bold]{name}[/]: {what}{scope}", highlight=False)
        print_check({**report, "judge": judge})
        if report.get("reference_context_items"):
            console.print(f"context: reference replies stand in for earlier turns in "
                          f"{report['reference_context_items']} items (the labels file has "
                          "no history for them)")
    for name in skipped:
        console.print(f"{name}: no item for this dataset"
                      + (" among the judge's held-out dialogues" if judge == EMBEDDED else "")
                      + "; skipped")
    if (why := failure_line(judgments)) is not None:
        console.print(f"[yellow]{escape(f'{judge}: {why}')}[/]", highlight=False)
    print_reliability(reliability)


def print_reliability(reliability: dict[str, Any]) -> None:
    """One line per reliability check, flagged in red past the flip threshold."""
    for key, what in (("self_consistency", "asked again at temperature {temperature}"),
                      ("rubric_variants", "with the rubric reworded")):
        rep = reliability.get(key)
        if rep is None:
            continue
        rate = "n/a" if rep["flip_rate"] is None else f"{rep['flip_rate']:.1%}"
        kappa = "n/a" if rep["fleiss_kappa"] is None else f"{rep['fleiss_kappa']:.3f}"
        flag = (f" [red]FLAGGED: over {FLIP_FLAG:.0%} of labels change[/]" if rep["flagged"]
                else "")
        console.print(f"{what.format(**rep)} ({len(rep['runs'])} runs): labels changed on "
                      f"{rep['flipped']} of {rep['compared']} replies ({rate}), Fleiss κ "
                      f"{kappa}{flag}", highlight=False)
        if "accuracy" in rep:
            console.print("  accuracy by wording: " + ", ".join(
                f"{n} {'n/a' if a is None else f'{a:.3f}'}" for n, a in rep["accuracy"].items()),
                highlight=False)


@clean_errors
def disagreements_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines")] = False,
    judge: Annotated[str, typer.Option(
        "--judge", help="The judges compared: ensemble (every judge but imported labels) or "
        "a,b,...")] = ENSEMBLE,
    sheet: Annotated[Path | None, typer.Option(
        "--sheet", help="Also write a CSV labelling sheet of these replies (fill in `label`, "
        "then `medpress labels import RUN SHEET`)")] = None,
) -> None:
    """List turns where judges disagree, for human review (with four or more judges, each is
    flagged by the Asclepius rule: any two disagree)."""
    store = RunStore.open_existing(run_dir)
    view = resolve_view(store, judge)
    rows = disagreements(store, view)
    if sheet is not None:
        write_review_sheet(store, rows, sheet)
        console.print(f"labelling sheet: [bold]{sheet}[/] ({len(rows)} replies)")
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    table = Table(title=f"{len(rows)} disagreement(s) among {len(view.judges)} judges; label "
                        "by majority, ties to the more severe")
    for col in ("condition", "repeat", "dialogue", "turn", "labels", ENSEMBLE):
        table.add_column(col)
    for r in rows:
        table.add_row(r["condition"], str(r["repeat"]), r["dialogue_id"], str(r["turn"]),
                      ", ".join(f"{k}: {v}" for k, v in r["labels"].items()), str(r["ensemble"]))
    console.print(table)


REVIEW_SHEET_COLUMNS = ("condition", "repeat", "dialogue_id", "turn", "user", "reply",
                        "judge_labels", "ensemble", "label", "note")


def write_review_sheet(store: RunStore, rows: list[dict[str, Any]], path: Path) -> None:
    """A CSV of the disagreed replies with their turn text, each judge's label and an empty
    ``label`` column for the reviewer: importable with ``labels import`` once filled in."""
    import csv

    text = {(t["condition"], t["repeat"], t["dialogue_id"], t["turn"]): t
            for t in store.iter_turns()}
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=REVIEW_SHEET_COLUMNS)
        w.writeheader()
        for r in rows:
            t = text.get((r["condition"], r["repeat"], r["dialogue_id"], r["turn"]), {})
            w.writerow({**{k: r[k] for k in ("condition", "repeat", "dialogue_id", "turn")},
                        "user": t.get("user"), "reply": t.get("reply"),
                        "judge_labels": "; ".join(f"{k}: {v}" for k, v in r["labels"].items()),
                        "ensemble": r["ensemble"], "label": "", "note": ""})


@labels_app.command("import")
@clean_errors
def labels_import_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    file: Annotated[Path, typer.Argument(help="CSV or JSONL labels file (docs/labels.md)")],
    labeller: Annotated[str, typer.Option(help="Who made these labels")] = "human",
    dataset: Annotated[Path | None, typer.Option(help="The run's dialogues, if moved")] = None,
) -> None:
    """Attach labels to a run's turns under the labeller's name; nothing is overwritten.

    Each row needs condition, dialogue_id, turn and label (repeat defaults to 0; model and
    family are checked when present). A medpress export file with its label column filled in
    is such a file. Every problem of the file is listed, and then nothing is imported.
    """
    store = RunStore.open_existing(run_dir)
    try:
        s = import_labels(store, file, labeller, run_dataset(store, dataset))
    except LabelFileError as e:
        for problem in e.problems:
            err_console.print(f"[red]✗[/] {escape(str(problem))}", highlight=False)
        raise ValueError(f"{len(e.problems)} problem(s) in {file}; nothing was imported: fix "
                         "them and run the same command again (format: docs/labels.md)") from None
    console.print(f"{s.added} label(s) added as {labeller!r}; {s.kept_existing} already present "
                  f"(kept); {s.no_such_turn} for turns the run did not generate, "
                  f"{s.other_model} for other models (skipped)"
                  + (f", {s.other_reply} whose reply is not the run's (skipped: labels of "
                     "another generation)" if s.other_reply else ""), highlight=False)


@labels_app.command("sample")
@clean_errors
def labels_sample_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    n: Annotated[int, typer.Option("-n", help="Dialogues to draw (condition x dialogue units; "
                                              "all their turns and repeats)")],
    seed: Annotated[int, typer.Option(help="Seed of the draw")] = 0,
    by: Annotated[str | None, typer.Option(
        help="Stratify by condition, family or condition,family")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Sheet path without suffix (default RUN_DIR/labelling/<sample id>)")] = None,
    show_judge: Annotated[str | None, typer.Option(
        help="Fill judge_label from this judge (default: hidden, so labellers work blind)")
    ] = None,
    dataset: Annotated[Path | None, typer.Option(help="The run's dialogues, if moved")] = None,
) -> None:
    """Draw a seeded random sample of a run's dialogues and write a labelling sheet.

    The sheet (JSONL and CSV) has one row per turn, with the card, the user turn and the
    reply; fill in `label` (and `failure_mode`) and bring it back with `labels import`. The
    sampling design is stored in the run, so `metrics --gold LABELLER` can correct the
    judge's figures with it (docs/metrics.md).
    """
    from medpress.judges.gold_sample import draw_sample, write_sheet
    from medpress.judges.views import turn_labels

    store = RunStore.open_existing(run_dir)
    ds = run_dataset(store, dataset)
    strata = [b.strip() for b in by.split(",")] if by else []
    judged = None
    if show_judge is not None:
        labels, _ = turn_labels(store, show_judge)
        judged = {k: v["label"] for k, v in labels.items()}
    design = draw_sample(store, ds, n, seed=seed, by=strata)
    jsonl, csv_path = write_sheet(store, ds, design, out or run_dir / "labelling" / design.id,
                                  judged)
    console.print(f"sample {design.id}: {len(design.units)} dialogue(s) of "
                  f"{sum(design.stratum_sizes.values())}"
                  + (f", stratified by {', '.join(strata)}" if strata else "")
                  + f"; sheet: {jsonl} and {csv_path}", highlight=False)
    console.print(f"next: fill in `label`, then medpress labels import {run_dir} {csv_path} "
                  "--labeller NAME; medpress metrics "
                  f"{run_dir} --gold NAME", highlight=False)


@labels_app.command("list")
@clean_errors
def labels_list_cmd(run_dir: Annotated[Path, typer.Argument(help="Run directory")]) -> None:
    """Every judge and labeller of a run: rubric version, labelled and unjudged replies."""
    store = RunStore.open_existing(run_dir)
    replies = sum(1 for t in store.iter_turns() if t["error"] is None)
    counts = store.judgment_counts()
    if not counts:
        console.print(f"no labels in {run_dir} ({replies} replies): add them with medpress "
                      f"judge {run_dir} --judge SPEC, or medpress labels import {run_dir} FILE "
                      "--labeller NAME", highlight=False)
        return
    table = Table(title=f"labels in {run_dir} ({replies} generated replies)")
    table.add_column("labels by", overflow="fold")
    for col in ("kind", "rubric version", "labelled", "unjudged", "no row"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for name, version, labelled, unjudged in counts:
        kind = "imported" if version == IMPORT_VERSION else "judge"
        table.add_row(escape(name), kind, escape(version), str(labelled), str(unjudged),
                      str(max(replies - labelled - unjudged, 0)))
    console.print(table)


@labels_app.command("remove")
@clean_errors
def labels_remove_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    labeller: Annotated[str, typer.Option(help="Whose imported labels to delete")],
) -> None:
    """Delete one labeller's imported labels (never a judge's verdicts)."""
    n = remove_labels(RunStore.open_existing(run_dir), labeller)
    console.print(f"removed {n} imported label(s) by {labeller!r} from {run_dir}",
                  highlight=False)


@labels_app.command("agreement")
@clean_errors
def labels_agreement_cmd(
    first: Annotated[Path, typer.Argument(help="Labels file taken as gold (CSV or JSONL)")],
    second: Annotated[Path, typer.Argument(help="Second labeller's file (CSV or JSONL)")],
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
