"""Scale: the paper's 240,000-reply grid, scripted, then labels, metrics and the report.

Workload (defaults): 20 model names (``scripted/`` behaviours) x 4 conditions x 600 synthetic
dialogues x 5 turns = 240,000 replies, one run directory per model, generated in-process with
``medpress.runner.generate`` (the store commits every reply). Then, per run, labels derived from
the scripted behaviour are imported with ``medpress.judges.import_labels`` (what
``medpress labels import`` does); then ``compute_groups`` (1,000 bootstrap resamples) and
``medpress.reports.write_report`` over all 20 runs, each timed.

Figures: wall time and turns/s of generation, peak RSS (VmHWM, i.e. ``getrusage``'s
ru_maxrss without what it inherits from a parent process) after generation and at the end,
RSS growth from the first run to the last (bounded memory means it stays flat), store size
per 1,000 turns, and the import / metrics / report times.
Targets: peak RSS <= 1 GiB and growth <= 64 MiB over the runs (streaming, not everything in
RAM); metrics and report each <= 60 s ("seconds").

Run: ``python bench/scale.py [--models N] [--dialogues N] [--n-boot N] [--out DIR]``.
``--no-record`` leaves bench/results.json alone; ``--json`` prints a JSON summary last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import record, synthetic_set
from medpress.backends import GenerateConfig, ScriptedBackend, stance_for
from medpress.cli.results import rows_from_runs
from medpress.conditions import DEFAULT_CONDITIONS, load_conditions
from medpress.dataset import load_dataset
from medpress.judges import import_labels
from medpress.metrics import compute_groups
from medpress.reports import write_report
from medpress.runner import RunPlan, generate
from medpress.store import DB_NAME, RunStore

BEHAVIOURS = ("always_unsafe", "caves_at_3", "flip_flop", "always_safe", "hedger",
              *(f"caves_at_{k}" for k in (1, 2, *range(4, 17))))
MODES = {"UNSAFE": "direct_capitulation", "AMBIGUOUS": "noncommittal_hedge", "SAFE": None}
LABELLER = "scripted-truth"
MAX_RSS_MB, MAX_GROWTH_MB, MAX_STEP_S = 1024, 64, 60


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM where /proc has it, else ``getrusage``'s ru_maxrss.

    ru_maxrss survives fork and exec, so a benchmark started from a big process (pytest, an
    IDE) would report its parent's peak; VmHWM belongs to this process image alone.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return getrusage_peak_mb()


def getrusage_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1024**2


def write_truth(store: RunStore, behaviour: str, path: Path) -> None:
    """The label each stored reply deserves, from the behaviour that wrote it (streamed)."""
    model = f"scripted/{behaviour}"
    with path.open("w") as f:
        for t in store.iter_turns():
            label = stance_for(behaviour, t["turn"]).upper()
            f.write(json.dumps({"model": model, "condition": t["condition"],
                                "dialogue_id": t["dialogue_id"], "family": t["family"],
                                "turn": t["turn"], "repeat": t["repeat"], "label": label,
                                "failure_mode": MODES[label]}) + "\n")


def run(n_models: int, n_dialogues: int, conditions: list[str], n_boot: int,
        root: Path) -> dict[str, Any]:
    # On disk, so the runs record where their dialogues are and reports find each one's length.
    root.mkdir(parents=True, exist_ok=True)
    set_path = root / "set.jsonl"
    set_path.write_text("".join(d.model_dump_json(exclude_none=True) + "\n"
                                for d in synthetic_set(n_dialogues)))
    ds = load_dataset([set_path])
    plan = RunPlan(ds, load_conditions().get(conditions), GenerateConfig())
    per_run = plan.turns_per_condition() * len(conditions)
    run_dirs: list[Path] = []
    rss_after: list[float] = []
    turns = 0
    t0 = time.perf_counter()
    for behaviour in BEHAVIOURS[:n_models]:
        rd = root / "runs" / behaviour
        store = RunStore(rd)
        s = asyncio.run(generate(ScriptedBackend(behaviour), store, plan, concurrency=32))
        assert s.turns_done == per_run and s.failed_turns == 0, s.as_dict()
        assert store.count_turns() == per_run
        store.close()
        turns += s.turns_done
        run_dirs.append(rd)
        rss_after.append(current_rss_mb())
    gen_s = time.perf_counter() - t0
    gen_peak = peak_rss_mb()
    store_bytes = sum(f.stat().st_size for rd in run_dirs for f in rd.iterdir()
                      if f.name.startswith(DB_NAME))

    t0 = time.perf_counter()
    for rd, behaviour in zip(run_dirs, BEHAVIOURS, strict=False):
        store = RunStore.open_existing(rd)
        write_truth(store, behaviour, rd / "truth.jsonl")
        summary = import_labels(store, rd / "truth.jsonl", LABELLER)
        assert summary.added == per_run, summary
        store.close()
    import_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    runs = rows_from_runs(run_dirs, None)
    rows = runs.rows
    read_s = time.perf_counter() - t0
    assert len(rows) == turns and all(r.label is not None for r in rows)

    t0 = time.perf_counter()
    groups = compute_groups(rows, n_boot=n_boot, seed=0)
    metrics_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = write_report(root / "report", rows, runs.provenance, judge=runs.judge,
                          notes=runs.notes, n_boot=n_boot)
    report_s = time.perf_counter() - t0
    assert "Leaderboard" in report.read_text() or n_models == 1

    uar: dict[str, dict[str, float | None]] = {g.model: {} for g in groups}
    for g in groups:
        if g.family == "all":
            uar[g.model][g.condition] = g.UAR
    return {
        "models": n_models, "conditions": len(conditions), "dialogues": n_dialogues,
        "turns": turns, "generate_s": gen_s, "turns_per_s": turns / gen_s,
        "peak_rss_generate_mb": gen_peak, "peak_rss_end_mb": peak_rss_mb(),
        "getrusage_maxrss_end_mb": getrusage_peak_mb(),
        "rss_after_first_run_mb": rss_after[0], "rss_after_last_run_mb": rss_after[-1],
        "rss_growth_mb": rss_after[-1] - rss_after[0],
        "store_kb_per_1000_turns": store_bytes / 1024 / (turns / 1000),
        "store_mb_total": store_bytes / 1024**2,
        "import_labels_s": import_s, "read_labels_s": read_s, "metrics_s": metrics_s,
        "report_s": report_s, "n_boot": n_boot, "report": str(report), "uar": uar,
    }


def figures(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    def info(v: float) -> dict[str, Any]:
        return {"value": v, "target": None, "met": None}

    def at_most(v: float, limit: float, unit: str) -> dict[str, Any]:
        return {"value": v, "target": f"<= {limit} {unit}", "met": v <= limit}

    grid = f"{r['models']}x{r['conditions']}x{r['dialogues']}x5"
    return {
        "scale_turns": {**info(r["turns"]), "grid": grid},
        "scale_generate_wall_s": info(r["generate_s"]),
        "scale_generate_turns_per_s": info(r["turns_per_s"]),
        "scale_peak_rss_generate_mb": at_most(r["peak_rss_generate_mb"], MAX_RSS_MB, "MB"),
        "scale_peak_rss_end_mb": at_most(r["peak_rss_end_mb"], MAX_RSS_MB, "MB"),
        "scale_rss_growth_first_to_last_run_mb": at_most(r["rss_growth_mb"], MAX_GROWTH_MB,
                                                         "MB"),
        "scale_store_kb_per_1000_turns": info(r["store_kb_per_1000_turns"]),
        "scale_import_labels_s": info(r["import_labels_s"]),
        "scale_read_labels_s": info(r["read_labels_s"]),
        "scale_metrics_s": at_most(r["metrics_s"], MAX_STEP_S, "s"),
        "scale_report_s": at_most(r["report_s"], MAX_STEP_S, "s"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=20, choices=range(1, len(BEHAVIOURS) + 1),
                    metavar=f"1..{len(BEHAVIOURS)}")
    ap.add_argument("--dialogues", type=int, default=600)
    ap.add_argument("--conditions", default=",".join(DEFAULT_CONDITIONS))
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--out", type=Path, help="keep the runs and report here (default: temp)")
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results.json")
    ap.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    args = ap.parse_args()
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    tmp = None if args.out else Path(tempfile.mkdtemp(prefix="medpress-scale-"))
    root = args.out or tmp
    assert root is not None
    try:
        r = run(args.models, args.dialogues, conditions, args.n_boot, root)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{r['turns']:,} replies ({r['models']} models x {r['conditions']} conditions x "
          f"{r['dialogues']} dialogues x 5 turns) in {r['generate_s']:.1f} s "
          f"({r['turns_per_s']:,.0f} turns/s)")
    print(f"peak RSS {r['peak_rss_generate_mb']:.0f} MB after generation, "
          f"{r['peak_rss_end_mb']:.0f} MB at the end; RSS growth first->last run "
          f"{r['rss_growth_mb']:+.1f} MB")
    print(f"store {r['store_kb_per_1000_turns']:.0f} KB per 1,000 turns "
          f"({r['store_mb_total']:.0f} MB in all)")
    print(f"labels import {r['import_labels_s']:.1f} s, read {r['read_labels_s']:.1f} s, "
          f"metrics ({r['n_boot']} resamples) {r['metrics_s']:.1f} s, "
          f"report {r['report_s']:.1f} s")
    if not args.no_record:
        record(figures(r))
    if args.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
