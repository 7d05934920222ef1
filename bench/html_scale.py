"""report.html at scale: 4 runs x 12,000 replies in one page, in headless Chromium.

Workload (defaults): 4 scripted runs (``caves_at_2``, ``caves_at_4``, ``flip_flop``,
``always_safe``) x 4 conditions x 600 synthetic dialogues x 5 turns = 48,000 replies, each
labelled by the toy judge (label, failure mode, an evidence span and a rationale; one run also
carries reasoning text), then ``write_report(..., html=True)`` over the four runs. The page is
opened from disk in headless Chromium (Debian's ``chromium`` driven by Playwright).

Figures (median of ``--loads`` page loads, each in a fresh page):
  * ``html_first_paint_ms``: first-contentful-paint of the results view (the default);
  * ``html_first_rows_ms``: loading ``#tab=transcripts``, time from navigation start until
    the first 50 rows and the counts are in the DOM (the script's ``medpress-ready`` mark);
  * ``html_filter_median_ms``: a filter changed (condition, run, label at a turn, failure
    mode, flip turn, ...; 10 changes) until the counts are updated and the next frame is
    painted; ``html_filter_max_ms`` the slowest of them;
  * ``html_search_median_ms``: the same for 10 full-text searches (the first one also builds
    the search index).
Targets: first paint and first rows <= 2,000 ms, filtering and search <= 200 ms. Also recorded
without a target: the file's size, the report's write time.

Run: ``python bench/html_scale.py [--runs N] [--dialogues N] [--loads N] [--keep DIR]``.
``--no-record`` leaves bench/results.json alone. Without ``chromium`` on PATH it says so and
records nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import record, synthetic_set
from medpress.backends import GenerateConfig, ScriptedBackend
from medpress.cli.results import rows_from_runs
from medpress.conditions import DEFAULT_CONDITIONS, load_conditions
from medpress.dataset import load_dataset
from medpress.reports import write_report
from medpress.runner import RunPlan, generate
from medpress.store import JUDGMENT_COLUMNS, RunStore
from medpress.testing.toy_judge import toy_verdict

BEHAVIOURS = ("caves_at_2", "caves_at_4", "flip_flop", "always_safe")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PAINT_MS, FILTER_MS = 2000.0, 200.0
REASONING = ("The user is pushing back with a personal story. The guidance has not changed, "
             "so I should keep the safe stance, acknowledge the experience, and say plainly "
             "what to do and when to get help. ") * 2
# (filter, value) changes timed in order; each is applied on top of the last.
FILTER_STEPS: tuple[tuple[str, str], ...] = (
    ("cond", "persona"), ("cond", "direct_anti"), ("run", "1"), ("lab", "UNSAFE"),
    ("lt", "2"), ("lt", "4"), ("mode", "caveated_permission"), ("run", ""), ("flip", "2"),
    ("fam", "self_care"),
)
SEARCHES = ("doctor", "should be fine", "dialogue 12 turn", "emergency", "zzzz-no-match",
            "you're right", "pharmacist", "turn 3", "probably", "clinician")
TIME_CHANGE = """async ([selector, value, isText]) => {
  const input = document.querySelector(selector);
  const mc = document.querySelector('[data-testid=match-count]');
  const seq = mc.getAttribute('data-seq');
  const t0 = performance.now();
  input.value = value;
  input.dispatchEvent(new Event(isText ? 'input' : 'change', {bubbles: true}));
  if (mc.getAttribute('data-seq') === seq) throw new Error('counts did not update');
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t0;
}"""


def judge_all(store: RunStore) -> None:
    """The toy judge's verdict on every reply, stored in one transaction."""
    sql = (f"INSERT INTO judgments ({', '.join(JUDGMENT_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(JUDGMENT_COLUMNS))})")
    rows = []
    now = time.time()
    for t in store.iter_turns():
        v = toy_verdict(t["reply"] or "")
        row = {"condition": t["condition"], "repeat": t["repeat"],
               "dialogue_id": t["dialogue_id"], "turn": t["turn"], "judge": "toy",
               "rubric_version": "bench", "created_at": now, **v}
        rows.append([row.get(c) for c in JUDGMENT_COLUMNS])
    with store.conn:
        store.conn.execute("BEGIN")
        store.conn.executemany(sql, rows)


def build(root: Path, n_runs: int, n_dialogues: int) -> tuple[Path, int, float]:
    """The runs and their report.html; (its path, replies, seconds to write the report)."""
    root.mkdir(parents=True, exist_ok=True)
    set_path = root / "set.jsonl"
    set_path.write_text("".join(d.model_dump_json(exclude_none=True) + "\n"
                                for d in synthetic_set(n_dialogues)))
    plan = RunPlan(load_dataset([set_path]), load_conditions().get(list(DEFAULT_CONDITIONS)),
                   GenerateConfig())
    run_dirs = []
    for i, behaviour in enumerate(BEHAVIOURS[:n_runs]):
        store = RunStore(root / "runs" / behaviour)
        asyncio.run(generate(ScriptedBackend(behaviour), store, plan, concurrency=32))
        if i == 0:
            with store.conn:
                store.conn.execute("UPDATE turns SET reasoning = ?", (REASONING,))
        judge_all(store)
        store.close()
        run_dirs.append(store.run_dir)
    runs = rows_from_runs(run_dirs, None)
    t0 = time.perf_counter()
    write_report(root / "report", runs.rows, runs.provenance, judge=runs.judge,
                 notes=runs.notes, n_boot=200, html=True, transcripts=runs.transcripts)
    return root / "report" / "report.html", len(runs.rows), time.perf_counter() - t0


def measure(path: Path, loads: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    url = path.as_uri()
    paint, rows, filters, searches = [], [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                    args=CHROMIUM_ARGS)
        for i in range(loads):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_selector("html[data-ready='1']")
            paint.append(page.evaluate(
                "performance.getEntriesByName('first-contentful-paint')[0].startTime"))
            page.close()
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url + "#tab=transcripts")
            page.wait_for_selector("html[data-ready='1']")
            rows.append(page.evaluate(
                "performance.getEntriesByName('medpress-ready')[0].startTime"))
            assert page.locator("[data-testid=unit-row]").count() == 50
            if i == 0:
                for name, value in FILTER_STEPS:
                    filters.append(page.evaluate(TIME_CHANGE, [f"[data-filter={name}]", value,
                                                               False]))
                page.click("[data-testid=filter-reset]")
                for q in SEARCHES:
                    searches.append(page.evaluate(TIME_CHANGE, ["[data-filter=q]", q, True]))
            page.close()
        browser.close()
    return {"paint": paint, "rows": rows, "filters": filters, "searches": searches}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=4, choices=range(1, len(BEHAVIOURS) + 1))
    ap.add_argument("--dialogues", type=int, default=600)
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep the runs and report here (default: temp)")
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results.json")
    args = ap.parse_args()
    if shutil.which("chromium") is None:
        print("html_scale: skipped, no `chromium` on PATH (apt-get install -y chromium)")
        return
    root = args.keep or Path(tempfile.mkdtemp(prefix="medpress-html-"))
    try:
        t0 = time.perf_counter()
        path, replies, write_s = build(root, args.runs, args.dialogues)
        size_mb = path.stat().st_size / 1e6
        print(f"built {replies} replies in {time.perf_counter() - t0:.1f} s; "
              f"report.html {size_mb:.1f} MB in {write_s:.1f} s")
        m = measure(path, args.loads)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)

    def at_most(values: list[float], limit: float, **extra: Any) -> dict[str, Any]:
        v = statistics.median(values)
        return {"value": v, "target": f"<= {limit:.0f} ms", "met": v <= limit, **extra}

    grid = f"{args.runs} runs x {replies // max(args.runs, 1)} replies"
    figures = {
        "html_first_paint_ms": at_most(m["paint"], PAINT_MS, grid=grid),
        "html_first_rows_ms": at_most(m["rows"], PAINT_MS, grid=grid),
        "html_filter_median_ms": at_most(m["filters"], FILTER_MS),
        "html_filter_max_ms": {"value": max(m["filters"]), "target": None, "met": None},
        "html_search_median_ms": at_most(m["searches"], FILTER_MS),
        "html_search_max_ms": {"value": max(m["searches"]), "target": None, "met": None},
        "html_file_mb": {"value": size_mb, "target": None, "met": None},
        "html_replies": {"value": replies, "target": None, "met": None, "grid": grid},
        "html_report_write_s": {"value": write_s, "target": None, "met": None},
    }
    if args.no_record:
        for name, fig in figures.items():
            print(f"{name:40s} {fig['value']:>12.3f}   target {fig.get('target')}")
    else:
        record(figures)


if __name__ == "__main__":
    main()
