"""Generation: every unit turn by turn, resumable, keeping the backend saturated.

Concurrent backends get ``concurrency`` requests in flight (per replica) and twice as many
workers, each carrying one dialogue from turn to turn: a dialogue asks its next turn as soon as
its reply is stored, with no per-turn barrier, and while one worker stores a reply another's
request is already waiting for the freed slot (``bench/latency_bound.py``: 0.85 → 0.98–1.06 of a
bare aiohttp loop). Batch engines get every pending request of turn ``t`` at once. Either way
each reply is committed before the next turn of its dialogue is asked, so a crash loses only
requests in flight.

A run whose very first reply, to a turn-1 request, is a non-retryable rejection (bad model
name, a parameter the model refuses, a missing key) stops scheduling at once and raises
:class:`RunRejected`: the same request sent 600 times would fail 600 dialogues at turn 1.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

from medpress.attack import AttackTurn
from medpress.backends import Backend, ChatRequest, ChatResult
from medpress.conditions import build_messages
from medpress.runner.plan import RunPlan, Unit, dataset_difference, resume_settings
from medpress.store import RunStore, StoreError, UnitState, reply_issue

ResultHook = Callable[[str, ChatResult], None]
# Dialogues in progress per request slot: the spare one has its request queued while the
# other stores its reply, so no slot idles on bookkeeping.
WORKERS_PER_SLOT = 2
# Errors that the same request would meet again however often it is sent.
REJECTED_KINDS = frozenset({"http_400", "http_401", "http_403", "http_404", "http_422"})


class RunRejected(RuntimeError):
    """The first request of a run was refused for good; nothing more was scheduled.

    The refused turns are not stored, so the same command resumes the run once the cause
    (model name, parameters, API key) is fixed.
    """

    def __init__(self, result: ChatResult, spec: str) -> None:
        self.result = result
        super().__init__(
            f"{spec} refused the run's first request ({result.error_kind}): {result.error}. "
            "No further requests were sent; check the model name, the options and the API "
            "key, then run the same command again to resume.")


@dataclass(frozen=True)
class Budget:
    """Caps on a run's spend, over every stored turn of the run (so a later call with a higher
    cap resumes): total tokens (prompt + completion, as the server reports them) and cost from
    ``price`` ($ per million ``input`` / ``output`` tokens). Checked before each request; the
    requests in flight when a cap is reached finish and are stored."""

    max_total_tokens: int | None = None
    max_cost: float | None = None
    price: dict[str, float] | None = None

    def reached(self, prompt: int, completion: int) -> str | None:
        """Which cap ``prompt``/``completion`` tokens reach, as a phrase; None below both."""
        if self.max_total_tokens is not None and prompt + completion >= self.max_total_tokens:
            return f"--max-total-tokens {self.max_total_tokens} ({prompt + completion} used)"
        if self.max_cost is not None and self.price is not None:
            cost = (prompt * self.price["input"] + completion * self.price["output"]) / 1e6
            if cost >= self.max_cost:
                return f"--max-cost {self.max_cost:g} (${cost:.4f} spent)"
        return None


@dataclass
class RunSummary:
    """What one invocation did (not the whole run's history)."""

    turns_done: int = 0
    turns_skipped: int = 0
    failed_turns: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0
    # Successful replies that are empty or cut by max_tokens (see medpress.store.reply_issue).
    reply_issues: Counter[str] = field(default_factory=Counter)
    # Adaptive runs: attacker turns written, fallbacks to the scripted turn, drifted attempts.
    attacker: Counter[str] = field(default_factory=Counter)
    capped: str | None = None
    """The spend cap that stopped the run (a phrase), or None."""

    def as_dict(self) -> dict[str, Any]:
        return {"turns_done": self.turns_done, "turns_skipped": self.turns_skipped,
                "failed_turns": self.failed_turns, "failures": dict(self.failures),
                "retries": dict(self.retries), "reply_issues": dict(self.reply_issues),
                "attacker": dict(self.attacker), "capped": self.capped,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "elapsed_s": self.elapsed_s}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def check_resume(store: RunStore, plan: RunPlan, backend: Backend) -> None:
    """Refuse to resume a stored run with other settings; nothing to check for a new run.

    Every setting of :func:`resume_settings` is compared (model, dataset, conditions and their
    texts, repeats, sampling, reasoning, max tokens, system role); one that the stored run
    did not record (an older version) is not. Other dialogues are named by the options that
    select them (:func:`dataset_difference`), not by the dataset hash. Writes nothing, so the
    CLI calls it before any progress is shown.

    Raises:
        StoreError: naming every setting that differs, with its stored and new value.
    """
    if store.get_meta("model") is None:
        return
    prov = plan.provenance(backend)
    stored = store.provenance()
    old, new = resume_settings(stored), resume_settings(prov)
    # the dataset hash means nothing to a user: say which selection options to check
    diffs = [why] if (why := dataset_difference(stored, prov)) else []
    diffs += [f"{name}: stored {old[name]!r}, now {value!r}" for name, value in new.items()
              if name != "dataset hash" and name in old and old[name] != value]
    if diffs:
        raise StoreError(f"refusing to resume {store.run_dir}: the run was started with "
                         "different settings; use another --run-dir.\n  " + "\n  ".join(diffs))


def prepare_store(store: RunStore, plan: RunPlan, backend: Backend) -> None:
    """Record provenance on a new run, or check that a resumed run asks for the same thing
    (:func:`check_resume`).

    Raises:
        StoreError: naming every setting that differs, with its stored and new value.
    """
    prov = plan.provenance(backend)
    if store.get_meta("model") is None:
        store.set_meta("run_id", uuid.uuid4().hex[:12])
        store.set_meta("created_at", now_iso())
        # "model" last: its presence marks a fully prepared run, so a kill between these
        # writes leaves a run that starts afresh rather than one that can never resume.
        for k, v in prov.items():
            if k != "model":
                store.set_meta(k, v)
        store.set_meta("model", prov["model"])
    else:
        check_resume(store, plan, backend)
    sessions = store.get_meta("sessions") or []
    sessions.append({"started_at": now_iso(), "medpress_version": prov["medpress_version"]})
    store.set_meta("sessions", sessions)


class Runner:
    """Drives one plan against one backend and store."""

    def __init__(self, backend: Backend, store: RunStore, plan: RunPlan, *,
                 concurrency: int = 32, on_result: ResultHook | None = None,
                 budget: Budget | None = None) -> None:
        self.backend = backend
        self.attacker = plan.attacker
        self.budget = budget
        self._used = store.token_totals() if budget is not None else (0, 0)
        self.store = store
        self.plan = plan
        limit = backend.max_concurrency
        per_replica = max(1, min(concurrency, limit) if limit else concurrency)
        self.concurrency = per_replica * backend.replicas
        self.on_result = on_result
        self.summary = RunSummary()
        self._states: dict[tuple[str, int, str], UnitState] = {}
        self._seen_result = False
        self.rejected: ChatResult | None = None  # set when the first result was a rejection
        self._asked: dict[tuple[str, int, str], tuple[str, str, AttackTurn | None]] = {}

    def _n(self, unit: Unit) -> int:
        """Turns the unit runs: its dialogue's, or the attacker's ``--max-turns``."""
        n = len(unit.dialogue.turns)
        return self.attacker.n_turns(n) if self.attacker is not None else n

    def _history(self, unit: Unit, users: list[str], replies: list[str],
                 turn: int) -> ChatRequest:
        pairs: list[tuple[str, str | None]] = [
            (users[i], replies[i] if i < turn - 1 else None) for i in range(turn)]
        msgs = build_messages(unit.condition.system, pairs,
                              system_role=self.backend.supports_system_role)
        return ChatRequest((unit, turn), msgs, self.plan.config_for(unit.repeat),
                           session=unit.key, final=turn == self._n(unit))

    async def _user(self, unit: Unit, users: list[str], replies: list[str],
                    turn: int) -> tuple[str, str, AttackTurn | None]:
        """(user text, pressure or stage, the attacker's turn) for ``turn``: the dialogue's
        scripted turn, or from turn 2 on the attacker's (its text None when it failed)."""
        d = unit.dialogue
        fixed = d.turns[turn - 1] if turn <= len(d.turns) else None
        if self.attacker is None or turn == 1:
            assert fixed is not None
            return fixed.text, fixed.pressure, None

        async def probe(text: str) -> str | None:
            """The model's reply to a candidate turn (``mutate``): asked, never stored."""
            req = self._history(unit, [*users, text], replies, turn)
            res = await self.backend.complete(replace(req, key=(unit, turn, "probe"),
                                                      session=None))
            return res.text if res.ok else None

        at = await self.attacker.next_turn(
            (unit.key, turn), dialogue_id=d.id, card=d.card,
            history=list(zip(users, replies, strict=True)), turn=turn,
            fixed=fixed.text if fixed else None, target_system=unit.condition.system,
            probe=probe)
        return at.text or "", f"{self.attacker.strategy}:{at.stage}", at

    def _attack_failed(self, unit: Unit, turn: int, user: str, pressure: str,
                       at: AttackTurn) -> None:
        """Store the turn the attacker could not write as failed (resumable with
        --retry-failed), as a failed model turn is."""
        kind = "attacker_drift" if (at.error or "").startswith("attacker drift") else \
            "attacker_error"
        self._record(unit, turn, ChatResult((unit, turn), None, error=at.error,
                                            error_kind=kind, attempts=at.attempts),
                     user, pressure, at)

    def _record(self, unit: Unit, turn: int, res: ChatResult, user: str, pressure: str,
                at: AttackTurn | None = None) -> None:
        self.store.add_turn({
            "condition": unit.condition.name, "repeat": unit.repeat,
            "dialogue_id": unit.dialogue.id, "turn": turn, "family": unit.dialogue.family,
            "pressure": pressure, "user": user, "reply": res.text, "reasoning": res.reasoning,
            "finish_reason": res.finish_reason, "prompt_tokens": res.prompt_tokens,
            "completion_tokens": res.completion_tokens,
            "latency_s": res.latency_s, "error": res.error, "error_kind": res.error_kind,
            "attempts": res.attempts, "retries": res.retries,
            "attack": None if at is None else at.record(),
        })
        s = self.summary
        s.turns_done += 1
        s.prompt_tokens += res.prompt_tokens or 0
        s.completion_tokens += res.completion_tokens or 0
        self._used = (self._used[0] + (res.prompt_tokens or 0),
                      self._used[1] + (res.completion_tokens or 0))
        s.retries.update(res.retries)
        if at is not None:
            s.attacker["turns"] += 1
            s.attacker["fallbacks"] += at.fallback
            s.attacker["flagged_attempts"] += len(at.rejected)
        if not res.ok:
            s.failed_turns += 1
            s.failures[res.error_kind or "error"] += 1
        elif issue := reply_issue(res.text, res.finish_reason):
            s.reply_issues[issue] += 1
        if self.on_result is not None:
            self.on_result(unit.condition.name, res)

    def _stop(self) -> bool:
        """Whether to send no more requests: a refusal, or a spend cap reached."""
        if self.rejected is not None or self.summary.capped is not None:
            return True
        if self.budget is not None:
            self.summary.capped = self.budget.reached(*self._used)
        return self.summary.capped is not None

    def _keep(self, res: ChatResult, turn: int) -> bool:
        """Whether to store ``res``; False for the first result when it is a rejection, and
        for every failure after that (the same rejection, in flight when it came).

        Only a turn-1 request can reject the run: a later turn of a resumed dialogue may be
        refused for its own reasons (a 400 for a prompt past the context length), and
        stopping there would make the run impossible to finish.
        """
        first, self._seen_result = not self._seen_result, True
        if first and turn == 1 and not res.ok and res.error_kind in REJECTED_KINDS:
            self.rejected = res
        return res.ok or self.rejected is None

    def _start(self, unit: Unit) -> tuple[int, list[str], list[str]] | None:
        """(first turn to ask, stored user turns, stored replies), or None when the unit
        needs nothing."""
        state = self._states.get(unit.key)
        if state is None:
            return 1, [], []
        self.summary.turns_skipped += state.last_turn
        if state.failed or state.last_turn >= self._n(unit):
            return None
        pairs = self.store.exchanges(unit.key)
        return state.last_turn + 1, [u for u, _ in pairs], [r for _, r in pairs]

    async def run(self) -> RunSummary:
        start = time.perf_counter()
        self._states = self.store.unit_states()
        if self.backend.batched:
            await self._run_batched()
        else:
            await self._run_concurrent()
        self.summary.elapsed_s = time.perf_counter() - start
        if self.rejected is not None:
            raise RunRejected(self.rejected, self.backend.spec)
        return self.summary

    async def _run_concurrent(self) -> None:
        units = iter(self.plan.units())
        slots = asyncio.Semaphore(self.concurrency)

        async def worker() -> None:
            for unit in units:  # shared iterator: each unit is taken by one worker
                if self._stop():
                    return
                begin = self._start(unit)
                if begin is None:
                    continue
                first, users, replies = begin
                for turn in range(first, self._n(unit) + 1):
                    user, pressure, at = await self._user(unit, users, replies, turn)
                    if at is not None and at.text is None:
                        self._attack_failed(unit, turn, user, pressure, at)
                        break
                    users.append(user)
                    request = self._history(unit, users, replies, turn)
                    async with slots:
                        if self._stop():  # refused or capped while this one waited
                            return
                        res = await self.backend.complete(request)
                    if self._keep(res, turn):
                        self._record(unit, turn, res, user, pressure, at)
                    if not res.ok or self.rejected is not None:
                        break
                    replies.append(res.text or "")

        await asyncio.gather(*(worker() for _ in range(WORKERS_PER_SLOT * self.concurrency)))

    async def _run_batched(self) -> None:
        live: dict[tuple[str, int, str], tuple[Unit, int, list[str], list[str]]] = {}
        for unit in self.plan.units():
            begin = self._start(unit)
            if begin is not None:
                live[unit.key] = (unit, *begin)
        turn = 1
        while live and not self._stop():
            due = [v for v in live.values() if v[1] <= turn]
            asked = await asyncio.gather(*(self._user(u, us, r, turn) for u, _, us, r in due))
            batch = []
            for (unit, _, users, replies), (user, pressure, at) in zip(due, asked, strict=True):
                if at is not None and at.text is None:
                    self._attack_failed(unit, turn, user, pressure, at)
                    del live[unit.key]
                    continue
                users.append(user)
                self._asked[unit.key] = (user, pressure, at)
                batch.append(self._history(unit, users, replies, turn))
            async for res in self.backend.complete_batch(batch):
                unit, t_done = cast(tuple[Unit, int], res.key)
                if self._keep(res, t_done):
                    self._record(unit, t_done, res, *self._asked.pop(unit.key))
                if res.ok:
                    live[unit.key][3].append(res.text or "")
                else:
                    del live[unit.key]
            if self.rejected is not None:
                return
            turn += 1
            live = {k: v for k, v in live.items() if self._n(v[0]) >= turn}


async def generate(backend: Backend, store: RunStore, plan: RunPlan, *, concurrency: int = 32,
                   on_result: ResultHook | None = None, retry_failed: bool = False,
                   budget: Budget | None = None) -> RunSummary:
    """Prepare the store, run every missing turn, and close the backend.

    With ``retry_failed`` the turns that failed permanently before are deleted first, so
    their dialogues continue from the failed turn. In an adaptive run (the plan's ``attacker``)
    user turns from turn 2 on are the attacker's.

    Raises:
        ValueError: for settings the backend would drop (``Backend.check_config``), before
            anything is stored.
        StoreError: for a resume with other settings (:func:`prepare_store`), another
            process generating into the same run (:meth:`RunStore.lock`), or a store that
            cannot be written (full disk, read-only).
        RunRejected: when the first request is refused for good (the store stays resumable).
    """
    backend.check_config(plan.config)
    if not store.holds("generate"):
        store.lock("generate", f"generate {backend.spec}")
    try:
        return await _generate(backend, store, plan, concurrency, on_result, retry_failed,
                               budget)
    finally:  # also a lock the CLI took before checking the resume
        store.unlock("generate")


async def _generate(backend: Backend, store: RunStore, plan: RunPlan, concurrency: int,
                    on_result: ResultHook | None, retry_failed: bool,
                    budget: Budget | None) -> RunSummary:
    prepare_store(store, plan, backend)
    if retry_failed:
        store.delete_failed()
    try:
        summary = await Runner(backend, store, plan, concurrency=concurrency,
                               on_result=on_result, budget=budget).run()
    finally:
        await backend.aclose()
        if plan.attacker is not None:
            await plan.attacker.aclose()
    store.set_meta("updated_at", now_iso())
    return summary
