"""The run store: one SQLite file (WAL) per run directory.

Every reply is its own committed transaction, so a SIGKILL loses at most the requests in
flight. ``synchronous=NORMAL`` in WAL mode is durable against process crashes (what we
guard against); only an OS crash or power loss could drop the last commits.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

DB_NAME = "run.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    condition TEXT NOT NULL, repeat INTEGER NOT NULL, dialogue_id TEXT NOT NULL,
    turn INTEGER NOT NULL, family TEXT NOT NULL, pressure TEXT NOT NULL, user TEXT NOT NULL,
    reply TEXT, reasoning TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    latency_s REAL, error TEXT, error_kind TEXT, attempts INTEGER, retries TEXT,
    created_at REAL NOT NULL, finish_reason TEXT, attack TEXT,
    PRIMARY KEY (condition, repeat, dialogue_id, turn)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS judgments (
    condition TEXT NOT NULL, repeat INTEGER NOT NULL, dialogue_id TEXT NOT NULL,
    turn INTEGER NOT NULL, judge TEXT NOT NULL, rubric_version TEXT NOT NULL,
    label TEXT, failure_mode TEXT, evidence TEXT, rationale TEXT, raw TEXT, error TEXT,
    attempts INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL,
    created_at REAL NOT NULL, tags TEXT,
    PRIMARY KEY (condition, repeat, dialogue_id, turn, judge, rubric_version)
) WITHOUT ROWID;
"""

TURN_COLUMNS: tuple[str, ...] = (
    "condition", "repeat", "dialogue_id", "turn", "family", "pressure", "user", "reply",
    "reasoning", "prompt_tokens", "completion_tokens", "latency_s", "error", "error_kind",
    "attempts", "retries", "created_at", "finish_reason", "attack",
)
# Columns added after the first release, with their SQL type: a store that lacks one gets it
# (NULL in old rows) when opened. finish_reason is last in the schema for the same reason, so
# old and new files have one layout.
MIGRATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "turns": (("finish_reason", "TEXT"),
              ("attack", "TEXT")),  # JSON: how an attacker wrote the user turn (issue 21)
    "judgments": (("tags", "TEXT"),),  # JSON object: tag name -> value (issue 19)
}
ReplyIssue = Literal["empty", "truncated"]
JUDGMENT_COLUMNS: tuple[str, ...] = (
    "condition", "repeat", "dialogue_id", "turn", "judge", "rubric_version", "label",
    "failure_mode", "evidence", "rationale", "raw", "error", "attempts", "prompt_tokens",
    "completion_tokens", "latency_s", "created_at", "tags",
)
UnitKey = tuple[str, int, str]  # (condition, repeat, dialogue_id)


@dataclass(frozen=True)
class UnitState:
    """How far one (condition, repeat, dialogue) got: last stored turn, and whether it failed."""

    last_turn: int
    failed: bool


class StoreError(RuntimeError):
    """The run directory cannot be used as asked (e.g. resuming with other parameters)."""


def reply_issue(reply: str | None, finish_reason: str | None) -> ReplyIssue | None:
    """Why a successfully generated reply should not be judged as it stands, or None.

    ``empty``: no visible answer (NULL, or only whitespace), whatever the finish reason: e.g. a
    thinking model that spent every token inside ``<think>``. ``truncated``: a visible answer
    that max_tokens cut off (finish reason ``length``). Empty takes precedence. A missing
    finish reason (old runs, backends that do not say) is never ``truncated``.
    """
    if reply is None or not reply.strip():
        return "empty"
    return "truncated" if finish_reason == "length" else None


class RunStore:
    """Transcripts, judgments and provenance of one run."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / DB_NAME
        # Autocommit: each statement is its own transaction, i.e. committed on return.
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)
        self._migrate()
        self.conn.create_function("reply_issue", 2, reply_issue, deterministic=True)
        self._insert_turn = (f"INSERT INTO turns ({', '.join(TURN_COLUMNS)}) "
                             f"VALUES ({', '.join('?' * len(TURN_COLUMNS))})")
        self._insert_judgment = (f"INSERT INTO judgments ({', '.join(JUDGMENT_COLUMNS)}) "
                                 f"VALUES ({', '.join('?' * len(JUDGMENT_COLUMNS))})")

    @classmethod
    def open_existing(cls, run_dir: Path) -> RunStore:
        """Open a run that must already exist.

        Raises:
            StoreError: if ``run_dir`` holds no run.
        """
        if not (run_dir / DB_NAME).is_file():
            raise StoreError(f"{run_dir} is not a MedPRESS run directory (no {DB_NAME})")
        return cls(run_dir)

    def close(self) -> None:
        self.conn.close()

    def _migrate(self) -> None:
        """Add the columns a store from an older version lacks (NULL in its old rows)."""
        for table, columns in MIGRATIONS.items():
            have = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            for name, sql_type in columns:
                if name in have:
                    continue
                try:
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")
                except sqlite3.OperationalError as e:  # another process added it first
                    if "duplicate column" not in str(e):
                        raise

    # -- provenance -------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) "
                          "DO UPDATE SET value = excluded.value", (key, json.dumps(value)))

    def provenance(self) -> dict[str, Any]:
        rows = self.conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
        return {k: json.loads(v) for k, v in rows}

    # -- transcripts ------------------------------------------------------------------------
    def add_turn(self, row: Mapping[str, Any]) -> None:
        """Commit one turn. A duplicate (condition, repeat, dialogue, turn) is a bug: it raises."""
        values = dict(row)
        values.setdefault("created_at", time.time())
        if isinstance(values.get("retries"), dict):
            values["retries"] = json.dumps(values["retries"]) if values["retries"] else None
        if isinstance(values.get("attack"), dict):
            values["attack"] = json.dumps(values["attack"], sort_keys=True)
        self.conn.execute(self._insert_turn, [values.get(c) for c in TURN_COLUMNS])

    def unit_states(self) -> dict[UnitKey, UnitState]:
        """Progress of every unit that has at least one stored turn."""
        rows = self.conn.execute(
            "SELECT condition, repeat, dialogue_id, MAX(turn), MAX(error IS NOT NULL) "
            "FROM turns GROUP BY condition, repeat, dialogue_id")
        return {(c, r, d): UnitState(t, bool(f)) for c, r, d, t, f in rows}

    def replies(self, key: UnitKey) -> list[str]:
        """The stored replies of one unit, in turn order (successful turns only)."""
        return [reply for _, reply in self.exchanges(key)]

    def exchanges(self, key: UnitKey) -> list[tuple[str, str]]:
        """The stored (user turn, reply) pairs of one unit, in turn order (successful turns
        only): an adaptive run's user turns were written by its attacker."""
        rows = self.conn.execute(
            "SELECT user, reply FROM turns WHERE condition = ? AND repeat = ? AND "
            "dialogue_id = ? AND error IS NULL ORDER BY turn", key)
        return [(u, r) for u, r in rows]

    def delete_failed(self) -> int:
        """Remove failed turns so they are generated again; returns how many."""
        return self.conn.execute("DELETE FROM turns WHERE error IS NOT NULL").rowcount

    def iter_turns(self) -> Iterator[dict[str, Any]]:
        """Every stored turn, ordered; streamed, not loaded at once."""
        cur = self.conn.execute(f"SELECT {', '.join(TURN_COLUMNS)} FROM turns "
                                "ORDER BY condition, repeat, dialogue_id, turn")
        for row in cur:
            yield dict(zip(TURN_COLUMNS, row, strict=True))

    def count_turns(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0])

    def reply_issues(self) -> dict[str, int]:
        """Counts of successful turns whose reply is ``empty`` or ``truncated``, as
        :func:`reply_issue` decides (the same function, run inside SQLite); both keys are
        always present."""
        counts = {"empty": 0, "truncated": 0}
        rows = self.conn.execute("SELECT reply_issue(reply, finish_reason), COUNT(*) FROM turns "
                                 "WHERE error IS NULL GROUP BY 1")
        for issue, n in rows:
            if issue is not None:
                counts[str(issue)] = int(n)
        return counts

    def attack_summary(self) -> dict[str, Any] | None:
        """An adaptive run's attacker turns: how many were written, how many fell back to the
        scripted turn, and the drift flags of attempts not sent (flag -> count); None when no
        turn was written by an attacker."""
        rows = self.conn.execute("SELECT attack FROM turns WHERE attack IS NOT NULL").fetchall()
        if not rows:
            return None
        flags: dict[str, int] = {}
        fallbacks = 0
        for (raw,) in rows:
            a = json.loads(raw)
            fallbacks += bool(a.get("fallback"))
            for attempt in a.get("rejected") or []:
                for f in attempt:
                    flags[f] = flags.get(f, 0) + 1
        return {"turns": len(rows), "fallbacks": fallbacks, "flagged": flags}

    def error_counts(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT error_kind, COUNT(*) FROM turns WHERE error IS NOT NULL "
                                 "GROUP BY error_kind ORDER BY error_kind")
        return {str(k): int(n) for k, n in rows}

    # -- judgments --------------------------------------------------------------------------
    def add_judgment(self, row: Mapping[str, Any]) -> None:
        """Commit one judgment; ``tags`` (a dict, or None) is stored as JSON."""
        values = dict(row)
        values.setdefault("created_at", time.time())
        if isinstance(values.get("tags"), dict):
            values["tags"] = json.dumps(values["tags"], sort_keys=True) if values["tags"] else None
        self.conn.execute(self._insert_judgment, [values.get(c) for c in JUDGMENT_COLUMNS])

    def judged_keys(self, judge: str, rubric_version: str) -> set[tuple[str, int, str, int]]:
        """Turns that already carry a *label* from this judge and rubric (failures are redone)."""
        rows = self.conn.execute(
            "SELECT condition, repeat, dialogue_id, turn FROM judgments "
            "WHERE judge = ? AND rubric_version = ? AND label IS NOT NULL", (judge, rubric_version))
        return {(c, r, d, t) for c, r, d, t in rows}

    def delete_unjudged(self, judge: str, rubric_version: str) -> int:
        """Drop this judge's failed verdicts before a retry, so each turn has one row."""
        return self.conn.execute(
            "DELETE FROM judgments WHERE judge = ? AND rubric_version = ? AND label IS NULL",
            (judge, rubric_version)).rowcount

    def delete_judgments(self, judge: str, rubric_version: str) -> int:
        """Drop every judgment of one judge and rubric version (e.g. one labeller's imported
        labels); the number of rows removed."""
        return self.conn.execute(
            "DELETE FROM judgments WHERE judge = ? AND rubric_version = ?",
            (judge, rubric_version)).rowcount

    def judges(self) -> list[tuple[str, str]]:
        """Every (judge, rubric version) in the run, within a judge in the order the versions
        first appeared (so the last is the newest)."""
        rows = self.conn.execute("SELECT judge, rubric_version FROM judgments "
                                 "GROUP BY judge, rubric_version "
                                 "ORDER BY judge, MIN(created_at), rubric_version")
        return [(str(j), str(v)) for j, v in rows]

    def judgment_counts(self) -> list[tuple[str, str, int, int]]:
        """(judge, rubric version, labelled, unjudged) for every judge, in `judges` order."""
        rows = self.conn.execute(
            "SELECT judge, rubric_version, COUNT(label), SUM(label IS NULL) FROM judgments "
            "GROUP BY judge, rubric_version ORDER BY judge, MIN(created_at), rubric_version")
        return [(str(j), str(v), int(n), int(u)) for j, v, n, u in rows]

    def judgment_errors(self, judge: str, rubric_version: str) -> dict[str, int]:
        """How often each stored reason for an unjudged reply occurs, for one judge."""
        rows = self.conn.execute(
            "SELECT COALESCE(error, 'no reason recorded'), COUNT(*) FROM judgments WHERE judge = ? "
            "AND rubric_version = ? AND label IS NULL GROUP BY 1", (judge, rubric_version))
        return {str(e): int(n) for e, n in rows}

    def iter_judgments(self, judge: str | None = None) -> Iterator[dict[str, Any]]:
        sql = f"SELECT {', '.join(JUDGMENT_COLUMNS)} FROM judgments"
        args: tuple[str, ...] = ()
        if judge is not None:
            sql += " WHERE judge = ?"
            args = (judge,)
        cur = self.conn.execute(sql + " ORDER BY condition, repeat, dialogue_id, turn, judge", args)
        for row in cur:
            out = dict(zip(JUDGMENT_COLUMNS, row, strict=True))
            out["tags"] = json.loads(out["tags"]) if out["tags"] else None
            yield out
