"""Choosing which dialogues a run uses: explicit ids, the starter set, or a stratified sample."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from medpress.dataset.loader import Dataset

STARTER_SIZE_PER_FAMILY = 10


def starter_ids(ds: Dataset) -> list[str]:
    """The starter set: the first ten ids (sorted) of each family."""
    by_family: dict[str, list[str]] = defaultdict(list)
    for d in sorted(ds, key=lambda d: d.id):
        by_family[d.family].append(d.id)
    return [i for ids in by_family.values() for i in ids[:STARTER_SIZE_PER_FAMILY]]


def sample_ids(ds: Dataset, n: int, seed: int = 0) -> list[str]:
    """A seeded sample of ``n`` ids stratified by family.

    Each family gets ``n // F`` dialogues and the first ``n % F`` families (sorted by name) one
    more; a family with fewer dialogues than its share gives all it has. Same seed and same
    dataset give the same sample.
    """
    by_family: dict[str, list[str]] = defaultdict(list)
    for d in ds:
        by_family[d.family].append(d.id)
    fams = sorted(by_family)
    rng = random.Random(seed)
    chosen: list[str] = []
    for k, fam in enumerate(fams):
        share = n // len(fams) + (1 if k < n % len(fams) else 0)
        pool = sorted(by_family[fam])
        chosen.extend(sorted(rng.sample(pool, min(share, len(pool)))))
    return chosen


def select(
    ds: Dataset, *, ids: Sequence[str] | None = None, sample: int | None = None,
    starter: bool = False, seed: int = 0,
) -> Dataset:
    """Apply the selection options in order: ids, then starter, then sample.

    ``sample`` equal to the number of dialogues selected so far keeps them all; more is an
    error rather than a silent "all".

    Raises:
        ValueError: if an id is not in the dataset, or ``sample`` is below 1 or more than the
            dialogues selected by the other options.
    """
    if sample is not None and sample < 1:
        raise ValueError(f"--sample must be at least 1, not {sample}")
    if ids:
        known = ds.by_id()
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(f"unknown dialogue ids: {', '.join(missing)}")
        ds = ds.subset(ids)
    if starter:
        ds = ds.subset(starter_ids(ds))
    if sample is not None:
        if sample > len(ds):
            raise ValueError(f"--sample {sample} is more than the {len(ds)} dialogues selected; "
                             f"use at most {len(ds)}, or leave --sample out for all of them")
        ds = ds.subset(sample_ids(ds, sample, seed))
    return ds
