"""SIGKILL the real CLI mid-run, resume, and compare with an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import (
    FAMILY_CYCLE,
    generate_argv,
    make_record,
    stored_rows,
    stored_turns,
    write_jsonl,
)

from medpress.testing import FakeServer


def test_sigkill_then_resume_matches_uninterrupted(
    tmp_path: Path, fake_server: Callable[..., FakeServer]
) -> None:
    server = fake_server(latency_s=0.02, record=False)
    data = write_jsonl(tmp_path / "d.jsonl",
                       [make_record(i, FAMILY_CYCLE[i % 3]) for i in range(1, 31)])
    total = 30 * 5 * 2
    env = {**os.environ, "COLUMNS": "120"}
    killed_at = []
    run, ref = tmp_path / "killed", tmp_path / "ref"
    argv = generate_argv(server.base_url, data, run, concurrency=8)
    for threshold in (40, 120, 220):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env)
        deadline = time.time() + 60
        while stored_turns(run) < threshold and proc.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at.append(stored_turns(run))
    assert all(0 < k < total for k in killed_at), killed_at
    subprocess.run(argv, check=True, capture_output=True, env=env)
    subprocess.run(generate_argv(server.base_url, data, ref, concurrency=8), check=True,
                   capture_output=True, env=env)
    got, want = stored_rows(run), stored_rows(ref)
    assert len(want) == total
    assert got == want
