"""Store stage: the SQLite run store and exports."""

from medpress.store.export import EXPORT_COLUMNS, export_rows, write_export
from medpress.store.store import (
    DB_NAME,
    JUDGMENT_COLUMNS,
    TURN_COLUMNS,
    ReplyIssue,
    RunStore,
    StoreError,
    UnitKey,
    UnitState,
    reply_issue,
)

__all__ = [
    "DB_NAME",
    "EXPORT_COLUMNS",
    "JUDGMENT_COLUMNS",
    "TURN_COLUMNS",
    "ReplyIssue",
    "RunStore",
    "StoreError",
    "UnitKey",
    "UnitState",
    "export_rows",
    "reply_issue",
    "write_export",
]
