"""Whole-process start-up of the CLI (issue 23 item 7): `medpress --help` against the floor.

Medians of REPEATS runs each, measured in the same run: a bare interpreter, an interpreter
that only imports typer (the floor of any typer CLI), and `medpress --help` / `--version`.
Target: `medpress --help` within 0.25 s; the ratio to the typer floor is the portable figure.
Run: ``python bench/startup.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _common import ROOT, record

REPEATS = 15
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import typer'": [sys.executable, "-c", "import typer"],
    "medpress --help": [sys.executable, "-m", "medpress.cli", "--help"],
    "medpress --version": [sys.executable, "-m", "medpress.cli", "--version"],
}


def median_s(argv: list[str]) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    got = {name: median_s(argv) for name, argv in CASES.items()}
    for name, s in got.items():
        print(f"{name:28s} {s * 1000:7.0f} ms")
    help_s, floor = got["medpress --help"], got["python -c 'import typer'"]
    record({
        "startup_help_s": {"value": round(help_s, 3), "target": 0.25, "met": help_s <= 0.25},
        "startup_help_vs_typer_import": {"value": round(help_s / floor, 2), "target": None,
                                         "met": None},
    })


if __name__ == "__main__":
    main()
