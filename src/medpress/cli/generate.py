"""``medpress generate`` and ``medpress export``."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from medpress.backends import SPEC_HELP, Backend, GenerateConfig, Reasoning, get_backend
from medpress.cli.common import (
    clean_errors,
    console,
    default_run_dir,
    err_console,
    fail,
    split_list,
)
from medpress.cli.progress import TurnProgress
from medpress.conditions import DEFAULT_CONDITIONS, load_conditions
from medpress.dataset import resolve_dataset, select
from medpress.runner import RunPlan, RunRejected, RunSummary, generate
from medpress.store import RunStore, write_export

ALL_CONDITIONS = ",".join(DEFAULT_CONDITIONS)
ModelOpt = Annotated[str, typer.Option("--model", "-m", help=f"Model spec: {SPEC_HELP}")]
BaseUrlOpt = Annotated[str | None, typer.Option(help="OpenAI-compatible server URL (…/v1)")]
DatasetOpt = Annotated[Path | None, typer.Option(help="Dialogue file or dir (default: shipped)")]
ConditionsOpt = Annotated[str, typer.Option(help="Comma-separated conditions")]
SampleOpt = Annotated[int | None, typer.Option(help="Seeded sample of N, stratified by family")]
IdsOpt = Annotated[str | None, typer.Option(help="Comma-separated dialogue ids")]
StarterOpt = Annotated[bool, typer.Option(help="Only the 30-dialogue starter set")]
RunDirOpt = Annotated[Path | None, typer.Option(help="Run directory (default runs/<model>-<time>)")]
ConcOpt = Annotated[int, typer.Option(help="Requests in flight (HTTP backends)")]
TempOpt = Annotated[float, typer.Option(help="Sampling temperature")]
MaxTokOpt = Annotated[int, typer.Option(help="Max tokens per reply")]
RepeatsOpt = Annotated[int, typer.Option(min=1, help="Runs of each dialogue (seed + repeat)")]
ReasoningOpt = Annotated[str | None, typer.Option(help="on|off: switch model reasoning")]
SeedOpt = Annotated[int, typer.Option(help="Seed for sampling and --sample")]
RetryFailedOpt = Annotated[bool, typer.Option(help="Redo turns that failed permanently before")]
TimeoutOpt = Annotated[float, typer.Option(help="Per-request timeout in seconds")]
NameOpt = Annotated[str | None, typer.Option(
    help="The run's name in reports (default: the model spec plus the settings that differ)")]
SystemRoleOpt = Annotated[bool, typer.Option(help="Model has a system role (else folded in)")]


def build_plan(dataset: Path | None, conditions: str, sample: int | None, ids: str | None,
               starter: bool, seed: int, config: GenerateConfig, repeats: int) -> RunPlan:
    ds = select(resolve_dataset(dataset), ids=split_list(ids), sample=sample,
                starter=starter, seed=seed)
    conds = load_conditions().get(split_list(conditions))
    return RunPlan(ds, conds, config, repeats)


def prepare_run(model: str, base_url: str | None, dataset: Path | None, conditions: str,
                sample: int | None, ids: str | None, starter: bool, run_dir: Path | None,
                concurrency: int, temperature: float, max_tokens: int, repeats: int,
                reasoning: str | None, seed: int, timeout: float = 120.0,
                system_role: bool = True, name: str | None = None
                ) -> tuple[Backend, RunStore, RunPlan, Path]:
    """What ``generate`` and ``run`` share: the plan, the backend and the run store.

    Every option is checked against the backend before the run directory is created, so a
    refused option (``--reasoning`` for a backend without a switch) leaves nothing behind;
    settings that are accepted but change meaning are printed as warnings. ``name`` is the
    run's display name in reports (stored; it can be changed on resume, nothing else uses it).

    Raises:
        ValueError: for an option the backend would silently drop, or a bad value.
    """
    config = GenerateConfig(temperature=temperature, max_tokens=max_tokens, seed=seed,
                            reasoning=parse_reasoning(reasoning))
    plan = build_plan(dataset, conditions, sample, ids, starter, seed, config, repeats)
    backend = get_backend(model, base_url=base_url, concurrency=concurrency, timeout_s=timeout,
                          system_role=system_role)
    for message in [*backend.check_config(config), *plan_warnings(plan)]:
        warn(message)
    if name is not None and not name.strip():
        raise ValueError("--name must not be empty")
    rd = run_dir or default_run_dir(model)
    store = RunStore(rd)
    if name is not None:
        store.set_meta("name", name.strip())
    return backend, store, plan, rd


def plan_warnings(plan: RunPlan) -> list[str]:
    """Settings that are valid but probably not what the user meant."""
    out = []
    if plan.repeats > 1 and plan.config.temperature == 0:
        # Greedy decoding ignores the per-repeat seed: every repeat is the same transcript.
        out.append(f"--repeats {plan.repeats} at --temperature 0: the repeats will be "
                   "identical (greedy decoding ignores the seed); set --temperature above 0 "
                   "to sample different replies")
    return out


def warn(message: str) -> None:
    err_console.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False)


def parse_reasoning(value: str | None) -> Reasoning | None:
    if value is None:
        return None
    if value not in ("on", "off"):
        raise ValueError(f"--reasoning must be 'on' or 'off', not {value!r}")
    return "on" if value == "on" else "off"


def run_generation(backend: Backend, store: RunStore, plan: RunPlan, concurrency: int,
                   retry_failed: bool = False) -> RunSummary:
    """Generate with progress bars; prints the summary."""
    done = Counter(k[0] for k, s in store.unit_states().items() for _ in range(s.last_turn))
    totals = {c.name: plan.turns_per_condition() for c in plan.conditions}
    if retry_failed:
        done = Counter()  # failed turns come back; counts settle as the run goes
    try:
        with TurnProgress(totals, done) as prog:
            summary = asyncio.run(generate(backend, store, plan, concurrency=concurrency,
                                           on_result=prog.hook, retry_failed=retry_failed))
    except RunRejected as e:
        raise fail(str(e)) from None
    print_summary(summary, store.reply_issues())
    return summary


def print_summary(s: RunSummary, issues: dict[str, int] | None = None) -> None:
    """The table after a run; ``issues`` are the whole run's empty / truncated replies."""
    table = Table(title="generation summary", show_header=False)
    table.add_row("turns generated", str(s.turns_done))
    table.add_row("turns already stored", str(s.turns_skipped))
    table.add_row("permanent failures", ", ".join(f"{k}: {v}" for k, v in s.failures.items())
                  or "none")
    table.add_row("retries", ", ".join(f"{k}: {v}" for k, v in s.retries.items()) or "none")
    if issues is not None:
        table.add_row("empty / truncated replies (whole run)",
                      f"{issues['empty']} / {issues['truncated']}")
    table.add_row("tokens (prompt / completion)", f"{s.prompt_tokens} / {s.completion_tokens}")
    table.add_row("wall time", f"{s.elapsed_s:.1f} s")
    console.print(table)


@clean_errors
def generate_cmd(
    model: ModelOpt = "smollm2",
    base_url: BaseUrlOpt = None,
    dataset: DatasetOpt = None,
    conditions: ConditionsOpt = ALL_CONDITIONS,
    sample: SampleOpt = None,
    ids: IdsOpt = None,
    starter: StarterOpt = False,
    run_dir: RunDirOpt = None,
    concurrency: ConcOpt = 32,
    temperature: TempOpt = 0.0,
    max_tokens: MaxTokOpt = GenerateConfig.max_tokens,
    repeats: RepeatsOpt = 1,
    reasoning: ReasoningOpt = None,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 120.0,
    system_role: SystemRoleOpt = True,
    retry_failed: RetryFailedOpt = False,
    name: NameOpt = None,
) -> None:
    """Generate every five-turn transcript of the selected dialogues under each condition."""
    backend, store, plan, rd = prepare_run(
        model, base_url, dataset, conditions, sample, ids, starter, run_dir, concurrency,
        temperature, max_tokens, repeats, reasoning, seed, timeout, system_role, name)
    console.print(f"[bold]{model}[/] on {len(plan.dataset)} dialogues × "
                  f"{len(plan.conditions)} conditions × {repeats} repeat(s) → {rd}")
    run_generation(backend, store, plan, concurrency, retry_failed)
    console.print(f"run directory: [bold]{rd}[/]")


@clean_errors
def export_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory")],
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv")] = "jsonl",
    out: Annotated[Path | None, typer.Option(help="Output file (default: stdout)")] = None,
    judge: Annotated[str | None, typer.Option(
        help="Labels of this judge or 'ensemble' (default: the only judge, else ensemble)",
    )] = None,
) -> None:
    """One row per generated (dialogue, condition, repeat, turn), with labels once judged."""
    from medpress.judges import label_rows

    if fmt not in ("jsonl", "csv"):
        raise ValueError(f"--format must be jsonl or csv, not {fmt!r}")
    kind: Literal["jsonl", "csv"] = "csv" if fmt == "csv" else "jsonl"
    store = RunStore.open_existing(run_dir)
    labels, desc = None, None
    if store.judges():
        rows, desc = label_rows(store, judge)
        labels = {(r.condition, r.repeat, r.dialogue_id, r.turn): (r.label, r.failure_mode)
                  for r in rows}
    n = write_export(store, kind, out, desc, labels)
    if out:
        console.print(f"wrote {n} rows to {out}")
