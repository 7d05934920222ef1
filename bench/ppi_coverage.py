"""Coverage of the judge-corrected intervals (issue 16), by simulation with known truth.

Each repetition draws a synthetic run: ``N`` five-turn dialogues whose true labels come from a
per-dialogue UNSAFE propensity (so turns of a dialogue are correlated, as in real runs), a
judge that errs with a fixed confusion matrix (it over-calls UNSAFE, like the embedded judge),
and a gold sample of ``n`` dialogues drawn at random. The truth is the generating process's
value of each metric (computed once on 40,000 dialogues). It reports, over the repetitions,
how often each 95% interval covers the truth: the corrected (PPI) interval should cover it
93-97% of the time; the judge-only interval, which takes the judge's labels as truth, should
not; the gold-only interval covers it but is wider.

Run: ``python bench/ppi_coverage.py [--reps 1000] [--figure docs/img/ppi_coverage.png]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _common import record
from medpress.metrics import LABELS, LabelRow, compute_groups
from medpress.metrics.corrected import corrected_groups

METRICS = ("UAR", "SAR", "FR", "ToF", "NoF")
# rows: true label; columns: P(judge says SAFE, UNSAFE, AMBIGUOUS)
JUDGE = {"SAFE": (0.80, 0.15, 0.05), "UNSAFE": (0.05, 0.75, 0.20),
         "AMBIGUOUS": (0.10, 0.30, 0.60)}
TURNS = 5


def true_labels(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, TURNS) label codes (index into LABELS): UNSAFE with a per-dialogue propensity."""
    p = rng.beta(2.0, 3.0, size=n)[:, None]
    unsafe = rng.random((n, TURNS)) < p
    safe = rng.random((n, TURNS)) < 0.6
    return np.where(unsafe, 1, np.where(safe, 0, 2))


def judge(rng: np.random.Generator, truth: np.ndarray) -> np.ndarray:
    cum = np.cumsum(np.array([JUDGE[lab] for lab in LABELS]), axis=1)[truth]
    return (rng.random(truth.shape)[..., None] > cum).sum(-1)


def rows(codes: np.ndarray, keep: np.ndarray | None = None) -> list[LabelRow]:
    return [LabelRow("m", "direct", f"D{i:05d}", "fam", t + 1, LABELS[int(codes[i, t])],
                     n_turns=TURNS)
            for i in range(len(codes)) if keep is None or keep[i] for t in range(TURNS)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--n-dialogues", type=int, default=600)
    ap.add_argument("--n-gold", type=int, default=100)
    ap.add_argument("--figure", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    truth_run = compute_groups(rows(true_labels(rng, 40_000)), n_boot=0)[0]
    truth = {m: truth_run.value(m) for m in METRICS}
    cover = {k: {m: 0 for m in METRICS} for k in ("corrected", "judge_only", "gold_only")}
    width = {k: {m: 0.0 for m in METRICS} for k in cover}
    t0 = time.perf_counter()
    for _ in range(args.reps):
        t = true_labels(rng, args.n_dialogues)
        j = judge(rng, t)
        gold = np.zeros(args.n_dialogues, dtype=bool)
        gold[rng.choice(args.n_dialogues, args.n_gold, replace=False)] = True
        g = corrected_groups(rows(j), rows(t, gold), n_boot=200,
                             seed=int(rng.integers(1 << 30)))[0]
        for kind, est in (("corrected", g.corrected), ("judge_only", g.judge_only),
                          ("gold_only", g.gold_only)):
            for m in METRICS:
                ci = est[m].ci
                assert ci is not None
                cover[kind][m] += ci[0] <= truth[m] <= ci[1]
                width[kind][m] += ci[1] - ci[0]
    secs = time.perf_counter() - t0
    print(f"{args.reps} runs of {args.n_dialogues} dialogues, gold sample {args.n_gold}, "
          f"{secs:.0f} s; truth: " + ", ".join(f"{m} {truth[m]:.3f}" for m in METRICS))
    print(f"{'interval':<12}" + "".join(f"{m:>16}" for m in METRICS))
    for kind in cover:
        cells = [f"{cover[kind][m] / args.reps:6.3f} (w {width[kind][m] / args.reps:.3f})"
                 for m in METRICS]
        print(f"{kind:<12}" + "".join(f"{c:>16}" for c in cells))
    figures = {}
    for m in METRICS:
        rate = float(cover["corrected"][m] / args.reps)
        figures[f"ppi_coverage_{m}"] = {"value": rate, "target": "0.93-0.97",
                                        "met": bool(0.93 <= rate <= 0.97)}
        figures[f"naive_coverage_{m}"] = {"value": float(cover["judge_only"][m] / args.reps),
                                          "target": None, "met": None}
    record(figures)
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.6))
        x = np.arange(len(METRICS))
        for k, (kind, label) in enumerate((("judge_only", "judge only (naive)"),
                                           ("corrected", "corrected (PPI)"),
                                           ("gold_only", "gold sample only"))):
            ax.bar(x + (k - 1) * 0.27, [cover[kind][m] / args.reps for m in METRICS], 0.27,
                   label=label)
        ax.axhspan(0.93, 0.97, color="grey", alpha=0.25, lw=0)
        ax.axhline(0.95, color="black", lw=0.8)
        ax.set_xticks(x, METRICS)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("coverage of the truth")
        ax.set_title(f"95% intervals over {args.reps} simulated runs "
                     f"({args.n_dialogues} dialogues, {args.n_gold} gold-labelled)", fontsize=9)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
