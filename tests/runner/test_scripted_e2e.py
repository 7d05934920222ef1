from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from medpress.backends import Backend, ChatRequest, ChatResult, GenerateConfig, ScriptedBackend
from medpress.backends.scripted import stance_for
from medpress.conditions import DEFAULT_CONDITIONS, load_conditions
from medpress.dataset import Dataset
from medpress.runner import RunPlan, generate
from medpress.store import RunStore, StoreError


class Recording(Backend):
    """Scripted replies, recording every request it was sent."""

    def __init__(self, inner: ScriptedBackend, *, batched: bool = False,
                 system_role: bool = True) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.seen: list[ChatRequest] = []
        self.supports_system_role = system_role
        self.batched = batched  # type: ignore[misc]

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.seen.append(request)
        return await self.inner.complete(request)


def plan(ds: Dataset, conds: tuple[str, ...] = DEFAULT_CONDITIONS, repeats: int = 1) -> RunPlan:
    return RunPlan(ds, load_conditions().get(conds), GenerateConfig(), repeats)


@pytest.mark.parametrize("batched", [False, True])
def test_every_turn_once_with_own_replies_in_history(tmp_path: Path, small_set: Dataset,
                                                     batched: bool) -> None:
    backend = Recording(ScriptedBackend("caves_at_3"), batched=batched)
    store = RunStore(tmp_path / "run")
    summary = asyncio.run(generate(backend, store, plan(small_set, repeats=2), concurrency=4))
    assert summary.turns_done == 6 * 5 * 4 * 2 == store.count_turns()
    rows = list(store.iter_turns())
    assert len({(r["condition"], r["repeat"], r["dialogue_id"], r["turn"]) for r in rows}) == 240
    by_key = {(r["condition"], r["repeat"], r["dialogue_id"], r["turn"]): r for r in rows}
    conds = load_conditions().conditions
    for req in backend.seen:
        msgs = req.messages
        cond = next(c for c in conds.values() if c.system == msgs[0]["content"])
        users = [m for m in msgs if m["role"] == "user"]
        assistants = [m["content"] for m in msgs if m["role"] == "assistant"]
        assert len(assistants) == len(users) - 1
        did = next(d.id for d in small_set if d.turns[0].text == users[0]["content"])
        for t, reply in enumerate(assistants, 1):
            assert reply == by_key[(cond.name, req.config.seed or 0, did, t)]["reply"]
    # the scripted stance really changes at turn 3
    from medpress.backends.scripted import _replies

    for r in rows:
        stance = "unsafe" if r["turn"] >= 3 else "safe"
        assert r["reply"] in _replies()[stance]


def test_condition_texts_and_system_role_fallback(tmp_path: Path, small_set: Dataset) -> None:
    one = small_set.subset(["MT-0001"])
    backend = Recording(ScriptedBackend("always_safe"), system_role=False)
    asyncio.run(generate(backend, RunStore(tmp_path / "r"), plan(one, ("persona_anti",))))
    persona = load_conditions().conditions["persona_anti"].system
    assert "Andrew" in persona and "evidence" in persona
    first, later = backend.seen[0].messages, backend.seen[-1].messages
    assert all(m["role"] != "system" for m in later)
    assert persona in first[0]["content"] and one.dialogues[0].turns[0].text in first[0]["content"]
    assert later[0]["content"] == first[0]["content"]
    assert persona not in later[-1]["content"]


def test_resume_refuses_other_parameters(tmp_path: Path, small_set: Dataset) -> None:
    store = RunStore(tmp_path / "r")
    asyncio.run(generate(ScriptedBackend("hedger"), store, plan(small_set, ("direct",))))
    with pytest.raises(StoreError, match=r"the selected dialogues differ: stored 6 dialogues "
                       r"\(.*\), now 1 \(MT-0001\); check --sample/--ids/--starter/--dataset"):
        asyncio.run(generate(ScriptedBackend("hedger"), store,
                             plan(small_set.subset(["MT-0001"]), ("direct",))))
    with pytest.raises(StoreError, match="model spec"):
        asyncio.run(generate(ScriptedBackend("always_safe"), store, plan(small_set, ("direct",))))
    again = asyncio.run(generate(ScriptedBackend("hedger"), store, plan(small_set, ("direct",))))
    assert again.turns_done == 0 and again.turns_skipped == 30


def test_flip_flop_and_unknown_behaviour() -> None:
    assert [stance_for("flip_flop", t) for t in range(1, 5)] == ["safe", "unsafe"] * 2
    with pytest.raises(ValueError, match="unknown scripted behaviour"):
        ScriptedBackend("caves_at_zero")


class Slow(Backend):
    """Scripted replies after a short sleep, counting requests in flight."""

    def __init__(self) -> None:
        self.inner = ScriptedBackend("always_safe")
        self.spec = self.inner.spec
        self.in_flight = self.peak = 0

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.002)
        self.in_flight -= 1
        return await self.inner.complete(request)


def test_concurrency_bounds_requests_in_flight_and_is_reached(tmp_path: Path,
                                                              small_set: Dataset) -> None:
    backend = Slow()
    summary = asyncio.run(generate(backend, RunStore(tmp_path / "run"), plan(small_set),
                                   concurrency=5))
    assert summary.turns_done == len(small_set) * 4 * 5
    assert backend.peak == 5
