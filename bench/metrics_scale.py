"""Scale benchmark for medpress.metrics.compute_groups.

Builds a seeded synthetic table of 240,000 labels (20 models x 4 conditions x 600 dialogues
x 5 turns), times `compute_groups` with 1,000 bootstrap resamples, and times one pandas
``groupby([model, condition]).label_is_unsafe.mean()`` over the same table as a floor.
Prints both times, their ratio, and a JSON line. Run: ``python bench/metrics_scale.py``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

try:
    import medpress.metrics  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np
import pandas as pd

from medpress.metrics import FAILURE_MODES, LABELS, LabelRow, compute_groups

N_MODELS = 20
CONDITIONS = ("direct", "persona", "direct_anti", "persona_anti")
N_DIALOGUES = 600
N_TURNS = 5
FAMILIES = ("medication_treatment", "self_care", "symptom_triage")


def synthetic_rows(seed: int = 0) -> list[LabelRow]:
    """Labels whose UNSAFE share rises with the turn, with ~1% unjudged, as in the paper."""
    rng = np.random.default_rng(seed)
    n = N_MODELS * len(CONDITIONS) * N_DIALOGUES * N_TURNS
    turn = np.tile(np.arange(1, N_TURNS + 1), n // N_TURNS)
    p_unsafe = np.array([0.06, 0.58, 0.65, 0.70, 0.76])[turn - 1]
    u = rng.random(n)
    label_idx = np.where(u < p_unsafe, 1, np.where(u < p_unsafe + 0.2 * (1 - p_unsafe), 2, 0))
    unjudged = rng.random(n) < 0.01
    mode_idx = rng.integers(0, len(FAILURE_MODES), n)
    rows: list[LabelRow] = []
    i = 0
    for m in range(N_MODELS):
        for cond in CONDITIONS:
            for d in range(N_DIALOGUES):
                did, fam = f"D-{d:04d}", FAMILIES[d % len(FAMILIES)]
                for t in range(1, N_TURNS + 1):
                    label = None if unjudged[i] else LABELS[label_idx[i]]
                    mode = FAILURE_MODES[mode_idx[i]] if label in ("UNSAFE", "AMBIGUOUS") else None
                    rows.append(LabelRow(f"model-{m:02d}", cond, did, fam, t, label, mode))
                    i += 1
    return rows


def main() -> None:
    rows = synthetic_rows()
    print(f"{len(rows):,} labels")

    start = time.perf_counter()
    groups = compute_groups(rows, n_boot=1000, seed=0)
    metrics_s = time.perf_counter() - start
    print(f"compute_groups (1,000 resamples, {len(groups)} groups): {metrics_s:.2f} s")

    df = pd.DataFrame(
        {
            "model": [r.model for r in rows],
            "condition": [r.condition for r in rows],
            "label_is_unsafe": [r.label == "UNSAFE" for r in rows],
        }
    )
    start = time.perf_counter()
    df.groupby(["model", "condition"]).label_is_unsafe.mean()
    pandas_s = time.perf_counter() - start
    ratio = metrics_s / pandas_s
    print(f"pandas groupby mean (no intervals): {pandas_s:.4f} s")
    print(f"ratio: {ratio:.1f}x")
    print(json.dumps({"metrics_scale_s": metrics_s, "pandas_groupby_s": pandas_s, "ratio": ratio}))


if __name__ == "__main__":
    main()
