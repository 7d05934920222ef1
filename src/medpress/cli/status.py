"""``medpress status``: where a run stands, and the command to run next."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from medpress.cli.common import clean_errors, console
from medpress.store import RunStore, StoreError


@dataclass
class JudgeState:
    """One judge (name and rubric version) of a run."""

    judge: str
    rubric_version: str
    labelled: int
    unjudged: int
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class RunState:
    """What `run_state` finds in a run directory."""

    run_dir: str
    model: str | None
    name: str | None
    params: dict[str, Any]
    dataset: dict[str, Any]
    planned: int | None
    generated: int
    failed: dict[str, int]
    replies: dict[str, int]
    judges: list[JudgeState]
    next_steps: list[str]
    problem: str | None = None
    generating: dict[str, Any] | None = None
    """Who is generating the run right now (another process), or None."""

    @property
    def missing(self) -> int | None:
        failed = sum(self.failed.values())
        return None if self.planned is None else self.planned - self.generated - failed


def run_state(run_dir: Path, dataset: Path | None = None) -> RunState:
    """Read a run's state without changing it.

    ``planned`` is the number of turns the run asks for (dialogue turns × conditions × repeats);
    it is None, with ``problem`` saying why, when the run's dialogues cannot be found.

    Raises:
        StoreError: ``run_dir`` is not a run directory.
    """
    from medpress.judges import failure_kinds
    from medpress.runner import planned_turns, run_dataset

    store = RunStore.open_existing(run_dir)
    prov = store.provenance()
    params = prov.get("params") or {}
    ds_meta = {k: v for k, v in (prov.get("dataset") or {}).items() if k not in ("ids", "paths")}
    planned, problem = None, None
    try:
        ds = run_dataset(store, dataset)
        planned = planned_turns(params, ds)
    except StoreError as e:
        problem = str(e)
    failed = store.error_counts()
    generated = store.count_turns() - sum(failed.values())
    judges = []
    for name, version, labelled, unjudged in store.judgment_counts():
        reasons = failure_kinds(store, (name, version))
        judges.append(JudgeState(name, version, labelled, unjudged, dict(reasons.most_common())))
    state = RunState(str(run_dir), (prov.get("model") or {}).get("spec"), prov.get("name"),
                     params, ds_meta, planned, generated, failed, store.reply_issues(), judges,
                     [], problem, store.active("generate"))
    state.next_steps = next_steps(state)
    store.close()
    return state


def next_steps(s: RunState) -> list[str]:
    """The commands that move the run on, most urgent first."""
    steps = []
    n_failed = sum(s.failed.values())
    if s.generating is not None:
        steps.append(f"wait: pid {s.generating.get('pid')} on {s.generating.get('host')} is "
                     "still generating this run (judge, metrics, report and export work now, "
                     "on the turns stored so far)")
    if s.problem is not None:
        steps.append(f"medpress status {s.run_dir} --dataset PATH (the run's dialogues moved)")
    if s.missing and s.generating is None:
        steps.append(f"resume generation: the same `medpress generate` command with --run-dir "
                     f"{s.run_dir} ({s.missing} turn(s) to go)")
    if n_failed:
        steps.append(f"redo the {n_failed} failed turns: the same `medpress generate` command "
                     f"with --run-dir {s.run_dir} --retry-failed")
    if not s.judges:
        steps.append(f"medpress judge {s.run_dir} --judge SPEC")
    elif any(j.unjudged for j in s.judges):
        steps.append(f"judge the unjudged replies again: medpress judge {s.run_dir} --judge SPEC "
                     "(failed verdicts are retried)")
    if s.judges:
        steps.append(f"medpress report {s.run_dir}")
    return steps


def _print(s: RunState) -> None:
    gen = (s.params.get("generation") or {})
    console.rule(f"[bold]{escape(s.run_dir)}[/]")
    console.print(f"model: [bold]{escape(str(s.model))}[/]"
                  + (f"  name: {escape(s.name)}" if s.name else ""))
    console.print("parameters: " + escape(", ".join(f"{k} {v}" for k, v in gen.items()))
                  + f"; conditions {', '.join(s.params.get('conditions') or [])}; "
                  f"repeats {s.params.get('repeats')}")
    console.print(f"dataset: {escape(str(s.dataset.get('name')))} "
                  f"version {escape(str(s.dataset.get('version')))} "
                  f"({s.dataset.get('n_dialogues')} dialogues, hash "
                  f"{str(s.dataset.get('hash'))[:12]})")
    failed = sum(s.failed.values())
    kinds = ", ".join(f"{k} {n}" for k, n in s.failed.items())
    planned = "?" if s.planned is None else str(s.planned)
    console.print(f"turns: {s.generated} of {planned} generated, {failed} failed"
                  + (f" ({kinds})" if kinds else "")
                  + ("" if s.missing is None else f", {s.missing} not yet generated")
                  + f"; replies empty {s.replies.get('empty', 0)}, cut off at the token limit "
                  f"{s.replies.get('truncated', 0)}")
    if s.problem:
        console.print(f"[yellow]{escape(s.problem)}[/]")
    if not s.judges:
        console.print("judges: none yet")
    for j in s.judges:
        why = "; ".join(f"{n} {k}" for k, n in j.reasons.items())
        line = (f"judge {j.judge} [rubric {j.rubric_version}]: {j.labelled} labelled, "
                f"{j.unjudged} unjudged" + (f" ({why})" if why else ""))
        console.print(escape(line), highlight=False)
    for step in s.next_steps:
        console.print(f"next: {escape(step)}", highlight=False)


@clean_errors
def status_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories")],
    dataset: Annotated[Path | None, typer.Option(help="The runs' dialogues, if moved")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines")] = False,
) -> None:
    """Model, parameters, dataset, turns done / failed / missing, judges and what to run next."""
    for rd in run_dirs:
        state = run_state(rd, dataset)
        if as_json:
            print(json.dumps({**asdict(state), "missing": state.missing}))
        else:
            _print(state)
