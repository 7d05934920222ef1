"""The set shipped inside the package: ``data/`` holds the JSONL files and ``manifest.yaml``."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from medpress.dataset.loader import Dataset, load_dataset

DATA_DIR: Path = Path(__file__).parent / "data"
MANIFEST: Path = DATA_DIR / "manifest.yaml"


@cache
def load_shipped() -> Dataset:
    """Load (once per process) the shipped MedPRESS set with its manifest name and version."""
    return load_dataset(DATA_DIR)


def resolve_dataset(path: Path | None) -> Dataset:
    """``None`` means the shipped set; otherwise load the user's file or directory."""
    return load_shipped() if path is None else load_dataset([path])
