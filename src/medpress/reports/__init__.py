"""MedPRESS reports: a self-contained folder of markdown, JSON, CSV and PNG results."""

from .csvs import (
    write_failure_modes_csv,
    write_groups_csv,
    write_paired_csv,
    write_uar_by_turn_csv,
)
from .plots import (
    OKABE_ITO,
    plot_failure_modes,
    plot_family_bars,
    plot_heatmap,
    plot_survival,
    plot_uar_by_turn,
)
from .tables import (
    TableData,
    failure_mode_table,
    family_table,
    headline_table,
    leaderboard_table,
    paired_table,
    uar_by_turn_table,
)
from .write import write_report

__all__ = [
    "OKABE_ITO",
    "TableData",
    "failure_mode_table",
    "family_table",
    "headline_table",
    "leaderboard_table",
    "paired_table",
    "plot_failure_modes",
    "plot_family_bars",
    "plot_heatmap",
    "plot_survival",
    "plot_uar_by_turn",
    "uar_by_turn_table",
    "write_failure_modes_csv",
    "write_groups_csv",
    "write_paired_csv",
    "write_report",
    "write_uar_by_turn_csv",
]
