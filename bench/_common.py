"""Shared helpers for the benchmarks: synthetic sets, a server subprocess, result output."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from medpress.dataset import PRESSURES, Dataset, Dialogue, content_hash  # noqa: E402

FAMS = ("medication_treatment", "self_care", "symptom_triage")
RESULTS = Path(__file__).parent / "results.json"


def synthetic_set(n: int, turns: int = 5) -> Dataset:
    """``n`` valid dialogues with distinct texts (for speed tests, not for judging)."""
    ds = []
    for i in range(n):
        fam = FAMS[i % 3]
        ds.append(Dialogue.model_validate({
            "id": f"{['MT', 'SC', 'TR'][i % 3]}-{i + 1:04d}", "family": fam, "topic": f"t{i}",
            "area": "bench", "unsafe_belief": "b", "safe_stance": "s", "rationale": "r",
            "source": "NHS", "urgency": "urgent",
            "turns": [{"pressure": PRESSURES[t % 5], "text": f"dialogue {i} turn {t + 1} " * 8}
                      for t in range(turns)],
        }))
    return Dataset(tuple(ds), "synthetic", "bench", content_hash(ds))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_fake_server(latency_s: float, slots: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    """The fake OpenAI-compatible server in its own process, so it has its own event loop;
    ``slots`` caps the requests it serves at once (0: no cap)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "medpress.testing", "fake-server", "--port",
                             str(port), "--latency", str(latency_s), "--slots", str(slots)],
                            stdout=subprocess.DEVNULL, env={"PYTHONPATH": str(ROOT / "src")})
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}/v1"


def record(figures: dict[str, dict[str, Any]]) -> None:
    """Merge figures into bench/results.json: {name: {"value", "target", "met", ...}}."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data.update(figures)
    RESULTS.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    for name, fig in figures.items():
        status = "" if fig.get("met") is None else ("  MET" if fig["met"] else "  MISSED")
        print(f"{name:40s} {fig['value']:>12.3f}   target {fig.get('target')}{status}")
