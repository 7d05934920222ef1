"""Run every benchmark in bench/ and print one table of every figure against its target.

Each ``bench/*.py`` (except this file and ``_*.py`` helpers) runs in its own process, in name
order, with its output shown as it goes. Scripts record their figures in bench/results.json
(``{name: {"value", "target", "met"}}``, see ``_common.record``); a script that only prints
a JSON line (e.g. ``metrics_scale.py``) has that line's numbers recorded for it, without
targets. A full run starts from an empty results.json, so the table is this run's figures.

Run: ``python bench/run_all.py`` (what ``make bench`` does), ``--only scale,vs_inspect`` to
run some (keeping the other figures), ``--table`` to print the table of the stored figures.
Exit status: 1 if a script failed, or with ``--strict`` if a target was missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import RESULTS, record

BENCH = Path(__file__).resolve().parent


def scripts() -> list[Path]:
    return sorted(p for p in BENCH.glob("*.py")
                  if not p.name.startswith("_") and p.name != Path(__file__).name)


def run_script(path: Path, timeout: float) -> tuple[bool, list[str]]:
    """Run one benchmark, echoing its output; (succeeded, output lines)."""
    print(f"\n=== {path.name} " + "=" * max(0, 70 - len(path.name)), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(path)], cwd=BENCH.parent, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line.rstrip("\n"))
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = -9
    print(f"--- {path.name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} "
          f"in {time.perf_counter() - t0:.0f} s", flush=True)
    return rc == 0, lines


def adopt_json_line(stem: str, lines: list[str], before: dict[str, Any]) -> None:
    """Record the numbers of a script's last JSON line if it recorded nothing itself."""
    after = load()
    if any(k not in before or after[k] != before[k] for k in after):
        return
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            record({(k if k.startswith(stem) else f"{stem}_{k}"):
                    {"value": v, "target": None, "met": None}
                    for k, v in data.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)})
            return


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    return data


def fmt(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"


def table() -> tuple[int, int]:
    """Print every stored figure; returns (figures with a target, targets missed)."""
    data = load()
    rows = [(name, fmt(f.get("value")), str(f.get("target") or "-"),
             {True: "met", False: "MISSED", None: "-"}.get(f.get("met"), "-"))
            for name, f in sorted(data.items())]
    head = ("figure", "value", "target", "met")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i == 1 else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    print()
    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    targeted = [f for f in data.values() if f.get("met") is not None]
    missed = sum(1 for f in targeted if not f["met"])
    print(f"\n{len(rows)} figures, {len(targeted)} with a target: "
          f"{len(targeted) - missed} met, {missed} missed  ({RESULTS.relative_to(BENCH.parent)})")
    return len(targeted), missed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated script names (without .py)")
    ap.add_argument("--table", action="store_true", help="only print the stored figures")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per script")
    args = ap.parse_args()
    failed: list[str] = []
    if not args.table:
        todo = scripts()
        if args.only:
            names = {n.strip().removesuffix(".py") for n in args.only.split(",")}
            unknown = names - {p.stem for p in todo}
            if unknown:
                sys.exit(f"no such benchmark: {', '.join(sorted(unknown))}")
            todo = [p for p in todo if p.stem in names]
        elif RESULTS.exists():
            RESULTS.unlink()
        for path in todo:
            before = load()
            ok, lines = run_script(path, args.timeout)
            if ok:
                adopt_json_line(path.stem, lines, before)
            else:
                failed.append(path.name)
    _, missed = table()
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    sys.exit(1 if failed or (args.strict and missed) else 0)


if __name__ == "__main__":
    main()
