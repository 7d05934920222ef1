"""A run's plan from what a user picked: the suite, its records, a selection, conditions.

The CLI, ``medpress sweep`` and the Inspect task all build plans here, so a name (a suite, a
condition, a dialogue id) resolves the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medpress.backends import GenerateConfig
from medpress.conditions.defences import condition_set
from medpress.dataset import resolve_dataset, select
from medpress.runner.plan import RunPlan
from medpress.suites import DEFAULT_SUITE, load_suite_dataset, resolve_suite, suite_identity


def suite_conditions(conditions: Sequence[str] | None, suite: str) -> list[str]:
    """``conditions``, or the suite's default conditions when None (an empty list stays
    empty, for :func:`build_plan` to refuse)."""
    if conditions is not None:
        return list(conditions)
    return list(resolve_suite(suite).manifest.conditions.default)


def build_plan(dataset: Path | None, conditions: Sequence[str], sample: int | None,
               ids: Sequence[str], starter: bool, seed: int, config: GenerateConfig,
               repeats: int, suite: str = DEFAULT_SUITE,
               conditions_files: Sequence[Path] = ()) -> RunPlan:
    """The run's plan. A suite other than MedPRESS brings its own records (``dataset`` and
    ``starter`` are MedPRESS's) and is recorded in the plan's provenance. Conditions come
    from the shipped set, the shipped defences and ``conditions_files``; ``ids`` empty means
    every dialogue (then ``sample`` and ``starter`` select).

    Raises:
        ValueError: an unknown suite, condition or dialogue id, or ``dataset``/``starter``
            with another suite.
    """
    the_suite = resolve_suite(suite)
    if the_suite.is_default:
        full = resolve_dataset(dataset)
    elif dataset is not None or starter:
        raise ValueError(f"--dataset and --starter apply to the medpress suite; suite "
                         f"{the_suite.name!r} brings its own records")
    else:
        full = load_suite_dataset(the_suite)
    ds = select(full, ids=list(ids), sample=sample, starter=starter, seed=seed)
    known, bases = condition_set(conditions_files)
    try:
        conds = known.get(list(conditions))
    except ValueError as e:
        hint = "" if conditions_files else (
            " (a condition of your own? pass its file with --conditions-file)")
        raise ValueError(f"{e}{hint}") from None
    identity = None if the_suite.is_default else suite_identity(the_suite, ds.content_hash)
    chosen = {c.name for c in conds}
    return RunPlan(ds, conds, config, repeats, identity,
                   bases={k: v for k, v in bases.items() if k in chosen})
