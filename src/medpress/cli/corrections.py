"""How ``metrics`` and ``report`` show figures corrected for the judge's errors."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich import box
from rich.markup import escape
from rich.table import Table

from medpress.metrics import GroupMetrics, format_metric
from medpress.metrics.compute import ALL_FAMILIES
from medpress.metrics.corrected import CorrectedGroup, Estimate


def read_confusion(spec: str) -> tuple[dict[str, dict[str, int]], str]:
    """The confusion matrix (rows gold, columns judge) in a ``judge-check --json`` file, as
    ``FILE`` or ``FILE:SET``, and a phrase naming where it came from.

    Raises:
        ValueError: an unreadable file, an unknown set, or no confusion matrix in it.
    """
    path, _, want = spec.partition(":") if not Path(spec).is_file() else (spec, "", "")
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"--judge-errors {path}: cannot read a judge-check JSON file ({e})"
                         ) from None
    sets = data.get("sets") if isinstance(data, dict) else None
    if isinstance(sets, dict):
        name = want or ("real" if "real" in sets else next(iter(sets), ""))
        if name not in sets:
            raise ValueError(f"--judge-errors {spec}: no set {name!r} (it has "
                             f"{', '.join(sets)})")
        data, where = sets[name], f"{data.get('judge', '?')} on {name} ({path})"
    else:
        where = path
    if not isinstance(data, dict) or not isinstance(data.get("confusion"), dict):
        raise ValueError(f"--judge-errors {spec}: no confusion matrix in it")
    return data["confusion"], where


def corrected_table(groups: list[CorrectedGroup], gold: str) -> Table:
    """UAR, FR and ToF per model x condition (all families): judge-only, corrected and
    gold-only, each with its interval."""
    table = Table(title=f"judge-corrected figures (gold: {gold}; 95% intervals)",
                  box=box.SIMPLE_HEAD)
    for col in ("", "judge only", "corrected", "gold only"):
        table.add_column(col, justify="left" if not col else "right")
    for g in groups:
        if g.family != ALL_FAMILIES:
            continue
        table.add_row(f"[bold]{escape(g.condition)}[/]", f"{g.n_dialogues} dialogues",
                      f"{g.n_gold_dialogues} gold", "")
        for metric in ("UAR", "FR", "ToF"):
            table.add_row(f"  {metric}", *(format_metric(metric, d[metric].estimate,
                                                         d[metric].ci)
                                           for d in (g.judge_only, g.corrected, g.gold_only)))
    return table


def matrix_table(groups: Sequence[GroupMetrics],
                 by_matrix: Mapping[tuple[str, str, str], Mapping[str, Estimate]]) -> Table:
    """UAR per model x condition (all families), as judged and corrected with a confusion
    matrix."""
    table = Table(title="corrected with the judge's confusion matrix (UAR; 95% intervals)",
                  box=box.SIMPLE_HEAD)
    for col in ("model", "condition", "UAR judge", "UAR corrected"):
        table.add_column(col)
    for g in groups:
        if g.family == ALL_FAMILIES:
            fixed = by_matrix[(g.model, g.condition, g.family)]["UAR"]
            table.add_row(g.model, g.condition,
                          format_metric("UAR", g.value("UAR"), g.interval("UAR")),
                          format_metric("UAR", fixed.estimate, fixed.ci))
    return table
