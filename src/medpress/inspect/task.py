"""MedPRESS as an Inspect task: ``inspect eval medpress/medpress_task --model …``.

One :class:`~inspect_ai.dataset.Sample` per (dialogue, condition), id
``"<dialogue id>:<condition>"``. The solver replays the dialogue's fixed user turns, one
``generate`` per turn, each prompt built by :func:`medpress.conditions.build_messages` exactly
as ``medpress generate`` builds it (the condition's framing as the system message, or folded
into the first user message with ``system_role=False``); the model's own replies are the
history. Dialogues, conditions and selection come from the same code as ``medpress generate``
(:func:`medpress.cli.generate.build_plan`), so ``-T`` parameters mean what the CLI options of
the same name mean. Inspect's epochs are MedPRESS's repeats (repeat = epoch - 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    StopReason,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver

from medpress.conditions import Message, build_messages
from medpress.inspect.scorer import TURNS_KEY, medpress_scorer, suite_ref
from medpress.runner import RunPlan, Unit
from medpress.suites import DEFAULT_SUITE

__all__ = ["medpress_solver", "medpress_task", "plan_samples", "to_inspect"]

# MedPRESS's generation defaults (medpress.backends.GenerateConfig); Inspect's own
# --temperature, --max-tokens and --seed override them.
TEMPERATURE = 0.0
MAX_TOKENS = 384
# Inspect's stop reasons that mean max_tokens cut the reply: MedPRESS's finish reason "length".
_CUT_OFF: frozenset[StopReason] = frozenset({"max_tokens", "model_length"})


def to_inspect(messages: Sequence[Message]) -> list[ChatMessage]:
    """MedPRESS chat messages (``{"role", "content"}``) as Inspect chat messages.

    Raises:
        ValueError: a role other than system, user or assistant.
    """
    out: list[ChatMessage] = []
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "user":
            out.append(ChatMessageUser(content=content))
        elif role == "assistant":
            out.append(ChatMessageAssistant(content=content))
        else:
            raise ValueError(f"unknown chat role {role!r}")
    return out


def _names(value: str | Sequence[str] | None) -> list[str]:
    """A ``-T`` list, given as ``a,b`` or as a YAML list; none for None."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else map(str, value)
    return [v.strip() for v in items if v.strip()]


def plan_samples(plan: RunPlan, suite: str, *, system_role: bool = True) -> list[Sample]:
    """One sample per (dialogue, condition) of ``plan``'s first repeat, condition-major as
    ``medpress generate`` runs them. The input is the turn-1 prompt; the target is the card's
    safe stance (``""`` for a suite whose card has none); the metadata holds what the solver
    and scorer need (turns, condition text, card) and what a reader filters by (family,
    condition, suite)."""
    samples = []
    for unit in plan.units():
        if unit.repeat:
            continue  # Inspect's epochs repeat each sample
        samples.append(_sample(unit, suite, system_role))
    return samples


def _sample(unit: Unit, suite: str, system_role: bool) -> Sample:
    d, cond = unit.dialogue, unit.condition
    first = build_messages(cond.system, [(d.turns[0].text, None)], system_role=system_role)
    metadata: dict[str, Any] = {
        "dialogue_id": d.id, "family": d.family, "condition": cond.name, "suite": suite,
        "card": dict(d.card), "system": cond.system, "system_role": system_role,
        "turns": [{"pressure": t.pressure, "text": t.text} for t in d.turns]}
    return Sample(input=to_inspect(first), target=d.card.get("safe_stance", ""),
                  id=f"{d.id}:{cond.name}", metadata=metadata)


@solver
def medpress_solver() -> Solver:
    """Replay the sample's user turns, one ``generate`` per turn, under its condition.

    Each turn's prompt is :func:`medpress.conditions.build_messages` of the condition's text and
    the conversation so far; the messages it adds to those already in the state (the new user
    turn) are appended, so the replies stay the model's own messages. Each turn's user text,
    pressure, reply and finish reason (``length`` when max_tokens cut it) go to the sample's
    store under :data:`~medpress.inspect.scorer.TURNS_KEY` as they happen, so a sample stopped
    by a limit keeps the turns it had.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        meta = state.metadata
        users: list[str] = []
        replies: list[str] = []
        done: list[dict[str, Any]] = []
        for n, turn in enumerate(meta["turns"], 1):
            users.append(turn["text"])
            pairs: list[tuple[str, str | None]] = [
                (u, replies[i] if i < n - 1 else None) for i, u in enumerate(users)]
            msgs = build_messages(meta["system"], pairs, system_role=meta["system_role"])
            state.messages.extend(to_inspect(msgs[len(state.messages):]))
            state = await generate(state, tool_calls="none")
            if state.completed and len(state.messages) < len(msgs) + 1:
                break  # a limit ended the sample before this turn's reply
            out = state.output
            reply = out.completion
            usage = out.usage
            done.append({
                "turn": n, "pressure": turn["pressure"], "user": turn["text"], "reply": reply,
                "finish_reason": "length" if out.stop_reason in _CUT_OFF else out.stop_reason,
                "prompt_tokens": usage.input_tokens if usage else None,
                "completion_tokens": usage.output_tokens if usage else None})
            state.store.set(TURNS_KEY, done)
            replies.append(reply)
            if state.completed:
                break
        return state

    return solve


@task
def medpress_task(
    suite: str = DEFAULT_SUITE,
    conditions: str | Sequence[str] | None = None,
    sample: int | None = None,
    ids: str | Sequence[str] | None = None,
    starter: bool = False,
    seed: int = 0,
    dataset: str | None = None,
    conditions_file: str | Sequence[str] | None = None,
    judge: str = "embedded",
    judge_base_url: str | None = None,
    judge_truncated: bool = True,
    system_role: bool = True,
) -> Task:
    """MedPRESS: does a model keep safe medical advice under multi-turn patient pressure?

    Parameters (``-T name=value``) mean what ``medpress generate``/``judge`` options of the
    same name mean; selection applies ids, then starter, then sample:

    Args:
        suite: A shipped suite's name or a suite directory (default ``medpress``).
        conditions: Comma list (or list) of conditions; default the suite's (MedPRESS: all
            four). Defences (``rbed`` …) and ``conditions_file`` conditions are named alike.
        sample: A seeded sample of this many dialogues, stratified by family.
        ids: Comma list (or list) of dialogue ids.
        starter: The starter set (ten dialogues per family).
        seed: Seed of ``sample`` and of generation (Inspect's ``--seed`` overrides the latter).
        dataset: A dialogue file or directory instead of the shipped set (MedPRESS only).
        conditions_file: YAML file(s) of your own conditions.
        judge: The judge spec: ``embedded`` (default, the offline judge) or a model spec such
            as ``openai/<model>`` (with ``judge_base_url``).
        judge_base_url: Server of an ``openai/`` judge.
        judge_truncated: Judge replies cut off at max_tokens (default); False: unjudged.
        system_role: The model has a system role; False folds the framing into the first
            user message, as ``--no-system-role``.

    Generation defaults are MedPRESS's (temperature 0, max_tokens 384, seed ``seed``); Inspect's
    ``--temperature``/``--max-tokens``/``--seed`` override them. Epochs (default 1) are
    repeats; scores over epochs reduce by mode.

    Raises:
        ValueError: an unknown suite, condition, dialogue id or judge spec, or a bad sample
            size (the messages name the option).
        FileNotFoundError: ``embedded`` before the embedded judge was trained.
    """
    from medpress.backends import GenerateConfig as MedpressConfig
    from medpress.runner import build_plan, suite_conditions
    from medpress.suites import resolve_suite

    plan = build_plan(
        Path(dataset) if dataset else None,
        suite_conditions(None if conditions is None else _names(conditions), suite), sample,
        _names(ids), starter, seed, MedpressConfig(seed=seed), 1, suite,
        [Path(p) for p in _names(conditions_file)])
    the_suite = resolve_suite(suite)
    ref = suite_ref(the_suite)
    identity = {"dataset": {"name": plan.dataset.name, "version": plan.dataset.version,
                            "hash": plan.dataset.content_hash},
                "conditions": {c.name: c.text_hash for c in plan.conditions},
                "bases": dict(plan.bases or {}), "suite": plan.suite or {"name": ref}}
    return Task(
        dataset=MemoryDataset(plan_samples(plan, ref, system_role=system_role),
                              name=plan.dataset.name),
        solver=medpress_solver(),
        scorer=medpress_scorer(judge=judge, judge_base_url=judge_base_url, suite=ref,
                               judge_truncated=judge_truncated),
        config=GenerateConfig(temperature=TEMPERATURE, max_tokens=MAX_TOKENS, seed=seed),
        epochs=Epochs(1, "mode"),
        metadata={"medpress": identity},
    )
