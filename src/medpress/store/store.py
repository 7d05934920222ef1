"""The run store: one SQLite file (WAL) per run directory.

Every reply is its own committed transaction, so a SIGKILL loses at most the requests in
flight. ``synchronous=NORMAL`` in WAL mode is durable against process crashes (what we
guard against); only an OS crash or power loss could drop the last commits.

Concurrent use (issue 24): one ``generate`` per run directory (:meth:`RunStore.lock`, an
``flock`` the kernel releases when the process dies, so a killed run's lock is taken over at
once); readers and a judge work alongside it. Long reads (``iter_turns``, ``iter_judgments``)
run on their own connection, so a writer never holds a stale snapshot (SQLite's
``SQLITE_BUSY_SNAPSHOT``, which no busy timeout waits out); every write waits for a busy
database and is retried, and a full disk or a read-only store is one clear :class:`StoreError`
that leaves every committed row in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

DB_NAME = "run.sqlite"
# The store's layout: 1 the first release, 2 turns.finish_reason, 3 judgments.tags and
# turns.attack. A store at a higher version was written by a newer MedPRESS and is refused.
STORE_SCHEMA = 3
# How long one statement waits for another process's write, and how long a write is retried
# after that (a long judge and a generator share the file).
BUSY_TIMEOUT_S = 30.0
WRITE_RETRY_S = 120.0
LOCK_NAMES = {"generate": "generate.lock", "judge": "judge.lock"}

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


def store_problem(run_dir: Path, e: BaseException) -> str:
    """One line for a store that cannot be opened or written: what happened and what to do.
    Nothing committed before it is lost; the same command resumes once the cause is fixed."""
    text = str(e).lower()
    if "full" in text or getattr(e, "errno", None) == 28:
        why = "the disk is full"
        fix = "free some space"
    elif "readonly" in text or "read-only" in text or isinstance(e, PermissionError) \
            or "unable to open" in text:
        why = "the run directory or its store cannot be written (read-only or no permission)"
        fix = "make it writable"
    elif "locked" in text or "busy" in text:
        why = f"another process kept the store locked for over {WRITE_RETRY_S:.0f} s"
        fix = "wait for it to finish"
    else:
        why = f"the store failed ({e})"
        fix = "fix the cause"
    return (f"{run_dir}: {why}. Every reply and verdict stored before this is kept; {fix}, "
            "then run the same command to resume")


def in_progress_note(store: RunStore, name: str | None = None) -> str | None:
    """A warning for figures read while another process is still generating the run: what
    they cover and who is writing; None when no generation is running."""
    info = store.active("generate")
    if info is None:
        return None
    return (f"{name or store.run_dir}: still being generated ({describe_holder(json.dumps(info))}"
            f"): these figures cover the {store.count_turns()} turns stored so far")


def describe_holder(raw: str) -> str:
    """``pid 123 on host h (medpress generate), since 2026-…`` from a lock file's JSON."""
    try:
        info = json.loads(raw)
    except ValueError:
        info = {}
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')} "
            f"({info.get('command', '?')}), since {info.get('since', '?')}")


class RunStore:
    """Transcripts, judgments and provenance of one run."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / DB_NAME
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            # Autocommit: each statement is its own transaction, i.e. committed on return.
            self.conn = sqlite3.connect(self.path, isolation_level=None,
                                        check_same_thread=False, timeout=BUSY_TIMEOUT_S)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            new = not self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'turns'").fetchone()
            self.conn.executescript(SCHEMA)
            self._check_schema(new)
        except (sqlite3.Error, OSError) as e:
            raise StoreError(store_problem(run_dir, e)) from None
        self.conn.create_function("reply_issue", 2, reply_issue, deterministic=True)
        self._locks: dict[str, IO[str]] = {}
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
        for name in list(self._locks):
            self.unlock(name)
        self.conn.close()

    def _check_schema(self, new: bool) -> None:
        """Record the schema of a new store; refuse one from a newer MedPRESS; migrate an
        older one in place, after a backup copy (``run.sqlite.v<old>.bak``).

        Raises:
            StoreError: the store's schema is newer than this MedPRESS's.
        """
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'store_schema'").fetchone()
        have = int(json.loads(row[0])) if row else (STORE_SCHEMA if new else 1)
        if have > STORE_SCHEMA:
            raise StoreError(f"{self.run_dir} was written by a newer MedPRESS (store schema "
                             f"{have}; this version reads up to {STORE_SCHEMA}): upgrade "
                             "MedPRESS to use it")
        missing = [(t, c, sql) for t, cols in MIGRATIONS.items()
                   for c, sql in cols if c not in self._columns(t)]
        if missing and not new:
            backup = self.path.with_name(f"{DB_NAME}.v{have}.bak")
            if not backup.exists():
                with contextlib.closing(sqlite3.connect(backup)) as dst:
                    self.conn.backup(dst)
        for table, name, sql_type in missing:
            try:
                self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")
            except sqlite3.OperationalError as e:  # another process added it first
                if "duplicate column" not in str(e):
                    raise
        if have != STORE_SCHEMA or not row:
            self.conn.execute("INSERT INTO meta (key, value) VALUES ('store_schema', ?) "
                              "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                              (json.dumps(STORE_SCHEMA),))

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}

    def _write(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        """Run one write statement (its own transaction), waiting out another process's
        write for up to :data:`WRITE_RETRY_S`.

        Raises:
            StoreError: a full disk, a read-only or vanished store, or a database still locked
                after the wait; the message says that committed rows are kept and how to
                resume.
        """
        deadline = time.monotonic() + WRITE_RETRY_S
        delay = 0.05
        while True:
            try:
                return self.conn.execute(sql, params)
            except sqlite3.OperationalError as e:
                if "locked" in str(e) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                raise StoreError(store_problem(self.run_dir, e)) from None

    def _read(self, sql: str, params: Any = ()) -> Iterator[tuple[Any, ...]]:
        """Stream a long read on a connection of its own, read-only, so the writing
        connection never holds an old snapshot while rows are consumed."""
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                               check_same_thread=False)
        try:
            yield from conn.execute(sql, params)
        finally:
            conn.close()

    # -- one writer per run -------------------------------------------------------------------
    def lock(self, kind: Literal["generate", "judge"], what: str) -> None:
        """Take this run's ``kind`` lock for this process, recording who holds it.

        An ``flock``: the kernel releases it when the process exits or is killed, so a lock
        left by a killed process is never in the way.

        Raises:
            StoreError: another live process holds it (named with its pid, host, command and
                start time).
        """
        path = self.run_dir / LOCK_NAMES[kind]
        fh = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "{}"
            fh.close()
            doing = "generating into" if kind == "generate" else "judging"
            raise StoreError(f"another process is already {doing} {self.run_dir}: "
                             f"{describe_holder(holder)}; wait for it to finish or stop it, "
                             "then run this again (nothing was written)") from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "command": what,
                             "since": datetime.now(UTC).isoformat(timespec="seconds")}))
        fh.flush()
        self._locks[kind] = fh

    def holds(self, kind: str) -> bool:
        """Whether this store object holds the ``kind`` lock."""
        return kind in self._locks

    def unlock(self, kind: str) -> None:
        fh = self._locks.pop(kind, None)
        if fh is not None:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()

    def active(self, kind: Literal["generate", "judge"] = "generate") -> dict[str, Any] | None:
        """Who holds this run's ``kind`` lock right now (another process), or None."""
        path = self.run_dir / LOCK_NAMES[kind]
        if kind in self._locks or not path.exists():
            return None
        with path.open("a+", encoding="utf-8") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                try:
                    info: dict[str, Any] = json.loads(fh.read() or "{}")
                except ValueError:
                    info = {}
                return info
            fcntl.flock(fh, fcntl.LOCK_UN)
        return None

    # -- provenance -------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        self._write("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) "
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
        self._write(self._insert_turn, [values.get(c) for c in TURN_COLUMNS])

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
        return self._write("DELETE FROM turns WHERE error IS NOT NULL").rowcount

    def iter_turns(self) -> Iterator[dict[str, Any]]:
        """Every stored turn, ordered; streamed, not loaded at once."""
        for row in self._read(f"SELECT {', '.join(TURN_COLUMNS)} FROM turns "
                              "ORDER BY condition, repeat, dialogue_id, turn"):
            yield dict(zip(TURN_COLUMNS, row, strict=True))

    def token_totals(self) -> tuple[int, int]:
        """(prompt, completion) tokens of every stored turn (as the servers reported them)."""
        p, c = self.conn.execute("SELECT COALESCE(SUM(prompt_tokens), 0), "
                                 "COALESCE(SUM(completion_tokens), 0) FROM turns").fetchone()
        return int(p), int(c)

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
        self._write(self._insert_judgment, [values.get(c) for c in JUDGMENT_COLUMNS])

    def judged_keys(self, judge: str, rubric_version: str) -> set[tuple[str, int, str, int]]:
        """Turns that already carry a *label* from this judge and rubric (failures are redone)."""
        rows = self.conn.execute(
            "SELECT condition, repeat, dialogue_id, turn FROM judgments "
            "WHERE judge = ? AND rubric_version = ? AND label IS NOT NULL", (judge, rubric_version))
        return {(c, r, d, t) for c, r, d, t in rows}

    def delete_unjudged(self, judge: str, rubric_version: str) -> int:
        """Drop this judge's failed verdicts before a retry, so each turn has one row."""
        return self._write(
            "DELETE FROM judgments WHERE judge = ? AND rubric_version = ? AND label IS NULL",
            (judge, rubric_version)).rowcount

    def delete_judgments(self, judge: str, rubric_version: str) -> int:
        """Drop every judgment of one judge and rubric version (e.g. one labeller's imported
        labels); the number of rows removed."""
        return self._write(
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
        for row in self._read(sql + " ORDER BY condition, repeat, dialogue_id, turn, judge", args):
            out = dict(zip(JUDGMENT_COLUMNS, row, strict=True))
            out["tags"] = json.loads(out["tags"]) if out["tags"] else None
            yield out
