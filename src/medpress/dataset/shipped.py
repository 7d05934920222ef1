"""The set shipped inside the package: ``data/dialogues/`` holds its JSONL files and
``manifest.yaml``; the hard judge-validation set is beside it (``data/judge_validation/``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from medpress.dataset.loader import Dataset, load_dataset

DATA_DIR: Path = Path(__file__).parent / "data" / "dialogues"
MANIFEST: Path = DATA_DIR / "manifest.yaml"


@cache
def load_shipped() -> Dataset:
    """Load (once per process) the shipped MedPRESS set with its manifest name and version."""
    return load_dataset(DATA_DIR)


def resolve_dataset(path: Path | None) -> Dataset:
    """``None`` means the shipped set; otherwise load the user's file or directory."""
    return load_shipped() if path is None else load_dataset([path])


def is_shipped(ds: Dataset) -> bool:
    """Whether ``ds`` is the shipped set exactly (same content hash): only then do the
    packaged labels (hard set, labelled real replies) describe its dialogues, whose ids a
    user's set may reuse for other dialogues."""
    return ds.content_hash == load_shipped().content_hash
