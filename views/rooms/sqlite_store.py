"""Rooms in one SQLite file (WAL mode), shared by every server process on the machine.

WAL lets the phones' polls read while a vote writes; every write is one BEGIN IMMEDIATE transaction, so two
processes never interleave a check and its write (a vote checks the question, then stores the answer). Each thread
has its own connection: sqlite3 connections must not be shared between threads.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from views.rooms import (
    GRACE_S,
    PRESENT_S,
    TOUCH_S,
    RoomGone,
    RoomStore,
    RoomView,
    check_question,
    check_reveal,
    codes,
    now_or,
    question_of,
    reveal_of,
    status_of,
    valid_option,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (
    code TEXT PRIMARY KEY, owner TEXT NOT NULL UNIQUE, created REAL NOT NULL, expires REAL NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0, qid INTEGER NOT NULL DEFAULT 0, question TEXT, qkey TEXT, reveal TEXT);
CREATE INDEX IF NOT EXISTS rooms_expires ON rooms (expires);
CREATE TABLE IF NOT EXISTS answers (
    code TEXT NOT NULL, qid INTEGER NOT NULL, voter TEXT NOT NULL, option INTEGER NOT NULL,
    PRIMARY KEY (code, qid, voter)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS members (
    code TEXT NOT NULL, voter TEXT NOT NULL, seen REAL NOT NULL, PRIMARY KEY (code, voter)) WITHOUT ROWID;
"""
# One pass over the primary key's (code, qid) range: the votes per option and this voter's option.
COUNTS_SQL = "SELECT option, COUNT(*), MAX(voter = ?) FROM answers WHERE code = ? AND qid = ? GROUP BY option"
CREATE_TRIES = 20  # 2**30 codes: a clash is rare, twenty in a row means something else is wrong


class SqliteStore(RoomStore):
    """RoomStore in the SQLite file `path` (created with its tables); rooms live `ttl_s` seconds."""

    def __init__(self, path: str | os.PathLike, ttl_s: float):
        self.path, self.ttl_s = Path(path), float(ttl_s)
        self._local = threading.local()
        with self._write():
            pass  # the first connection creates the tables

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():  # a forked child opens its own
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)  # transactions are explicit
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL stays consistent; a power cut may lose the last votes
            conn.executescript(SCHEMA)
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN")  # one snapshot for the room, its counts and its members
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def create(self, now=None):
        now = now_or(now)
        with self._write() as conn:
            gone = "SELECT code FROM rooms WHERE expires <= ?"
            for table in ("answers", "members"):
                conn.execute(f"DELETE FROM {table} WHERE code IN ({gone})", (now - GRACE_S,))
            conn.execute("DELETE FROM rooms WHERE expires <= ?", (now - GRACE_S,))
            for _ in range(CREATE_TRIES):
                code, owner = codes.new_code(), codes.new_owner_key()
                cur = conn.execute("INSERT OR IGNORE INTO rooms (code, owner, created, expires) VALUES (?, ?, ?, ?)",
                                   (code, owner, now, now + self.ttl_s))
                if cur.rowcount == 1:
                    return code, owner
        raise RuntimeError(f"no free room code after {CREATE_TRIES} tries")

    def code_of(self, owner, now=None):
        if not codes.valid_owner_key(owner):
            return None
        row = self._conn().execute("SELECT code FROM rooms WHERE owner = ? AND closed = 0 AND expires > ?",
                                   (owner, now_or(now))).fetchone()
        return row[0] if row else None

    def _owned(self, conn: sqlite3.Connection, owner: str, now: float, allow_gone: bool = False) -> tuple:
        """(code, qid, question JSON, qkey) of the room `owner` owns, inside the caller's transaction."""
        row = None
        if codes.valid_owner_key(owner):
            row = conn.execute("SELECT code, closed, expires, qid, question, qkey FROM rooms WHERE owner = ?",
                               (owner,)).fetchone()
        if row is None:
            raise PermissionError("this key owns no room")
        code, closed, expires, qid, question, qkey = row
        status = status_of(bool(closed), expires, now)
        if status != "open" and not allow_gone:
            raise RoomGone(code, status)
        return code, qid, question, qkey

    def ask(self, owner, kind, prompt, context, options, now=None):
        stored, key, _ = check_question(kind, prompt, context, options)
        with self._write() as conn:
            code, qid, _, qkey = self._owned(conn, owner, now_or(now))
            if qkey == key:
                return qid
            conn.execute("UPDATE rooms SET qid = ?, question = ?, qkey = ?, reveal = NULL WHERE code = ?",
                         (qid + 1, stored, key, code))
            conn.execute("DELETE FROM answers WHERE code = ?", (code,))  # only the current question is counted
            return qid + 1

    def reveal(self, owner, qid, answer, values, now=None):
        with self._write() as conn:
            code, current, question, _ = self._owned(conn, owner, now_or(now))
            if question is None or qid != current:
                raise ValueError(f"question {qid} is not the current question of room {code}")
            stored = check_reveal(answer, values, len(json.loads(question)["options"]))
            conn.execute("UPDATE rooms SET reveal = ? WHERE code = ?", (stored, code))

    def close(self, owner, now=None):
        with self._write() as conn:
            code, *_ = self._owned(conn, owner, now_or(now), allow_gone=True)
            conn.execute("UPDATE rooms SET closed = 1 WHERE code = ?", (code,))

    def join(self, code, voter, now=None):
        if not codes.valid_voter_id(voter):
            raise ValueError("not a voter id (codes.new_voter_id makes them)")
        now, code = now_or(now), codes.normalize(code)
        if code is not None:
            with self._write() as conn:
                conn.execute("INSERT INTO members (code, voter, seen) SELECT code, ?, ? FROM rooms "
                             "WHERE code = ? AND closed = 0 AND expires > ? "
                             "ON CONFLICT (code, voter) DO UPDATE SET seen = excluded.seen", (voter, now, code, now))
        return self.view(code, voter, now)

    def vote(self, code, voter, qid, option, now=None):
        if not codes.valid_voter_id(voter):
            return "bad voter"
        now, code = now_or(now), codes.normalize(code)
        if code is None:
            return "missing"
        with self._write() as conn:
            row = conn.execute("SELECT closed, expires, qid, question, reveal FROM rooms WHERE code = ?",
                               (code,)).fetchone()
            if row is None:
                return "missing"
            closed, expires, current, question, revealed = row
            status = status_of(bool(closed), expires, now)
            if status != "open":
                return status
            if question is None or not isinstance(qid, int) or isinstance(qid, bool) or qid != current:
                return "stale"
            if revealed is not None:
                return "revealed"
            if not valid_option(option) or option >= len(json.loads(question)["options"]):
                return "bad option"
            conn.execute("INSERT INTO answers (code, qid, voter, option) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (code, qid, voter) DO UPDATE SET option = excluded.option",
                         (code, qid, voter, option))
            conn.execute("INSERT INTO members (code, voter, seen) VALUES (?, ?, ?) "
                         "ON CONFLICT (code, voter) DO UPDATE SET seen = excluded.seen", (code, voter, now))
        return "ok"

    def view(self, code, voter=None, now=None):
        now, code = now_or(now), codes.normalize(code)
        if code is None:
            return RoomView("", "missing")
        voter = voter if codes.valid_voter_id(voter) else ""
        with self._read() as conn:
            row = conn.execute("SELECT closed, expires, qid, question, reveal FROM rooms WHERE code = ?",
                               (code,)).fetchone()
            if row is None:
                return RoomView(code, "missing")
            closed, expires, qid, question, revealed = row
            status = status_of(bool(closed), expires, now)
            if status == "expired":
                return RoomView(code, status)
            tally = conn.execute(COUNTS_SQL, (voter, code, qid)).fetchall()
            present, seen = conn.execute("SELECT COUNT(CASE WHEN seen > ? THEN 1 END), "
                                         "MAX(CASE WHEN voter = ? THEN seen END) FROM members WHERE code = ?",
                                         (now - PRESENT_S, voter, code)).fetchone()
        q = question_of(qid, question)
        counts = [0] * (len(q.options) if q else 0)
        for option, n, _ in tally:
            if option < len(counts):
                counts[option] = n
        mine = next((option for option, _, is_mine in tally if is_mine), None)
        if status == "open" and seen is not None and seen <= now - TOUCH_S:
            self._touch(code, voter, now)
            present += seen <= now - PRESENT_S  # was not counted above, is present now
        return RoomView(code, status, q, reveal_of(revealed), tuple(counts), present, sum(counts), mine)

    def _touch(self, code: str, voter: str, now: float) -> None:
        with self._write() as conn:
            conn.execute("UPDATE members SET seen = ? WHERE code = ? AND voter = ? AND seen < ?",
                         (now, code, voter, now))
