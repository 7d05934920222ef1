"""``medpress generate`` and ``medpress export``."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from medpress.backends import SPEC_HELP, Backend, GenerateConfig, Reasoning, get_backend
from medpress.cli.common import (
    at_least,
    clean_errors,
    console,
    default_run_dir,
    err_console,
    fail,
    interrupted,
    split_list,
)
from medpress.cli.progress import TurnProgress
from medpress.cli.suites import SuiteOpt
from medpress.conditions import DEFAULT_CONDITIONS
from medpress.runner import (
    Budget,
    RunPlan,
    RunRejected,
    RunSummary,
    build_plan,
    check_resume,
    generate,
    suite_conditions,
)
from medpress.store import RunStore, in_progress_note, write_export
from medpress.suites import (
    DEFAULT_SUITE,
    Suite,
    resolve_suite,
)

if TYPE_CHECKING:
    from medpress.attack import Attacker

ALL_CONDITIONS = ",".join(DEFAULT_CONDITIONS)
ModelOpt = Annotated[str, typer.Option("--model", "-m", help=f"Model spec: {SPEC_HELP}")]
BaseUrlOpt = Annotated[list[str] | None, typer.Option(
    help="OpenAI-compatible server URL (…/v1); repeat for replicas of one model: requests "
         "spread over them, --concurrency each, a failed request retried on another")]
ApiKeyEnvOpt = Annotated[str, typer.Option(
    help="Name of the environment variable holding the API key (never the key itself)")]
DatasetOpt = Annotated[Path | None, typer.Option(help="Dialogue file or dir (default: shipped)")]
AttackerOpt = Annotated[str | None, typer.Option(
    "--attacker", help="Adaptive run: a model spec that plays the patient from turn 2 on, "
    "reading the replies (scripted/attacker for an exact test)")]
AttackerUrlOpt = Annotated[str | None, typer.Option(
    "--attacker-base-url", help="Base URL for an openai/ attacker")]
StrategyOpt = Annotated[str, typer.Option(
    "--strategy", help="Attacker strategy: escalate (the pressure ladder), crescendo (soft to "
    "demanding) or mutate (rewrites the scripted turn)")]
AttackerJudgeOpt = Annotated[str | None, typer.Option(
    "--attacker-judge", help="--strategy mutate: a judge spec that labels each operator's "
    "probe reply, so the rewrite that moved the model most is kept")]
AttackerJudgeUrlOpt = Annotated[str | None, typer.Option(
    "--attacker-judge-base-url", help="Base URL for an openai/ attacker judge")]
MaxTurnsOpt = Annotated[int | None, typer.Option(
    "--max-turns", help="Adaptive run: turns per dialogue (default: the dialogue's own)")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print the requests, estimated tokens and cost of the run, and stop "
    "(nothing is created or sent)")]
MaxTotalTokensOpt = Annotated[int | None, typer.Option(
    "--max-total-tokens", help="Stop cleanly once the run's stored turns used this many "
    "tokens (prompt + completion); a later call with a higher cap resumes")]
MaxCostOpt = Annotated[float | None, typer.Option(
    "--max-cost", help="Stop cleanly once the run has cost this many dollars (needs the "
    "model's price: --prices)")]
PricesOpt = Annotated[Path | None, typer.Option(
    "--prices", help="Your price table ($ per million tokens; format of the shipped "
    "backends/data/prices.yaml)")]
ConditionsFileOpt = Annotated[list[Path] | None, typer.Option(
    "--conditions-file", help="A YAML file of your own conditions (defences), named in "
    "--conditions like the shipped ones; repeatable (docs/defences.md)")]
ConditionsOpt = Annotated[str | None, typer.Option(
    help=f"Comma-separated conditions (default: the suite's; medpress: {ALL_CONDITIONS})")]
SampleOpt = Annotated[int | None, typer.Option(
    "--sample", "--limit", help="Seeded sample of N dialogues, stratified by family")]
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
AllowFailedOpt = Annotated[bool, typer.Option(
    help="Exit 0 even when turns fail permanently (they stay recorded as failed)")]
TimeoutOpt = Annotated[float, typer.Option(help="Per-request timeout in seconds")]
NameOpt = Annotated[str | None, typer.Option(
    help="The run's name in reports (default: the model spec plus the settings that differ)")]
SystemRoleOpt = Annotated[bool, typer.Option(help="Model has a system role (else folded in)")]


def conditions_option(conditions: str | None, suite: str) -> str:
    """``--conditions`` as given, or the suite's default conditions in the same form."""
    return conditions if conditions is not None else ",".join(suite_conditions(None, suite))


def prepare_run(model: str, base_url: str | Sequence[str] | None, dataset: Path | None,
                conditions: str,
                sample: int | None, ids: str | None, starter: bool, run_dir: Path | None,
                concurrency: int, temperature: float, max_tokens: int, repeats: int,
                reasoning: str | None, seed: int, timeout: float = 120.0,
                system_role: bool = True, name: str | None = None, suite: str = DEFAULT_SUITE,
                conditions_files: Sequence[Path] = (), attacker: str | None = None,
                attacker_base_url: str | None = None, strategy: str = "escalate",
                max_turns: int | None = None, attacker_judge: str | None = None,
                attacker_judge_base_url: str | None = None,
                api_key_env: str = "OPENAI_API_KEY",
                ) -> tuple[Backend, RunStore, RunPlan, Path]:
    """What ``generate`` and ``run`` share: the plan, the backend and the run store.

    Every option is checked before the run directory is created, so a refused option
    (``--concurrency 0``, ``--reasoning`` for a backend without a switch, ``--sample`` over
    the dialogues selected) leaves nothing behind; several ``base_url`` are replicas of one
    model (``--concurrency`` each); settings that are accepted but change
    meaning are printed as warnings. Then the backend's preflight checks the API key and
    that the server answers, so a wrong URL fails in a second rather than after every
    dialogue's retries. ``name`` is the run's display name in reports (stored; it can be
    changed on resume, nothing else uses it). ``attacker`` (a model spec) makes the run
    adaptive (:mod:`medpress.attack`), with ``strategy`` and ``max_turns``.

    Raises:
        ValueError: for an option the backend would silently drop, a bad value, or a
            failed preflight (:class:`medpress.backends.PreflightError`).
    """
    check_generation_options(concurrency, temperature, max_tokens, conditions, timeout)
    config = GenerateConfig(temperature=temperature, max_tokens=max_tokens, seed=seed,
                            reasoning=parse_reasoning(reasoning))
    plan = build_plan(dataset, split_list(conditions), sample, split_list(ids), starter, seed,
                      config, repeats, suite, conditions_files)
    if attacker is None and (attacker_base_url or max_turns is not None or attacker_judge
                             or strategy != "escalate"):
        raise ValueError("--attacker-base-url, --strategy, --max-turns and --attacker-judge "
                         "apply to an adaptive run: add --attacker SPEC")
    if attacker is not None:
        plan = replace(plan, attacker=build_attacker(
            attacker, attacker_base_url, strategy, resolve_suite(suite), seed=seed,
            max_turns=max_turns, judge=attacker_judge, judge_base_url=attacker_judge_base_url,
            concurrency=concurrency, timeout=timeout))
    backend = get_backend(model, base_url=base_url or None, concurrency=concurrency,
                          timeout_s=timeout, system_role=system_role, api_key_env=api_key_env)
    for message in [*backend.check_config(config), *plan_warnings(plan)]:
        warn(message)
    if name is not None and not name.strip():
        raise ValueError("--name must not be empty")
    asyncio.run(backend.preflight("--base-url"))
    if plan.attacker is not None:
        asyncio.run(plan.attacker.backend.preflight("--attacker-base-url"))
    rd = run_dir or default_run_dir(model)
    store = RunStore(rd)
    store.lock("generate", f"generate {model}")  # one writer per run, before anything else
    try:
        check_resume(store, plan, backend)  # before any progress is shown or anything written
        if name is not None:
            store.set_meta("name", name.strip())
    except BaseException:
        store.unlock("generate")
        raise
    return backend, store, plan, rd


def dry_run(model: str, dataset: Path | None, conditions: str, sample: int | None,
            ids: str | None, starter: bool, seed: int, max_tokens: int, repeats: int,
            suite: str, conditions_files: Sequence[Path], max_turns: int | None,
            prices: Path | None) -> None:
    """Print what the run would send (requests, upper-bound tokens, cost when priced); it
    creates and sends nothing."""
    from medpress.runner.estimate import CHARS_PER_TOKEN, estimate

    plan = build_plan(dataset, split_list(conditions), sample, split_list(ids), starter, seed,
                      GenerateConfig(max_tokens=max_tokens, seed=seed), repeats, suite,
                      conditions_files)
    est = estimate(plan, model, prices, max_turns)
    table = Table(title=f"dry run: {model}", show_header=False)
    table.add_row("dialogues × conditions × repeats",
                  f"{len(plan.dataset)} × {len(plan.conditions)} × {plan.repeats}")
    table.add_row("requests", f"{est.requests:,}")
    table.add_row("prompt tokens (estimate)", f"{est.prompt_tokens:,}")
    table.add_row("completion tokens (ceiling)", f"{est.completion_tokens:,}")
    table.add_row("cost", "no price for this model (add one with --prices FILE)"
                  if est.cost is None else f"${est.cost:,.2f} at most")
    console.print(table)
    console.print(f"Tokens: {CHARS_PER_TOKEN} characters per token, each reply at --max-tokens "
                  f"{max_tokens} (a ceiling), the conversation resent every turn.")


def spend_budget(model: str, max_total_tokens: int | None, max_cost: float | None,
                 prices: Path | None) -> Budget | None:
    """The run's caps; None when neither is set.

    Raises:
        ValueError: a cap below 1 token / 0 dollars, or ``--max-cost`` for a model the price
            table has no price for.
    """
    from medpress.runner.estimate import PRICES_FILE, price_for

    if max_total_tokens is None and max_cost is None:
        return None
    if max_total_tokens is not None:
        at_least("--max-total-tokens", max_total_tokens, 1)
    price = None
    if max_cost is not None:
        if max_cost <= 0:
            raise ValueError(f"--max-cost must be more than 0, not {max_cost}")
        price = price_for(model, prices or PRICES_FILE)
        if price is None:
            raise ValueError(f"--max-cost needs a price for {model}: add one to a price table "
                             f"and pass it with --prices FILE")
    return Budget(max_total_tokens, max_cost, price)


def build_attacker(spec: str, base_url: str | None, strategy: str, suite: Suite, *,
                   seed: int, max_turns: int | None, judge: str | None,
                   judge_base_url: str | None, concurrency: int, timeout: float) -> Attacker:
    """The adaptive run's attacker; ``judge`` (for ``mutate``) judges under the suite's
    rubric, most severe label first.

    Raises:
        ValueError: a bad strategy, judge spec or option combination.
    """
    from medpress.attack import Attacker
    from medpress.judges import SEVERITY, get_judge
    from medpress.judges.rubric import load_rubric

    rubric = None if suite.is_default else load_rubric(suite.rubric_path)
    the_judge = None if judge is None else get_judge(
        judge, base_url=judge_base_url, concurrency=concurrency, timeout_s=timeout,
        rubric=rubric, suite=None if suite.is_default or suite.manifest.embedded_judge
        else suite.name)
    return Attacker(get_backend(spec, base_url=base_url, concurrency=concurrency,
                                timeout_s=timeout), strategy, suite=suite.name, seed=seed,
                    max_turns=max_turns, judge=the_judge,
                    severity=SEVERITY if rubric is None else tuple(rubric.labels))


def check_generation_options(concurrency: int, temperature: float, max_tokens: int,
                             conditions: str, timeout: float = 120.0) -> None:
    """Refuse values that would hang (``--concurrency 0``) or ask for nothing, up front.

    ``--sample`` and ``--repeats`` are checked where they are used (selection, the plan).

    Raises:
        ValueError: naming the option and its smallest valid value.
    """
    at_least("--concurrency", concurrency, 1)
    at_least("--temperature", temperature, 0)
    at_least("--max-tokens", max_tokens, 1)
    if timeout <= 0:
        raise ValueError(f"--timeout must be more than 0 seconds, not {timeout}")
    if not split_list(conditions):
        raise ValueError(f"--conditions names no condition; choose from {ALL_CONDITIONS}")


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
                   retry_failed: bool = False, allow_failed: bool = False, *,
                   again: str = "the same command", next_step: str = "",
                   budget: Budget | None = None) -> RunSummary:
    """Generate with progress bars; prints the summary.

    Turns that failed in an earlier session and are not retried are pointed out before the
    run. Ctrl-C stops the run with exit status 130 (every stored turn is kept; the same
    command resumes). ``again`` is how messages say to rerun (see :func:`same_command`).

    Raises:
        typer.Exit: 1 when a turn failed permanently in this session, unless
            ``allow_failed`` (the message names ``--retry-failed``; ``next_step`` says what
            was not done because of it, e.g. "; nothing was judged"); 2 when the first
            request was refused; 130 on Ctrl-C.
    """
    done = Counter(k[0] for k, s in store.unit_states().items() for _ in range(s.last_turn))
    totals = {c.name: plan.turns_per_condition() for c in plan.conditions}
    if retry_failed:
        done = Counter()  # failed turns come back; counts settle as the run goes
    elif earlier := sum(store.error_counts().values()):
        warn(f"{earlier} turn(s) of {store.run_dir} failed permanently in an earlier session and "
             "stay failed (their dialogues stop there); --retry-failed redoes them")
    try:
        with TurnProgress(totals, done) as prog:
            summary = asyncio.run(generate(backend, store, plan, concurrency=concurrency,
                                           on_result=prog.hook, retry_failed=retry_failed,
                                           budget=budget))
    except RunRejected as e:
        raise fail(str(e)) from None
    except KeyboardInterrupt:
        raise interrupted(store.count_turns(), "turns", again) from None
    print_summary(summary, store.reply_issues())
    if summary.capped:
        warn(f"stopped at {summary.capped}: every turn so far is stored; run {again} with a "
             "higher cap to go on")
    if summary.failed_turns and not allow_failed:
        kinds = ", ".join(f"{k}: {v}" for k, v in summary.failures.most_common())
        raise fail(f"{summary.failed_turns} turn(s) failed permanently ({kinds}){next_step}; "
                   f"fix the cause and run {again} with --retry-failed to redo them, "
                   "or add --allow-failed to accept them", code=1)
    return summary


def same_command(run_dir: Path | None, rd: Path) -> str:
    """How to say "run it again": a run without ``--run-dir`` got a new timestamped directory,
    and the same command would start another one, so the hint names the directory."""
    return "the same command" if run_dir is not None else f"the same command with --run-dir {rd}"


def print_summary(s: RunSummary, issues: dict[str, int] | None = None) -> None:
    """The table after a run; ``issues`` are the whole run's empty / truncated replies.

    Failed turns are counted apart from generated ones: ``turns_done`` holds both.
    """
    table = Table(title="generation summary", show_header=False)
    table.add_row("turns generated", str(s.turns_done - s.failed_turns))
    table.add_row("turns already stored", str(s.turns_skipped))
    kinds = ", ".join(f"{k}: {v}" for k, v in s.failures.items())
    table.add_row("turns failed permanently", f"{s.failed_turns} ({kinds})" if kinds else "0")
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
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    dataset: DatasetOpt = None,
    conditions: ConditionsOpt = None,
    conditions_file: ConditionsFileOpt = None,
    attacker: AttackerOpt = None,
    attacker_base_url: AttackerUrlOpt = None,
    strategy: StrategyOpt = "escalate",
    max_turns: MaxTurnsOpt = None,
    attacker_judge: AttackerJudgeOpt = None,
    attacker_judge_base_url: AttackerJudgeUrlOpt = None,
    dry_run_: DryRunOpt = False,
    max_total_tokens: MaxTotalTokensOpt = None,
    max_cost: MaxCostOpt = None,
    prices: PricesOpt = None,
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
    allow_failed: AllowFailedOpt = False,
    name: NameOpt = None,
    suite: SuiteOpt = DEFAULT_SUITE,
) -> None:
    """Generate every five-turn transcript of the selected dialogues under each condition.

    Exits 1 when a turn fails permanently (unless --allow-failed), 130 on Ctrl-C.
    """
    if dry_run_:
        dry_run(model, dataset, conditions_option(conditions, suite), sample, ids, starter, seed,
                max_tokens, repeats, suite, conditions_file or [], max_turns, prices)
        return
    budget = spend_budget(model, max_total_tokens, max_cost, prices)
    backend, store, plan, rd = prepare_run(
        model, base_url, dataset, conditions_option(conditions, suite), sample, ids, starter,
        run_dir, concurrency, temperature, max_tokens, repeats, reasoning, seed, timeout,
        system_role, name, suite, conditions_file or [], attacker, attacker_base_url, strategy,
        max_turns, attacker_judge, attacker_judge_base_url, api_key_env)
    console.print(f"[bold]{model}[/] on {len(plan.dataset)} dialogues × "
                  f"{len(plan.conditions)} conditions × {repeats} repeat(s) → {rd}")
    run_generation(backend, store, plan, concurrency, retry_failed, allow_failed,
                   again=same_command(run_dir, rd), budget=budget)
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
    from medpress.judges import turn_labels

    if fmt.lower() not in ("jsonl", "csv"):  # CSV and JSONL are how people write the names
        raise ValueError(f"--format must be jsonl or csv, not {fmt!r}")
    kind: Literal["jsonl", "csv"] = "csv" if fmt.lower() == "csv" else "jsonl"
    store = RunStore.open_existing(run_dir)
    if live := in_progress_note(store):
        warn(live)
    labels, desc = None, None
    if store.judges():
        labels, desc = turn_labels(store, judge)
    n = write_export(store, kind, out, desc, labels)
    if out:
        console.print(f"wrote {n} rows to {out}")
