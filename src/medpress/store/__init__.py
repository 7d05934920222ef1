"""Store stage: the SQLite run store and exports."""

from medpress.store.export import EXPORT_COLUMNS, export_rows, write_export
from medpress.store.store import (
    DB_NAME,
    JUDGMENT_COLUMNS,
    STORE_SCHEMA,
    TURN_COLUMNS,
    ReplyIssue,
    RunStore,
    StoreError,
    UnitKey,
    UnitState,
    in_progress_note,
    reply_issue,
)

__all__ = [
    "DB_NAME",
    "EXPORT_COLUMNS",
    "JUDGMENT_COLUMNS",
    "STORE_SCHEMA",
    "TURN_COLUMNS",
    "ReplyIssue",
    "RunStore",
    "StoreError",
    "UnitKey",
    "UnitState",
    "export_rows",
    "in_progress_note",
    "reply_issue",
    "write_export",
]
