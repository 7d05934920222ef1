"""``medpress sweep SWEEP.toml``: a whole study (models × suites) from one file, resumably."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from medpress.cli.common import clean_errors, console, err_console, split_list

if TYPE_CHECKING:  # the sweep's modules load plans and suites: only when a sweep runs
    from medpress.runner import RunPlan
    from medpress.runner.sweep import Cell, Sweep


@clean_errors
def sweep_cmd(
    config: Annotated[Path, typer.Argument(help="The sweep file (TOML; docs/sweeps.md)")],
    dry_run_: Annotated[bool, typer.Option(
        "--dry-run", help="Print the cells and the requests they make, and stop (no server "
        "is contacted, nothing is written)")] = False,
    out: Annotated[Path | None, typer.Option(
        help="The sweep's folder (default: [run] out, else runs/<file name>)")] = None,
) -> None:
    """Run every model × suite of a sweep file: generate, judge, then one leaderboard report.

    Each cell is a run directory OUT/<model>/<suite>; the same command resumes a stopped
    sweep (finished cells are reused, unfinished ones continue where they stopped). Several
    models give the leaderboard; medpress with twins (and control) the two-axis leaderboard.
    Exits 1 when a turn fails permanently or a judge judged nothing (unless [run]
    allow_failed), 130 on Ctrl-C.
    """
    from medpress.runner.sweep import expand, finished_cells, load_sweep

    sweep = load_sweep(config)
    out_dir = out or sweep.default_out
    cells = expand(sweep, out_dir)
    plans = cell_plans(sweep, cells)  # every suite, condition and selection, before any work
    check_judges(sweep)
    done = finished_cells(out_dir, cells, sweep.config.run)
    if dry_run_:
        print_dry_run(sweep, cells, plans, done)
        return
    check_models(sweep, cells)
    again = f"medpress sweep {config}" + (f" --out {out}" if out is not None else "")
    run_sweep(sweep, cells, done, out_dir, again)


def cell_conditions(cell: Cell) -> str:
    """The cell's conditions as ``--conditions`` takes them (the suite's default if unset)."""
    from medpress.runner import suite_conditions

    return ",".join(suite_conditions(cell.conditions, cell.suite))


def cell_selection(sweep: Sweep, cell: Cell) -> tuple[Path | None, str | None, bool]:
    """``dataset``, ``ids`` and ``starter`` for the cell: MedPRESS's selection, so only
    for cells of the medpress suite."""
    run = sweep.config.run
    if cell.suite_name != "medpress":
        return None, None, False
    return run.dataset, None if run.ids is None else ",".join(run.ids), run.starter


def cell_plans(sweep: Sweep, cells: Sequence[Cell]) -> dict[int, RunPlan]:
    """Each cell's plan (cells of one suite with the same settings share one), built before
    anything runs, so a bad condition or sample in the last cell fails at once.

    Raises:
        ValueError: naming the file and the suite.
    """
    from medpress.backends import GenerateConfig
    from medpress.runner import build_plan

    run = sweep.config.run
    plans: dict[int, RunPlan] = {}
    seen: dict[tuple[str, str, int], RunPlan] = {}
    for c in cells:
        conds = cell_conditions(c)
        key = (c.suite, conds, c.max_tokens)
        if key not in seen:
            dataset, ids, starter = cell_selection(sweep, c)
            try:
                seen[key] = build_plan(dataset, split_list(conds), run.sample, split_list(ids),
                                       starter, run.seed,
                                       GenerateConfig(max_tokens=c.max_tokens, seed=run.seed),
                                       run.repeats, c.suite, run.conditions_files)
            except ValueError as e:
                raise ValueError(f"{sweep.path}: suite {c.suite_name}: {e}") from None
        plans[c.index] = seen[key]
    return plans


def check_judges(sweep: Sweep) -> None:
    """Every judge entry's spec, URL and settings, before any work (no server contacted).

    Raises:
        ValueError: naming the file and the ``[[judges]]`` entry.
    """
    from medpress.cli.evaluate import check_judge_options, check_judge_settings

    run = sweep.config.run
    for i, j in enumerate(sweep.config.judges, 1):
        try:
            check_judge_options([j.spec], None if j.base_url is None else [j.base_url],
                                run.judge_concurrency, "judge_concurrency")
            check_judge_settings([j.spec], j.reasoning, j.max_tokens)
        except ValueError as e:
            raise ValueError(f"{sweep.path}: [[judges]] {i} ({j.spec}): {e}") from None


def check_models(sweep: Sweep, cells: Sequence[Cell]) -> None:
    """Build each model's backend once and check its settings (a scripted behaviour that
    does not exist, reasoning for a backend with no switch), without contacting a server:
    the server of a later model may not be up yet.

    Raises:
        ValueError: naming the file and the ``[[models]]`` entry.
    """
    from medpress.backends import GenerateConfig, get_backend

    run = sweep.config.run
    checked = set()
    for c in cells:
        i = sweep.config.models.index(c.model) + 1
        if i in checked:
            continue
        checked.add(i)
        try:
            backend = get_backend(c.model.spec, base_url=list(c.model.urls) or None,
                                  concurrency=c.concurrency, timeout_s=run.timeout,
                                  system_role=c.system_role, api_key_env=c.model.api_key_env)
            backend.check_config(GenerateConfig(reasoning=c.reasoning))
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"{sweep.path}: [[models]] {i} ({c.model.display_name}): {e}"
                             ) from None


def print_dry_run(sweep: Sweep, cells: Sequence[Cell], plans: dict[int, RunPlan],
                  done: dict[int, str]) -> None:
    """One row per cell (its plan, requests and whether a previous run finished it), then
    the sweep's total requests; nothing is created or sent."""
    from medpress.runner.estimate import estimate

    table = Table(title=f"dry run: {sweep.path} ({len(cells)} cells)")
    for col in ("cell", "model", "suite", "run directory",
                "dialogues × conditions × repeats", "requests", "status"):
        table.add_column(col, justify="right" if col in ("cell", "requests") else "left")
    total = left = turns = 0
    for c in cells:
        plan = plans[c.index]
        n = estimate(plan, c.model.spec).requests
        total += n
        left += 0 if c.index in done else n
        turns += n
        table.add_row(str(c.index), escape(c.model.display_name), c.suite_name,
                      escape(str(c.run_dir)),
                      f"{len(plan.dataset)} × {len(plan.conditions)} × {plan.repeats}",
                      f"{n:,}", "finished" if c.index in done else "to run")
    console.print(table)
    console.print(f"requests: {total:,} model requests in all, {left:,} in cells still to run "
                  f"(one per turn); judges: one verdict per generated turn for each judge of "
                  f"the cell ({sum(1 for j in sweep.config.judges if j.spec != 'embedded')} "
                  "LLM judge(s) send a request per verdict)")


def run_sweep(sweep: Sweep, cells: Sequence[Cell], done: dict[int, str], out_dir: Path,
              again: str) -> None:
    """Run the cells still to run in order, then write the report over every cell.

    Raises:
        typer.Exit: as ``run_generation`` and ``judge_store`` (1 for failed turns or a judge
            that judged nothing, 130 on Ctrl-C), after a line naming the cell it stopped at.
        ValueError: a cell's run refused (settings that differ from its stored run),
            prefixed with the cell.
    """
    from medpress.cli.evaluate import preflight_judges
    from medpress.store import StoreError

    todo = [c for c in cells if c.index not in done]
    console.print(f"sweep {escape(str(sweep.path))}: {len(cells)} cells → {escape(str(out_dir))}"
                  f" ({len(cells) - len(todo)} finished before, reused; {len(todo)} to run)",
                  highlight=False)
    for j in sweep.config.judges:  # a wrong judge URL fails now, not after the first cell
        if any(j in c.judges for c in todo):
            preflight_judges([j.spec], None if j.base_url is None else [j.base_url])
    views = dict(done)
    for c in cells:
        if c.index in done:
            console.print(f"cell {c.index}/{len(cells)}: {escape(c.label)}: finished before, "
                          "reused", highlight=False)
            continue
        try:
            views[c.index] = run_cell(sweep, c, len(cells), out_dir, again)
        except typer.Exit as e:
            if e.exit_code:
                err_console.print(escape(
                    f"sweep stopped at cell {c.index}/{len(cells)} ({c.label}); the cells "
                    f"before it are kept; run {again} to go on"), highlight=False)
            raise
        except (ValueError, StoreError) as e:
            raise ValueError(f"cell {c.index}/{len(cells)} ({c.label}): {e}") from None
    sweep_report(sweep, cells, views, out_dir)


def run_cell(sweep: Sweep, cell: Cell, n_cells: int, out_dir: Path, again: str) -> str:
    """Generate and judge one cell (resuming whatever it holds), record it finished, and
    return its judge view (``name@version,…``)."""
    from medpress.cli.evaluate import judge_store
    from medpress.cli.generate import prepare_run, run_generation
    from medpress.runner.sweep import mark_finished

    run = sweep.config.run
    console.rule(f"cell {cell.index}/{n_cells}: {escape(cell.label)} → "
                 f"{escape(str(cell.run_dir))}")
    dataset, ids, starter = cell_selection(sweep, cell)
    backend, store, plan, _ = prepare_run(
        cell.model.spec, list(cell.model.urls) or None, dataset, cell_conditions(cell),
        run.sample, ids, starter, cell.run_dir, cell.concurrency, cell.temperature,
        cell.max_tokens, run.repeats, cell.reasoning, run.seed, run.timeout, cell.system_role,
        cell.model.display_name, cell.suite, run.conditions_files,
        api_key_env=cell.model.api_key_env)
    try:
        run_generation(backend, store, plan, cell.concurrency, run.retry_failed,
                       run.allow_failed, again=again, next_step="; nothing was judged")
        views = []
        for j in cell.judges:  # one at a time: each with its own URL and settings
            for s in judge_store(store, [j.spec], None if j.base_url is None else [j.base_url],
                                 run.judge_concurrency, dataset, j.reasoning, j.max_tokens,
                                 run.judge_truncated, again=again):
                views.append(f"{s.judge}@{s.rubric_version}")
    finally:
        store.close()  # its locks go: the report reads the run as finished, not in progress
    view = ",".join(views)
    mark_finished(out_dir, cell, run, view)
    return view


def sweep_report(sweep: Sweep, cells: Sequence[Cell], views: dict[int, str],
                 out_dir: Path) -> list[Path]:
    """The report over every cell: one leaderboard (``<out>/report``) for a single suite;
    the two-axis leaderboard (``<out>/balance``) for medpress + twins (+ control); else one
    report per suite (``<out>/report-<suite>``). Prints each path and its leaderboard.

    Each suite's runs are read with their cells' judge view when every cell of the suite was
    judged alike, else with each run's only judge.
    """
    from medpress.cli.results import BALANCE_SUITES, make_report

    run = sweep.config.run
    by_suite: dict[str, list[Cell]] = {}
    for c in cells:
        by_suite.setdefault(c.suite_name, []).append(c)

    def view_of(group: Sequence[Cell]) -> str | None:
        seen = {views[c.index] for c in group}
        return seen.pop() if len(seen) == 1 and "" not in seen else None

    console.rule("report")
    balance = len(by_suite) > 1 and set(by_suite) <= set(BALANCE_SUITES) \
        and {"medpress", "twins"} <= set(by_suite)
    if len(by_suite) == 1 or balance:
        groups = [(list(cells), out_dir / ("balance" if balance else "report"))]
    else:
        groups = [(g, out_dir / f"report-{s}") for s, g in by_suite.items()]
    paths = []
    for group, where in groups:
        path = make_report([c.run_dir for c in group], where, view_of(group), n_boot=run.n_boot,
                           seed=run.seed, html=run.html)
        paths.append(path)
        for line in leaderboard_lines(path):
            console.print(escape(line), highlight=False, soft_wrap=True)
        console.print(f"report: [bold]{escape(str(path))}[/]")
    return paths


def leaderboard_lines(report: Path) -> list[str]:
    """The leaderboard table of a written report, as its markdown lines: report.md's
    Leaderboard section (several models) or Headline, or balance.md's table."""
    lines = report.read_text(encoding="utf-8").splitlines()
    for heading in ("## Leaderboard", "## Headline"):
        if heading in [x.split(":")[0].strip() for x in lines]:
            start = next(i for i, x in enumerate(lines) if x.split(":")[0].strip() == heading)
            body = lines[start + 1:]
            end = next((i for i, x in enumerate(body) if x.startswith("## ")), len(body))
            return [heading.removeprefix("## "), *(x for x in body[:end] if x.startswith("|"))]
    return [x for x in lines if x.startswith("|")]
