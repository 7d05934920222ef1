"""Finding the dialogues a stored run was generated from, and proving they are unchanged."""

from __future__ import annotations

from pathlib import Path

from medpress.dataset import Dataset, load_dataset, load_shipped
from medpress.store import RunStore, StoreError


def run_dataset(store: RunStore, override: Path | None = None) -> Dataset:
    """The run's dialogues: ``override`` if given, else the recorded paths, else the shipped set;
    for a run of another suite (a ``suite`` meta key), that suite's records.

    Raises:
        StoreError: if the dialogues found are not the ones the run used (hash mismatch).
    """
    meta = store.get_meta("dataset") or {}
    suite_meta = store.get_meta("suite")
    if suite_meta:
        from medpress.suites import load_suite_dataset, stored_suite

        if override is not None:
            raise ValueError(f"--dataset applies to medpress runs; {store.run_dir} is a run of "
                             f"suite {suite_meta.get('name')!r}, whose records it finds itself")
        ds = load_suite_dataset(stored_suite(suite_meta))
    elif override is not None:
        ds = load_dataset([override])
    elif meta.get("paths") and all(Path(p).exists() for p in meta["paths"]):
        ds = load_dataset([Path(p) for p in meta["paths"]])
    else:
        ds = load_shipped()
    ds = ds.subset(meta.get("ids", []))
    if ds.content_hash != meta.get("hash"):
        raise StoreError(f"the dialogues found for {store.run_dir} differ from those the run used "
                         "(content hash mismatch); pass --dataset with the original set")
    return ds
