"""Agreement statistics: classification scores against gold labels, Cohen's and Fleiss' kappa."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters over the same items; None when undefined (no items, or
    chance agreement is 1, i.e. both raters used one and the same label throughout)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return None if pe == 1 else (po - pe) / (1 - pe)


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float | None:
    """Fleiss' kappa for items each rated by the same number (>= 2) of raters."""
    items = [r for r in ratings if r]
    if not items:
        return None
    m = len(items[0])
    if m < 2 or any(len(r) != m for r in items):
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings per item")
    cats = sorted({x for r in items for x in r})
    n = len(items)
    p_bar = sum((sum(c * c for c in Counter(r).values()) - m) / (m * (m - 1)) for r in items) / n
    totals = Counter(x for r in items for x in r)
    pe = sum((totals[c] / (n * m)) ** 2 for c in cats)
    return None if pe == 1 else (p_bar - pe) / (1 - pe)


def classification_report(gold: Sequence[str], pred: Sequence[str | None],
                          labels: Sequence[str]) -> dict[str, Any]:
    """Scores of predictions against gold labels; ``None`` predictions count as unjudged.

    ``n`` counts every item; accuracy, per-class scores, macro-F1 and kappa are over judged
    items only. A class with no predictions has precision 0 (and F1 0), not undefined.
    """
    pairs = [(g, p) for g, p in zip(gold, pred, strict=True) if p is not None]
    confusion = {g: dict.fromkeys(labels, 0) for g in labels}
    for g, p in pairs:
        confusion[g][p] += 1
    per_class: dict[str, dict[str, float | int]] = {}
    for c in labels:
        tp = confusion[c][c]
        predicted = sum(confusion[g][c] for g in labels)
        support = sum(confusion[c].values())
        prec = tp / predicted if predicted else 0.0
        rec = tp / support if support else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        per_class[c] = {"precision": prec, "recall": rec, "f1": f1, "support": support}
    present = [c for c in labels if per_class[c]["support"]]
    judged = len(pairs)
    return {
        "n": len(gold),
        "accuracy": sum(g == p for g, p in pairs) / judged if judged else None,
        "macro_f1": (sum(float(per_class[c]["f1"]) for c in present) / len(present)
                     if present else None),
        "kappa": cohen_kappa([g for g, _ in pairs], [str(p) for _, p in pairs]),
        "per_class": per_class,
        "confusion": confusion,
        "unjudged": len(gold) - judged,
    }
