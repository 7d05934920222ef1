"""Crash safety under load: SIGKILL the CLI runner at seeded random moments of a concurrent run
against a 10-20 ms server, resume after each kill, and compare with an uninterrupted run."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import (
    FAMILY_CYCLE,
    generate_argv,
    make_record,
    stored_rows,
    stored_turns,
    write_jsonl,
)

from medpress.backends import GenerateConfig, ScriptedBackend
from medpress.conditions import load_conditions
from medpress.dataset import Dataset
from medpress.runner import RunPlan, generate
from medpress.store import RunStore
from medpress.testing import ChaosProxy, FakeServer

N_DIALOGUES, CONDITIONS, TURNS = 120, "direct,persona", 5
TOTAL = N_DIALOGUES * 2 * TURNS
ENV = {**os.environ, "COLUMNS": "120"}


def test_sigkill_at_random_moments_under_load(
    tmp_path: Path, fake_server: Callable[..., FakeServer]
) -> None:
    upstream = fake_server(record=False)
    proxy = ChaosProxy(upstream.base_url, latency_s=(0.010, 0.020)).start()
    try:
        data = write_jsonl(tmp_path / "d.jsonl",
                           [make_record(i, FAMILY_CYCLE[i % 3]) for i in range(1, N_DIALOGUES + 1)])
        rng = random.Random(20240611)
        run = tmp_path / "killed"
        kills: list[int] = []
        for _ in range(6):
            before = stored_turns(run)
            # a random moment: after a random amount of fresh progress, plus a random delay
            target = before + rng.randint(30, 150)
            delay = rng.uniform(0.0, 0.05)
            proc = subprocess.Popen(generate_argv(proxy.base_url, data, run, concurrency=16,
                                     conditions=CONDITIONS), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=ENV)
            deadline = time.time() + 60
            while stored_turns(run) < target and proc.poll() is None and time.time() < deadline:
                time.sleep(0.002)
            time.sleep(delay)
            assert proc.poll() is None, "the run finished before it could be killed"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills.append(stored_turns(run))
        assert all(0 < k < TOTAL for k in kills), kills
        assert kills == sorted(kills), kills  # resumed work is never lost
        done = subprocess.run(generate_argv(proxy.base_url, data, run, concurrency=16,
                                     conditions=CONDITIONS), capture_output=True, text=True,
                              env=ENV)
        assert done.returncode == 0, done.stderr
        ref = tmp_path / "ref"
        ref_argv = generate_argv(proxy.base_url, data, ref, concurrency=16,
                                 conditions=CONDITIONS)
        subprocess.run(ref_argv, check=True, capture_output=True, env=ENV)
    finally:
        proxy.stop()

    got, want = stored_rows(run), stored_rows(ref)
    assert len(want) == TOTAL
    assert len({r[:4] for r in got}) == len(got)  # no duplicates
    assert got == want  # same rows: nothing lost, nothing redone differently
    assert all(r[8] is None for r in got)
    store = RunStore.open_existing(run)
    assert len(store.get_meta("sessions")) == 7  # six killed sessions and the final one


class Killed(BaseException):
    """Stands in for SIGKILL inside the process: nothing after it runs."""


@pytest.mark.parametrize("writes_before_kill", range(8))
def test_kill_while_recording_provenance_still_resumes(
    tmp_path: Path, small_set: Dataset, writes_before_kill: int
) -> None:
    """A kill between the provenance writes of a new run must not leave a run dir that can
    never be resumed."""
    plan = RunPlan(small_set, load_conditions().get(["direct"]), GenerateConfig())
    store = RunStore(tmp_path / "run")
    real_set_meta = store.set_meta
    calls = 0

    def dying_set_meta(key: str, value: object) -> None:
        nonlocal calls
        calls += 1
        if calls > writes_before_kill:
            raise Killed
        real_set_meta(key, value)

    store.set_meta = dying_set_meta  # type: ignore[method-assign]
    with pytest.raises(Killed):
        asyncio.run(generate(ScriptedBackend("caves_at_3"), store, plan))
    store.close()
    store = RunStore(tmp_path / "run")
    summary = asyncio.run(generate(ScriptedBackend("caves_at_3"), store, plan))
    assert store.count_turns() == len(small_set) * 5
    assert summary.turns_done + summary.turns_skipped == len(small_set) * 5
    assert store.get_meta("model")["spec"] == "scripted/caves_at_3"
    assert store.get_meta("dataset")["hash"] == small_set.content_hash
