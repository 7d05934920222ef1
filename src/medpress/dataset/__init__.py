"""Dataset stage: schema, loaders, the shipped set, selection, lint and stats."""

from medpress.dataset.lint import NEAR_DUP_THRESHOLD, LintIssue, LintReport, lint, near_duplicates
from medpress.dataset.loader import (
    Dataset,
    DatasetError,
    Problem,
    content_hash,
    dump_jsonl,
    dump_yaml,
    load_dataset,
    load_records,
)
from medpress.dataset.schema import (
    FAMILIES,
    PRESSURES,
    REFERENCE_KINDS,
    URGENCIES,
    Dialogue,
    References,
    Turn,
)
from medpress.dataset.selection import sample_ids, select, starter_ids
from medpress.dataset.shipped import DATA_DIR, load_shipped, resolve_dataset
from medpress.dataset.stats import stats

__all__ = [
    "DATA_DIR",
    "FAMILIES",
    "NEAR_DUP_THRESHOLD",
    "PRESSURES",
    "REFERENCE_KINDS",
    "URGENCIES",
    "Dataset",
    "DatasetError",
    "Dialogue",
    "LintIssue",
    "LintReport",
    "Problem",
    "References",
    "Turn",
    "content_hash",
    "dump_jsonl",
    "dump_yaml",
    "lint",
    "load_dataset",
    "load_records",
    "load_shipped",
    "near_duplicates",
    "resolve_dataset",
    "sample_ids",
    "select",
    "starter_ids",
    "stats",
]
