"""``medpress run``: generate, judge, measure and report in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medpress.backends import GenerateConfig
from medpress.cli.common import clean_errors, console
from medpress.cli.evaluate import (
    JudgeConcOpt,
    JudgeMaxTokOpt,
    JudgeOpt,
    JudgeReasoningOpt,
    JudgeTruncOpt,
    JudgeUrlOpt,
    check_judge_options,
    check_judge_settings,
    judge_store,
    preflight_judges,
)
from medpress.cli.generate import (
    AllowFailedOpt,
    ApiKeyEnvOpt,
    AttackerJudgeOpt,
    AttackerJudgeUrlOpt,
    AttackerOpt,
    AttackerUrlOpt,
    BaseUrlOpt,
    ConcOpt,
    ConditionsFileOpt,
    ConditionsOpt,
    DatasetOpt,
    DryRunOpt,
    IdsOpt,
    MaxCostOpt,
    MaxTokOpt,
    MaxTotalTokensOpt,
    MaxTurnsOpt,
    ModelOpt,
    NameOpt,
    PricesOpt,
    ReasoningOpt,
    RepeatsOpt,
    RetryFailedOpt,
    RunDirOpt,
    SampleOpt,
    SeedOpt,
    StarterOpt,
    StrategyOpt,
    SystemRoleOpt,
    TempOpt,
    TimeoutOpt,
    conditions_option,
    dry_run,
    prepare_run,
    run_generation,
    same_command,
    spend_budget,
)
from medpress.cli.results import make_report, print_labels, print_table, rows_from_runs
from medpress.cli.suites import DEFAULT_SUITE, SuiteOpt


@clean_errors
def run_cmd(
    judge: JudgeOpt,
    model: ModelOpt = "smollm2",
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    judge_base_url: JudgeUrlOpt = None,
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
    judge_concurrency: JudgeConcOpt = 16,
    temperature: TempOpt = 0.0,
    max_tokens: MaxTokOpt = GenerateConfig.max_tokens,
    repeats: RepeatsOpt = 1,
    reasoning: ReasoningOpt = None,
    seed: SeedOpt = 0,
    timeout: TimeoutOpt = 120.0,
    system_role: SystemRoleOpt = True,
    out: Annotated[Path | None, typer.Option(help="Report folder (default RUN_DIR/report)")] = None,
    judge_reasoning: JudgeReasoningOpt = None,
    judge_max_tokens: JudgeMaxTokOpt = None,
    judge_truncated: JudgeTruncOpt = True,
    retry_failed: RetryFailedOpt = False,
    allow_failed: AllowFailedOpt = False,
    name: NameOpt = None,
    html: Annotated[bool, typer.Option(
        "--html", help="Also write report.html (results and every transcript in one page)")
    ] = False,
    suite: SuiteOpt = DEFAULT_SUITE,
) -> None:
    """Generate → judge → report, then print the headline table and the report path.

    Stops with exit 1 before judging when a turn failed permanently (unless --allow-failed)
    or when a judge could judge nothing; 130 on Ctrl-C (the same command resumes).
    """
    if dry_run_:
        dry_run(model, dataset, conditions_option(conditions, suite), sample, ids, starter, seed,
                max_tokens, repeats, suite, conditions_file or [], max_turns, prices)
        return
    budget = spend_budget(model, max_total_tokens, max_cost, prices)
    # every judge option before any generation: a typo must not cost a whole run
    check_judge_options(judge, judge_base_url, judge_concurrency, "--judge-concurrency")
    check_judge_settings(judge, judge_reasoning, judge_max_tokens)
    preflight_judges(judge, judge_base_url)
    backend, store, plan, rd = prepare_run(
        model, base_url, dataset, conditions_option(conditions, suite), sample, ids, starter,
        run_dir, concurrency, temperature, max_tokens, repeats, reasoning, seed, timeout,
        system_role, name, suite, conditions_file or [], attacker, attacker_base_url, strategy,
        max_turns, attacker_judge, attacker_judge_base_url, api_key_env)
    console.rule(f"1/3 generate: {model}, {len(plan.dataset)} dialogues → {rd}")
    again = same_command(run_dir, rd)
    run_generation(backend, store, plan, concurrency, retry_failed, allow_failed,
                   again=again, next_step="; nothing was judged", budget=budget)
    console.rule("2/3 judge")
    summaries = judge_store(store, judge, judge_base_url, judge_concurrency, dataset,
                            judge_reasoning, judge_max_tokens, judge_truncated, again=again)
    console.rule("3/3 report")
    # The judges of this command, not whatever else the run directory holds.
    view = ",".join(f"{s.judge}@{s.rubric_version}" for s in summaries)
    runs = rows_from_runs([rd], view, dataset)
    print_labels(runs)
    print_table(runs, store, seed)
    path = make_report([rd], out, view, seed=seed, runs=runs, html=html)
    console.print(f"report: [bold]{path}[/]")
    if html:
        console.print(f"report: [bold]{path.with_name('report.html')}[/]")
