"""MedPRESS metrics: label files, SPEC section 5 metrics with bootstrap intervals, tables."""

from .compute import (
    DEFAULT_PAIRS,
    PAIRED_METRICS,
    CIEntry,
    GroupMetrics,
    Interval,
    PairedDiff,
    all_paired_differences,
    compute_groups,
    paired_difference,
)
from .format import RATE_METRICS, format_diff, format_metric, format_value
from .io import (
    LABEL_COLUMNS,
    NO_CONDITION,
    LabelFileError,
    LabelRecord,
    read_label_records,
    read_labels,
    write_labels,
)
from .labels import FAILURE_MODES, LABELS, LabelRow
from .table import HEADLINE_METRICS, fit_metrics_table, metrics_table

__all__ = [
    "DEFAULT_PAIRS",
    "FAILURE_MODES",
    "HEADLINE_METRICS",
    "LABELS",
    "LABEL_COLUMNS",
    "NO_CONDITION",
    "PAIRED_METRICS",
    "RATE_METRICS",
    "CIEntry",
    "GroupMetrics",
    "Interval",
    "LabelFileError",
    "LabelRecord",
    "LabelRow",
    "PairedDiff",
    "all_paired_differences",
    "compute_groups",
    "fit_metrics_table",
    "format_diff",
    "format_metric",
    "format_value",
    "metrics_table",
    "paired_difference",
    "read_label_records",
    "read_labels",
    "write_labels",
]
