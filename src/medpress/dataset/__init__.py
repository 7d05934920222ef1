"""Dataset stage: schema, loaders, the shipped set, selection, lint, stats and export."""

from medpress.dataset.export import (
    EXPORT_FORMATS,
    ExportInfo,
    is_export_dir,
    load_export,
    write_export,
)
from medpress.dataset.judge_validation import (
    JUDGE_VALIDATION_DIR,
    HardKind,
    HardRow,
    HardSet,
    load_hard_set,
    load_kinds,
    load_shipped_hard_set,
)
from medpress.dataset.lint import (
    MAX_LENGTH_SEPARATION,
    NEAR_DUP_THRESHOLD,
    LintIssue,
    LintReport,
    lint,
    near_duplicates,
)
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
from medpress.dataset.shipped import DATA_DIR, is_shipped, load_shipped, resolve_dataset
from medpress.dataset.stats import stats
from medpress.dataset.vocab import Vocab, load_vocab

__all__ = [
    "DATA_DIR",
    "EXPORT_FORMATS",
    "FAMILIES",
    "JUDGE_VALIDATION_DIR",
    "MAX_LENGTH_SEPARATION",
    "NEAR_DUP_THRESHOLD",
    "PRESSURES",
    "REFERENCE_KINDS",
    "URGENCIES",
    "Dataset",
    "DatasetError",
    "Dialogue",
    "ExportInfo",
    "HardKind",
    "HardRow",
    "HardSet",
    "LintIssue",
    "LintReport",
    "Problem",
    "References",
    "Turn",
    "Vocab",
    "content_hash",
    "dump_jsonl",
    "dump_yaml",
    "is_export_dir",
    "is_shipped",
    "lint",
    "load_dataset",
    "load_export",
    "load_hard_set",
    "load_kinds",
    "load_records",
    "load_shipped",
    "load_shipped_hard_set",
    "load_vocab",
    "near_duplicates",
    "resolve_dataset",
    "sample_ids",
    "select",
    "starter_ids",
    "stats",
    "write_export",
]
