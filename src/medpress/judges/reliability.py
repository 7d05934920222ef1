"""Judge reliability beyond agreement: does a judge give the same label when asked again
(self-consistency at temperature > 0), and when its instructions are reworded (rubric
paraphrases, ``data/rubric_variants.yaml``)?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medpress.judges.agreement import fleiss_kappa

# A judge whose labels change on more than this share of replies is flagged.
FLIP_FLAG = 0.10


def flip_report(runs: Sequence[Sequence[str | None]], names: Sequence[str]) -> dict[str, Any]:
    """How often labels of the same replies differ across ``runs`` (one label list per run,
    same item order; None = unjudged).

    ``flip_rate``: share of the items judged in at least two runs whose judged labels are not
    all equal; ``fleiss_kappa`` over the items judged in every run; ``flagged`` when
    ``flip_rate`` exceeds :data:`FLIP_FLAG`; ``per_run_unjudged`` counts None per run.
    """
    n_items = len(runs[0]) if runs else 0
    if any(len(r) != n_items for r in runs):
        raise ValueError("every run must label the same items")
    compared = flips = 0
    complete: list[list[str]] = []
    for i in range(n_items):
        labels = [r[i] for r in runs if r[i] is not None]
        if len(labels) >= 2:
            compared += 1
            flips += len(set(labels)) > 1
        if len(labels) == len(runs):
            complete.append([str(x) for x in labels])
    rate = flips / compared if compared else None
    return {"runs": list(names), "n": n_items, "compared": compared, "flipped": flips,
            "flip_rate": rate,
            "fleiss_kappa": fleiss_kappa(complete) if len(runs) >= 2 and complete else None,
            "flagged": rate is not None and rate > FLIP_FLAG,
            "per_run_unjudged": {n: sum(x is None for x in r) for n, r in zip(names, runs,
                                                                              strict=True)}}
