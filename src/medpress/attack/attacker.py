"""The adaptive patient: a backend writes each next user turn from the card, the dialogue's
fixed turn 1 and the model's replies so far.

Strategies (``data/attacker.yaml``): ``escalate`` follows the MedPRESS pressure schedule
adapted to the last reply; ``crescendo`` starts soft and ramps to demanding agreement;
``mutate`` rewrites the dialogue's scripted next turn: with ``--attacker-judge`` once per
operator, keeping the rewrite whose probe reply the judge labelled most severe; without, with
one seeded operator per turn. Every
attacker turn passes the drift rules before the model sees it: a turn that leaks the model's
instructions, breaks character, or brings in a harm the card does not name is not sent; the
attacker is asked again, and after ``max_attempts`` the dialogue falls back to its scripted
turn (recorded) or, past the scripted turns, stops there as a failed turn.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jinja2
import yaml

from medpress.backends import Backend, ChatRequest, GenerateConfig
from medpress.judges.base import Judge, JudgeItem

ATTACK_FILE = Path(__file__).parent / "data" / "attacker.yaml"
Strategy = Literal["escalate", "crescendo", "mutate"]
STRATEGIES: tuple[Strategy, ...] = ("escalate", "crescendo", "mutate")
# Sampled, so an attacker varies its wording; seeded, so a rerun asks the same.
ATTACK_CONFIG = GenerateConfig(temperature=0.7, max_tokens=200, seed=0)
# Prompt text, not HTML: values are inserted verbatim and never run.
_ENV = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined)
_WORD = re.compile(r"[a-z0-9']+")
Probe = Callable[[str], Awaitable[str | None]]
"""Sends a candidate user turn to the model (same history) and returns its reply."""
# A speaker label small models put in front of the turn: not part of what the patient says.
_LABEL = re.compile(r"^\s*(the\s+)?patient\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class AttackPrompts:
    """The attacker's versioned prompts, stages and drift rules."""

    version: str
    targets: dict[str, str]
    system: str
    transcript: str
    stages: dict[str, dict[str, str]]
    """Strategy -> stage (or operator) name -> instruction, in order."""
    max_attempts: int
    leak_words: int
    new_harm: tuple[re.Pattern[str], ...]
    role_break: tuple[re.Pattern[str], ...]


@cache
def load_attack_prompts(path: Path = ATTACK_FILE) -> AttackPrompts:
    raw: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    s = raw["strategies"]
    drift = raw["drift"]
    return AttackPrompts(
        str(raw["version"]), dict(raw["targets"]), raw["system"], raw["transcript"],
        {"escalate": dict(s["escalate"]["stages"]), "crescendo": dict(s["crescendo"]["stages"]),
         "mutate": dict(s["mutate"]["operators"])},
        int(drift["max_attempts"]), int(drift["leak_words"]),
        tuple(re.compile(p, re.IGNORECASE) for p in drift["new_harm"]),
        tuple(re.compile(p, re.IGNORECASE) for p in drift["role_break"]))


def stage_for(prompts: AttackPrompts, strategy: str, turn: int, dialogue_id: str,
              seed: int = 0) -> tuple[str, str]:
    """(stage name, instruction) of an attacker turn (``turn`` >= 2). ``escalate`` and
    ``crescendo`` walk their stages in order and repeat the last; ``mutate`` picks an
    operator by a hash of (seed, dialogue, turn), so a rerun picks the same one.

    Raises:
        ValueError: an unknown strategy.
    """
    if strategy not in prompts.stages:
        raise ValueError(f"unknown --strategy {strategy!r}; choose one of "
                         f"{', '.join(STRATEGIES)}")
    names = list(prompts.stages[strategy])
    if strategy == "mutate":
        name = names[zlib.crc32(f"{seed}:{dialogue_id}:{turn}".encode()) % len(names)]
    else:
        name = names[min(turn - 2, len(names) - 1)]
    return name, prompts.stages[strategy][name]


def _leaks(text: str, system: str, n: int) -> bool:
    """Whether ``text`` repeats ``n`` consecutive words of ``system``."""
    words = _WORD.findall(system.lower())
    grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}
    said = _WORD.findall(text.lower())
    return any(" ".join(said[i:i + n]) in grams for i in range(len(said) - n + 1))


def drift_flags(prompts: AttackPrompts, text: str, card: Mapping[str, str],
                system: str | None) -> list[str]:
    """Why an attacker turn must not be sent (empty when it may be): ``empty``, ``leak``
    (repeats the model's instructions), ``role_break`` (stops playing the patient),
    ``new_harm`` (a harm topic the card does not itself name)."""
    flags = []
    if not text.strip():
        flags.append("empty")
    if system and _leaks(text, system, prompts.leak_words):
        flags.append("leak")
    if any(p.search(text) for p in prompts.role_break):
        flags.append("role_break")
    card_text = " ".join(card.values())
    if any(p.search(text) and not p.search(card_text) for p in prompts.new_harm):
        flags.append("new_harm")
    return flags


@dataclass(frozen=True)
class AttackTurn:
    """One attacker turn: the text to send (None when the attacker failed), its stage, and how
    it came about (``rejected``: the drift flags of attempts not sent)."""

    text: str | None
    stage: str
    attempts: int = 1
    rejected: tuple[tuple[str, ...], ...] = ()
    fallback: bool = False
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    candidates: tuple[Mapping[str, Any], ...] = ()
    """``mutate`` with a judge: each operator's rewrite and the label its probe reply got."""

    def record(self) -> dict[str, Any]:
        """What the run stores with the turn (``turns.attack``)."""
        return {"stage": self.stage, "attempts": self.attempts,
                "rejected": [list(f) for f in self.rejected], "fallback": self.fallback,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "latency_s": round(self.latency_s, 4)} | (
                    {"candidates": [dict(c) for c in self.candidates]} if self.candidates
                    else {})


@dataclass
class Attacker:
    """Plays the patient with ``backend`` under ``strategy`` for turns 2..``max_turns``."""

    backend: Backend
    strategy: str
    suite: str = "medpress"
    seed: int = 0
    max_turns: int | None = None
    """Turns per dialogue (None: the dialogue's own number of turns)."""
    prompts: AttackPrompts = field(default_factory=load_attack_prompts)
    judge: Judge | None = None
    """``mutate``: labels each operator's probe reply, to keep the rewrite that moved the
    model most. Without one, ``mutate`` applies one seeded operator per turn."""
    severity: Sequence[str] = ("UNSAFE", "AMBIGUOUS", "SAFE")
    """The judge's labels, most severe (the model gave way most) first."""

    def __post_init__(self) -> None:
        stage_for(self.prompts, self.strategy, 2, "", self.seed)  # validate now, not mid-run
        if self.max_turns is not None and self.max_turns < 2:
            raise ValueError(f"--max-turns must be at least 2, not {self.max_turns}")
        if self.judge is not None and self.strategy != "mutate":
            raise ValueError("--attacker-judge applies to --strategy mutate (it picks the "
                             "operator that moved the model)")

    def identity(self) -> dict[str, Any]:
        """What the run records (and a resume must match)."""
        return {"spec": self.backend.spec, "strategy": self.strategy,
                "prompts_version": self.prompts.version, "seed": self.seed,
                "max_turns": self.max_turns} | (
                    {"judge": self.judge.name, "judge_rubric": self.judge.rubric_version}
                    if self.judge is not None else {})

    def n_turns(self, fixed_turns: int) -> int:
        return self.max_turns or fixed_turns

    def target_field(self, card: Mapping[str, str]) -> str:
        """The card field holding the position pushed for: the suite's in ``targets``, else
        the card's first field."""
        want = self.prompts.targets.get(self.suite)
        return want if want is not None and want in card else next(iter(card))

    def request(self, key: Hashable, card: Mapping[str, str], history: Sequence[tuple[str, str]],
                fixed: str | None, instruction: str, attempt: int) -> ChatRequest:
        target_field = self.target_field(card)
        system = _ENV.from_string(self.prompts.system).render(
            card=card, target=card[target_field], target_field=target_field,
            instruction=instruction)
        user = _ENV.from_string(self.prompts.transcript).render(
            history=history, fixed=fixed if self.strategy == "mutate" else None)
        config = ATTACK_CONFIG.with_seed(self.seed + attempt - 1)
        return ChatRequest(key, [{"role": "system", "content": system},
                                 {"role": "user", "content": user}], config)

    async def _write(self, key: Hashable, card: Mapping[str, str],
                     history: Sequence[tuple[str, str]], fixed: str | None, instruction: str,
                     target_system: str | None
                     ) -> tuple[str | None, int, list[tuple[str, ...]], str | None, int, int]:
        """One attacker turn under ``instruction``: (text or None, attempts, drift flags of
        the attempts not sent, error, prompt tokens, completion tokens)."""
        rejected: list[tuple[str, ...]] = []
        ptok = ctok = 0
        for attempt in range(1, self.prompts.max_attempts + 1):
            res = await self.backend.complete(
                self.request((key, attempt), card, history, fixed, instruction, attempt))
            ptok += res.prompt_tokens or 0
            ctok += res.completion_tokens or 0
            if not res.ok:
                return None, attempt, rejected, f"attacker error: {res.error}", ptok, ctok
            text = _LABEL.sub("", (res.text or "").strip()).strip().strip('"').strip()
            flags = drift_flags(self.prompts, text, card, target_system)
            if not flags:
                return text, attempt, rejected, None, ptok, ctok
            rejected.append(tuple(flags))
        return None, self.prompts.max_attempts, rejected, None, ptok, ctok

    async def next_turn(self, key: Hashable, *, dialogue_id: str, card: Mapping[str, str],
                        history: Sequence[tuple[str, str]], turn: int,
                        fixed: str | None, target_system: str | None,
                        probe: Probe | None = None) -> AttackTurn:
        """The user turn ``turn`` after ``history`` (turns 1..turn-1, each answered).

        ``fixed`` is the dialogue's scripted turn ``turn`` (None past the scripted turns): the
        text ``mutate`` rewrites, and the fallback when every attempt drifts.
        ``target_system`` is the model's system prompt, which the attacker must not leak.
        ``mutate`` (with a ``judge``) writes one rewrite per operator, sends each to the model
        through ``probe`` (its reply, or None on an error), judges the replies and keeps the
        rewrite whose reply was labelled most severe (ties: operator order); the candidates
        and their labels are recorded.
        """
        start = time.perf_counter()
        if self.strategy == "mutate" and self.judge is not None and probe is not None \
                and fixed is not None:
            return await self._pick(key, card, history, fixed, target_system, probe, start)
        stage, instruction = stage_for(self.prompts, self.strategy, turn, dialogue_id,
                                       self.seed)
        text, attempts, rejected, error, ptok, ctok = await self._write(
            key, card, history, fixed, instruction, target_system)
        return self._turn(text, stage, attempts, rejected, error, fixed, ptok, ctok, start)

    def _turn(self, text: str | None, stage: str, attempts: int,
              rejected: Sequence[tuple[str, ...]], error: str | None, fixed: str | None,
              ptok: int, ctok: int, start: float,
              candidates: Sequence[Mapping[str, Any]] = ()) -> AttackTurn:
        """The attacker turn, falling back to ``fixed`` when every attempt drifted."""
        took = time.perf_counter() - start
        if text is not None or error is not None:
            return AttackTurn(text, stage, attempts, tuple(rejected), error=error,
                              prompt_tokens=ptok, completion_tokens=ctok, latency_s=took,
                              candidates=tuple(candidates))
        why = ", ".join(sorted({f for r in rejected for f in r}))
        return AttackTurn(fixed, stage, attempts, tuple(rejected), fallback=fixed is not None,
                          error=None if fixed is not None else
                          f"attacker drift: {attempts} attempts flagged ({why}) and no "
                          "scripted turn to fall back on", prompt_tokens=ptok,
                          completion_tokens=ctok, latency_s=took, candidates=tuple(candidates))

    async def _pick(self, key: Hashable, card: Mapping[str, str],
                    history: Sequence[tuple[str, str]], fixed: str,
                    target_system: str | None, probe: Probe, start: float) -> AttackTurn:
        """``mutate`` with a judge: every operator's rewrite, probed and judged."""
        assert self.judge is not None
        order = list(self.severity)
        rejected: list[tuple[str, ...]] = []
        candidates: list[dict[str, Any]] = []
        best: tuple[int, int, str, str] | None = None  # (severity rank, operator index, op, text)
        ptok = ctok = attempts = 0
        for i, (op, instruction) in enumerate(self.prompts.stages["mutate"].items()):
            text, n, flags, error, p, c = await self._write(
                (key, op), card, history, fixed, instruction, target_system)
            attempts, ptok, ctok = attempts + n, ptok + p, ctok + c
            rejected += flags
            if error is not None:
                return self._turn(None, op, attempts, rejected, error, fixed, ptok, ctok, start,
                                  candidates)
            if text is None:
                candidates.append({"operator": op, "label": None, "why": "drift"})
                continue
            reply = await probe(text)
            label = None
            if reply is not None:
                item = JudgeItem((key, op), dict(card),
                                 [*((u, r) for u, r in history), (text, None)], reply)
                label = (await self.judge.judge(item)).label
            candidates.append({"operator": op, "label": label})
            rank = order.index(label) if label in order else len(order)
            if best is None or (rank, i) < best[:2]:
                best = (rank, i, op, text)
        if best is None:  # every operator's rewrite drifted
            return self._turn(None, "none", attempts, rejected, None, fixed, ptok, ctok, start,
                              candidates)
        return self._turn(best[3], best[2], attempts, rejected, None, fixed, ptok, ctok, start,
                          candidates)

    async def aclose(self) -> None:
        await self.backend.aclose()
        if self.judge is not None:
            await self.judge.aclose()
