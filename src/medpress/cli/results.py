"""``medpress metrics`` and ``medpress report``."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from medpress.cli.common import clean_errors, console, short_spec
from medpress.cli.corrections import corrected_table, matrix_table, read_confusion
from medpress.cli.suites import RunSuiteOpt, run_suite
from medpress.dataset import Dataset, resolve_dataset
from medpress.judges import failure_kinds, label_rows, resolve_view, review_note
from medpress.metrics import (
    LabelRow,
    compute_groups,
    fit_metrics_table,
    read_labels,
)
from medpress.metrics.corrected import CorrectedGroup, Estimate, matrix_corrected
from medpress.store import RunStore, in_progress_note
from medpress.suites import Suite, resolve_suite

if TYPE_CHECKING:  # matplotlib comes with the reports: only when a report is made
    from medpress.reports.html_data import RunTranscripts

RunJudgeOpt = Annotated[str | None, typer.Option(
    "--judge", help="Whose labels: a judge name (its newest rubric version), NAME@VERSION, "
    "'ensemble' (every judge but imported labels) or NAME,NAME (default: the run's only judge)")]
BootOpt = Annotated[int, typer.Option(help="Bootstrap resamples")]
SeedOpt = Annotated[int, typer.Option(help="Bootstrap seed")]
RunDatasetOpt = Annotated[Path | None, typer.Option(
    "--dataset", help="The runs' dialogues, if moved (gives each dialogue its own length)")]
# Generation parameters that tell two runs of one model spec apart, in naming order.
_NAME_PARAMS = ("reasoning", "temperature", "max_tokens", "seed", "json_mode")


def run_provenance(store: RunStore) -> dict[str, Any]:
    """The run's provenance for reports, without the (long) list of dialogue ids."""
    prov = store.provenance()
    ds = dict(prov.get("dataset") or {})
    ds.pop("ids", None)
    prov["dataset"] = ds
    prov["run_dir"] = str(store.run_dir)
    prov["errors"] = store.error_counts()
    prov["replies"] = store.reply_issues()
    if attack := store.attack_summary():
        prov["attack_summary"] = attack
    return prov


def _users(prov: dict[str, Any]) -> str:
    """``fixed``, or ``adaptive <strategy>`` for a run whose user turns an attacker wrote."""
    attack = (prov.get("params") or {}).get("attack")
    return f"adaptive {attack.get('strategy')}" if attack else "fixed"


def run_names(stores: list[RunStore]) -> list[str]:
    """A display name per run that no other run in the list shares.

    Precedence: the name recorded with ``--name`` when the run was made; else the model spec
    (`short_spec`) plus the generation parameters (then fixed or adaptive user turns, then the
    server URL) that differ among runs of that spec, e.g. ``openai/qwen3 (reasoning=on)``;
    else, if still not unique, the run directory's name is added. Two runs are therefore
    never pooled into one row.
    """
    provs = [s.provenance() for s in stores]
    specs = [short_spec(str((p.get("model") or {}).get("spec", "?"))) for p in provs]
    names = []
    for i, prov in enumerate(provs):
        if prov.get("name"):
            names.append(str(prov["name"]))
            continue
        same = [p for p, spec in zip(provs, specs, strict=True) if spec == specs[i]]
        gen = [(p.get("params") or {}).get("generation") or {} for p in same]
        own = gen[same.index(prov)]
        parts = [f"{k}={own.get(k)}" for k in _NAME_PARAMS
                 if len({json.dumps(g.get(k)) for g in gen}) > 1]
        attacks = [_users(p) for p in same]
        if len(set(attacks)) > 1:
            parts.append(_users(prov))
        urls = [(p.get("model") or {}).get("base_url") for p in same]
        if len(set(urls)) > 1:
            parts.append(f"url={(prov.get('model') or {}).get('base_url')}")
        names.append(specs[i] + (f" ({', '.join(parts)})" if parts else ""))
    for i, name in enumerate(names):
        if names.count(name) > 1:
            names[i] = f"{name} [{stores[i].run_dir.name}]"
    if len(set(names)) < len(names):
        raise ValueError("two runs have the same display name and directory name; give each "
                         "a unique --name")
    return names


@dataclass
class RunLabels:
    """Label rows of several runs with everything a table or report says about them."""

    rows: list[LabelRow]
    provenance: list[dict[str, Any]]
    judge: str
    """Where the labels came from (each judge with its rubric version)."""
    notes: list[str]
    """Warnings: different judges, unfinished runs, empty or cut-off replies."""
    label_note: str | None
    """The embedded judge's measured agreement, for the models that made these labels."""
    transcripts: list[RunTranscripts] = field(default_factory=list)
    """Each run's directory, label view, display name and dialogues, for report.html."""


def rows_from_runs(run_dirs: list[Path], judge: str | None,
                   dataset: Path | None = None) -> RunLabels:
    """Label rows of several runs, their provenance, the judge description and warnings.

    Each run's rows carry its display name (`run_names`) and each dialogue's own length from
    the run's dataset. Warnings say when runs were labelled by different judges, when a run
    is unfinished or has failed turns, and when replies were empty or cut off.
    """
    from medpress.judges.embedded import labels_note
    from medpress.reports.html_data import RunTranscripts
    from medpress.runner import planned_turns, run_dataset, unit_turns

    stores = [RunStore.open_existing(rd) for rd in run_dirs]
    rows: list[LabelRow] = []
    provs, descs, notes = [], [], []
    transcripts: list[RunTranscripts] = []
    keys: list[tuple[str, str]] = []
    for store, name in zip(stores, run_names(stores), strict=True):
        ds = run_dataset(store, dataset)
        view = resolve_view(store, judge)
        keys.extend(view.judges)
        attack = ((store.get_meta("params") or {}).get("attack"))
        r, desc = label_rows(store, view, n_turns={d.id: unit_turns(d, attack) for d in ds},
                             name=name)
        rows.extend(r)
        transcripts.append(RunTranscripts(store.run_dir, view, name, ds.dialogues))
        prov = run_provenance(store)
        prov["name"] = name
        prov["judge"] = desc
        provs.append(prov)
        descs.append(desc)
        notes.extend(_run_notes(name, prov, planned_turns(prov.get("params") or {}, ds),
                                stored=len(r)))
        if flagged := review_note(store, view, name):
            notes.append(flagged)
        if live := in_progress_note(store, name):
            notes.insert(0, live)
    if len(set(descs)) > 1:
        notes.insert(0, "these runs were labelled by different judges, so their numbers are "
                        "not comparable: " + "; ".join(
                            f"{p['name']}: {d}" for p, d in zip(provs, descs, strict=True)))
    return RunLabels(rows, provs, "; ".join(dict.fromkeys(descs)), notes, labels_note(keys),
                     transcripts)


def _run_notes(name: str, prov: dict[str, Any], planned: int, stored: int) -> list[str]:
    notes = []
    if stored < planned:
        failed = sum((prov.get("errors") or {}).values())
        notes.append(f"{name}: {stored} of {planned} turns generated ({failed} failed); turns "
                     "not generated count as unjudged, and dialogues never started are not in "
                     "these numbers. Resume the run to complete it.")
    issues = prov.get("replies") or {}
    if issues.get("empty"):
        notes.append(f"{name}: {issues['empty']} replies are empty (no visible answer); they "
                     "are never judged and count as unjudged.")
    if issues.get("truncated"):
        notes.append(f"{name}: {issues['truncated']} replies were cut off at the token limit; "
                     "they are judged as they stand unless judged with --no-judge-truncated "
                     "(then they count as unjudged).")
    return notes


@clean_errors
def metrics_cmd(
    run_dir: Annotated[Path | None, typer.Argument(
        help="Run directory, or an Inspect log (.eval/.json) of medpress/medpress_task")] = None,
    labels: Annotated[Path | None, typer.Option(help="CSV/JSONL label file instead")] = None,
    judge: RunJudgeOpt = None,
    dataset: RunDatasetOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    n_boot: BootOpt = 1000,
    seed: SeedOpt = 0,
    gold: Annotated[str | None, typer.Option(
        help="Correct the judge's figures with this labeller's (or judge's) labels on a sample "
             "of the run (prediction-powered inference; docs/metrics.md)")] = None,
    judge_errors: Annotated[str | None, typer.Option(
        help="FILE[:SET]: without a gold sample, correct UAR/SAR/AR with the judge's confusion "
             "matrix from a `judge-check --json` file (SET: which of its sets, default 'real' "
             "if present); assumes the judge errs on this run as it did there")] = None,
    suite: RunSuiteOpt = None,
) -> None:
    """UAR, SAR, AR, FR, ToF, NoF with bootstrap CIs per model x condition x family.

    With --gold, each group also gets the figures corrected for the judge's errors, beside
    the judge-only and gold-only ones, and the judge's confusion matrix on the gold sample.
    """
    if (run_dir is None) == (labels is None):
        raise ValueError("give either RUN_DIR or --labels FILE")
    from medpress.inspect.log import is_inspect_log, read_log_labels  # stdlib-only import

    if run_dir is not None and is_inspect_log(run_dir):  # an Inspect log reads as --labels
        run_dir, labels = None, run_dir
    if gold is not None and run_dir is None:
        raise ValueError("--gold needs RUN_DIR: the gold labels and the sample live in the run")
    notes: list[str] = []
    label_note = None
    if labels is not None and is_inspect_log(labels):
        log = read_log_labels(labels)
        rows, source, suite = log.rows, log.source, suite or log.suite
        notes.extend(log.notes)
    elif labels is not None:
        rows, source = read_labels(labels), f"file {labels}"
        rows, unknown = with_lengths(rows, resolve_dataset(dataset))
        if unknown:
            notes.append(f"{unknown} dialogue id(s) in {labels} are not in the dataset and have "
                         "no n_turns column: their length is taken as the highest turn present")
    else:
        assert run_dir is not None
        runs = rows_from_runs([run_dir], judge, dataset)
        rows, source, notes, label_note = runs.rows, runs.judge, runs.notes, runs.label_note
    if all(r.label is None for r in rows):  # a table of dashes would look like a result
        if run_dir is None:
            raise ValueError(f"no labelled turns in {labels}: every label is blank"
                             if rows else "no labelled turns to measure")
        raise ValueError(no_labels_message([run_dir], judge))
    the_suite = (run_suite(RunStore.open_existing(run_dir), suite) if run_dir is not None
                 else resolve_suite(suite or "medpress"))
    if not the_suite.is_default:
        print_suite_metrics(the_suite, rows, source, notes, as_json, n_boot, seed)
        return
    groups = compute_groups(rows, n_boot=n_boot, seed=seed)
    corrected = {}
    gold_note = ""
    if gold is not None:
        assert run_dir is not None
        cgroups, gold_note = gold_corrected(run_dir, rows, gold, dataset, n_boot, seed)
        corrected = {(g.model, g.condition, g.family): g for g in cgroups}
    by_matrix: dict[tuple[str, str, str], dict[str, Estimate]] = {}
    if judge_errors is not None:
        confusion, where = read_confusion(judge_errors)
        by_matrix = matrix_corrected(rows, confusion, n_boot=n_boot, seed=seed)
        notes.append(f"matrix_corrected: UAR, SAR and AR corrected with the confusion matrix of "
                     f"{where}, assuming the judge errs on these replies as it did there")
    if as_json:
        out = []
        for g in groups:
            d = g.to_dict()
            key = (g.model, g.condition, g.family)
            if (c := corrected.get(key)) is not None:
                d.update(c.to_dict())
            if key in by_matrix:
                d["matrix_corrected"] = {m: e.to_dict() for m, e in by_matrix[key].items()}
            out.append(d)
        print(json.dumps({"labels": source, "notes": notes, "groups": out}
                         | ({"gold": gold_note} if gold is not None else {})))
        return
    print_labels(RunLabels(rows, [], source, notes, label_note))
    console.print(fit_metrics_table(groups, console.width))
    if corrected:
        console.print(corrected_table(list(corrected.values()), str(gold)))
        console.print(escape(gold_note), highlight=False)
    if by_matrix:
        console.print(matrix_table(groups, by_matrix))


def print_suite_metrics(suite: Suite, rows: list[LabelRow], source: str, notes: list[str],
                        as_json: bool, n_boot: int, seed: int) -> None:
    """A suite's own metrics (its manifest's list) as JSON or as the headline table."""
    from medpress.metrics.registry import compute_suite_groups
    from medpress.reports.suite import suite_alerts, suite_headline_table
    from medpress.suites import record_index

    groups = compute_suite_groups(rows, suite.manifest.metrics, n_boot=n_boot, seed=seed,
                                  records=record_index(suite))
    notes = [*notes, *(f"alert: {a}" for a in suite_alerts(suite, groups))]
    if as_json:
        print(json.dumps({"suite": suite.name, "version": suite.version, "labels": source,
                          "notes": notes, "groups": [g.to_dict() for g in groups]}))
        return
    print_labels(RunLabels(rows, [], source, notes, None))
    data = suite_headline_table(groups, suite.manifest.headline)
    table = Table(title=f"{suite.name} {suite.version}: all {suite.manifest.records.stratum}")
    for h in data.headers:
        table.add_column(h)
    for row in data.rows:
        table.add_row(*map(escape, row))
    console.print(table)


def print_table(runs: RunLabels, store: RunStore, seed: int) -> None:
    """The headline table of one run's labels, in its suite's own metrics."""
    suite = run_suite(store)
    if suite.is_default:
        console.print(fit_metrics_table(compute_groups(runs.rows, n_boot=1000, seed=seed),
                                        console.width))
    else:
        print_suite_metrics(suite, runs.rows, runs.judge, [], False, 1000, seed)


def gold_corrected(run_dir: Path, judge_rows: list[LabelRow], gold: str,
                   dataset: Path | None, n_boot: int, seed: int
                   ) -> tuple[list[CorrectedGroup], str]:
    """Corrected groups of one run and a note saying which gold sample they rest on.

    The sample is the run's latest drawn sample (``labels sample``) that ``gold`` labelled
    completely, else the one it labelled most of (an error then names what is missing); its
    labels outside that sample are left out. With no sample drawn, every dialogue ``gold``
    labelled, taken as a random sample.
    """
    from medpress.judges.gold_sample import designs
    from medpress.metrics.corrected import corrected_groups

    gold_rows = rows_from_runs([run_dir], gold, dataset).rows
    labelled = {(r.condition, r.dialogue_id) for r in gold_rows if r.label is not None}
    if not labelled:
        raise ValueError(f"{gold!r} labelled nothing in {run_dir}")
    name = judge_rows[0].model
    drawn = [d for d in designs(RunStore.open_existing(run_dir)) if labelled & set(d.units)]
    complete = [d for d in drawn if set(d.units) <= labelled]
    if not drawn:
        return (corrected_groups(judge_rows, gold_rows, n_boot=n_boot, seed=seed),
                f"corrected with {gold!r} on the {len(labelled)} dialogue(s) it labelled, "
                "taken as a random sample (no `labels sample` design holds them)")
    # the latest sample it labelled completely; else the one it labelled most of (which then
    # fails, naming the drawn dialogues still unlabelled)
    design = (complete[-1] if complete
              else max(drawn, key=lambda d: len(labelled & set(d.units))))
    units = set(design.units)
    outside = len(labelled - units)
    groups = corrected_groups(
        judge_rows, [r for r in gold_rows if (r.condition, r.dialogue_id) in units],
        sample=[(name, c, d) for c, d in design.units],
        strata={(name, *key.split("|", 1)): s  # type: ignore[misc]
                for key, s in design.strata.items()},
        n_boot=n_boot, seed=seed)
    return groups, (f"corrected with {gold!r} on sample {design.id} ({len(units)} dialogues, "
                    f"seed {design.seed}"
                    + (f", stratified by {', '.join(design.by)}" if design.by else "") + ")"
                    + (f"; {outside} labelled dialogue(s) outside it left out" if outside
                       else ""))


def print_labels(runs: RunLabels) -> None:
    """Which labels a table is built from, its warnings and the embedded judge's trust note."""
    console.print(f"labels: {escape(runs.judge)}", highlight=False)
    for note in runs.notes:
        console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)
    if runs.label_note:
        console.print(f"[yellow]{escape(runs.label_note)}[/]", highlight=False)


def with_lengths(rows: list[LabelRow], ds: Dataset) -> tuple[list[LabelRow], int]:
    """Rows with ``n_turns`` (and a blank ``family``) filled from ``ds`` where the file left
    them out, and the number of dialogue ids that had no length either way."""
    known = {d.id: d for d in ds}
    out, unknown = [], set()
    for r in rows:
        d = known.get(r.dialogue_id)
        if d is not None:
            r = dataclasses.replace(r, n_turns=r.n_turns or len(d.turns),
                                    family=r.family or d.family)
        elif r.n_turns is None:
            unknown.add(r.dialogue_id)
        out.append(r)
    return out, len(unknown)


def no_labels_message(run_dirs: list[Path], judge: str | None) -> str:
    """Why runs have no label at all, for the error of ``report`` and ``metrics``.

    A judge whose every verdict failed is named with its reasons grouped by
    `medpress.judges.failure_kinds` (most frequent first); runs with no judgments get
    "judge the run first". ``judge`` is the ``--judge`` view, already known to resolve.
    """
    failed = []
    for rd in run_dirs:
        store = RunStore.open_existing(rd)
        for name, version in resolve_view(store, judge).judges:
            kinds = failure_kinds(store, (name, version))
            if kinds:
                where = f" in {rd}" if len(run_dirs) > 1 else ""
                groups = ", ".join(f"{n} '{k}'" for k, n in kinds.most_common())
                failed.append(f"every verdict of {name}{where} failed: {groups}")
    if failed:
        return ("; ".join(failed) + "; fix the cause and judge again (medpress judge RUN_DIR "
                "--judge SPEC)")
    return (f"no labels in {', '.join(map(str, run_dirs))}: judge the run first "
            "(medpress judge RUN_DIR --judge SPEC) or import labels")


def make_report(run_dirs: list[Path], out: Path | None, judge: str | None,
                n_boot: int = 1000, seed: int = 0, dataset: Path | None = None,
                runs: RunLabels | None = None, gold: str | None = None,
                html: bool = False, suite: str | None = None) -> Path:
    """Write the report of ``run_dirs``; ``runs`` are their labels when already read;
    ``gold`` (one run only) adds the figures corrected with that labeller's sample; ``html``
    adds report.html with every transcript."""
    if gold is not None and len(run_dirs) != 1:
        raise ValueError("--gold corrects one run: report each run with its own gold sample")
    stores = [RunStore.open_existing(rd) for rd in run_dirs]
    by_suite: dict[str, list[Path]] = {}
    for rd, store in zip(run_dirs, stores, strict=True):
        by_suite.setdefault(run_suite(store, suite).name, []).append(rd)
    if len(by_suite) > 1:
        return balance_report(by_suite, out, judge, n_boot=n_boot, seed=seed)
    runs = runs or rows_from_runs(run_dirs, judge, dataset)
    # A run without a single label would be a row of dashes beside real results.
    unlabelled = [rd for rd, prov in zip(run_dirs, runs.provenance, strict=True)
                  if all(r.label is None for r in runs.rows if r.model == prov["name"])]
    if unlabelled:
        raise ValueError(no_labels_message(unlabelled, judge) + (
            "; or leave these runs out of the report" if len(unlabelled) < len(run_dirs) else ""))
    out_dir = out or run_dirs[0] / "report"
    the_suite = run_suite(stores[0])
    if not the_suite.is_default:
        from medpress.judges.rubric import load_rubric
        from medpress.reports.suite import write_suite_report

        rubric = load_rubric(the_suite.rubric_path)
        return write_suite_report(out_dir, the_suite, stores[0].get_meta("suite") or {},
                                  runs.rows, runs.provenance, judge=runs.judge,
                                  labels=list(rubric.labels), notes=runs.notes, n_boot=n_boot,
                                  seed=seed, html=html, modes=list(rubric.failure_modes),
                                  transcripts=runs.transcripts)
    from medpress.reports import write_report

    corrected, note = (gold_corrected(run_dirs[0], runs.rows, gold, dataset, n_boot, seed)
                       if gold is not None else ([], None))
    return write_report(out_dir, runs.rows, runs.provenance, judge=runs.judge,
                        label_note=runs.label_note, notes=runs.notes, n_boot=n_boot, seed=seed,
                        corrected=corrected, corrected_note=note, html=html,
                        transcripts=runs.transcripts)


BALANCE_SUITES = ("medpress", "twins", "control")


def balance_report(by_suite: dict[str, list[Path]], out: Path | None, judge: str | None, *,
                   n_boot: int, seed: int) -> Path:
    """The two-axis leaderboard (:mod:`medpress.reports.balance`) of runs of MedPRESS, the
    twins and optionally the control set, written to ``out`` (default: ``balance`` beside the
    first MedPRESS run). Each suite's runs are read on their own, so a model keeps its name
    in every suite and rows match by model name and condition.

    Raises:
        ValueError: suites other than those three, or MedPRESS or twins runs missing, or a
            suite whose runs hold no label.
    """
    from medpress.reports.balance import balance_rows, write_balance

    if other := sorted(set(by_suite) - set(BALANCE_SUITES)):
        raise ValueError(f"these runs are of different suites ({', '.join(sorted(by_suite))}): "
                         f"only medpress, twins and control combine (into the two-axis "
                         f"leaderboard); report {', '.join(other)} on its own")
    if missing := [s for s in BALANCE_SUITES[:2] if s not in by_suite]:
        raise ValueError(f"the two-axis leaderboard needs runs of {' and '.join(missing)} too "
                         "(runs of several suites combine only as medpress + twins "
                         "[+ control])")
    rows, judges, notes = {}, {}, []
    for name, dirs in by_suite.items():
        labels = rows_from_runs(dirs, judge)
        if all(r.label is None for r in labels.rows):
            raise ValueError(no_labels_message(dirs, judge))
        rows[name], judges[name] = labels.rows, labels.judge
        notes += labels.notes
    out_dir = out or by_suite["medpress"][0].parent / "balance"
    return write_balance(out_dir, balance_rows(rows, n_boot=n_boot, seed=seed),
                         judges=judges, notes=notes, n_boot=n_boot, seed=seed)


@clean_errors
def report_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories")],
    out: Annotated[Path | None, typer.Option(help="Report folder (default RUN_DIR/report)")] = None,
    judge: RunJudgeOpt = None,
    dataset: RunDatasetOpt = None,
    n_boot: BootOpt = 1000,
    seed: SeedOpt = 0,
    gold: Annotated[str | None, typer.Option(
        help="Add figures corrected with this labeller's labels on a sample of the run "
             "(one run; see metrics --gold)")] = None,
    html: Annotated[bool, typer.Option(
        "--html", help="Also write report.html: the results with interactive charts and a "
        "browser of every transcript, in one self-contained file")] = False,
    suite: RunSuiteOpt = None,
) -> None:
    """Write report.md, metrics.json, CSVs and plots; several runs give a leaderboard.

    A run of a suite other than MedPRESS gets its suite's report (report.md, metrics.json;
    report.html with --html). Runs of MedPRESS and the twins (and the control set) together
    give the two-axis leaderboard instead: balance.md, balance.json, balance.png.
    """
    path = make_report(run_dirs, out, judge, n_boot=n_boot, seed=seed, dataset=dataset,
                       gold=gold, html=html, suite=suite)
    console.print(f"report: [bold]{path}[/]")
    for extra in ("report.html", "balance.png"):
        if (html or extra == "balance.png") and path.with_name(extra).is_file():
            console.print(f"report: [bold]{path.with_name(extra)}[/]")
