"""The embedded class store: one SQLite file in the data directory (the package's docstring
says what is stored; `web.classroom.store.open_store` picks it by default)."""
import os
import sqlite3
import threading
import time

from web.classroom.store import (
    GONE,
    REMEMBER_SECONDS,
    Closed,
    CodeTaken,
    Full,
    Gone,
    NotMember,
    Unavailable,
    guarded,
    poll_summary,
    too_many_members,
    too_many_sessions,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
  code TEXT PRIMARY KEY, teacher TEXT NOT NULL, state TEXT NOT NULL,
  version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL,
  npolls INTEGER NOT NULL DEFAULT 0, cur INTEGER NOT NULL DEFAULT 0,
  client TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS sessions_touched ON sessions(touched);
CREATE TABLE IF NOT EXISTS members (
  code TEXT NOT NULL REFERENCES sessions(code) ON DELETE CASCADE,
  student TEXT NOT NULL, joined REAL NOT NULL, client TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (code, student));
CREATE TABLE IF NOT EXISTS polls (
  code TEXT NOT NULL REFERENCES sessions(code) ON DELETE CASCADE,
  id INTEGER NOT NULL, kind TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL,
  reveal TEXT, answered INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (code, id));
CREATE TABLE IF NOT EXISTS answers (
  code TEXT NOT NULL, poll INTEGER NOT NULL, student TEXT NOT NULL, value TEXT NOT NULL,
  at REAL NOT NULL, PRIMARY KEY (code, poll, student),
  FOREIGN KEY (code, poll) REFERENCES polls(code, id) ON DELETE CASCADE);
CREATE TABLE IF NOT EXISTS join_failures (
  client TEXT PRIMARY KEY, start REAL NOT NULL, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ended (
  code TEXT PRIMARY KEY, at REAL NOT NULL);
"""
SWEEP_SECONDS = 60
# Columns added since the first schema: an existing file gets them (sessions live for hours, so
# nothing else needs to carry over).
ADDED_COLUMNS = (("sessions", "client", "TEXT NOT NULL DEFAULT ''"),
                 ("members", "client", "TEXT NOT NULL DEFAULT ''"))
# A session is over when no change came for `idle` seconds, or for `unjoined` seconds while
# nobody has joined it (named parameters :idle_before and :unjoined_before).
_OVER = ("(touched < :idle_before OR (touched < :unjoined_before AND NOT EXISTS "
         "(SELECT 1 FROM members m WHERE m.code = sessions.code)))")


class SQLiteStore:
    """The embedded store: one SQLite file in WAL mode (readers never wait for the writer),
    one connection per thread and process (opened after the workers are forked), writes in
    BEGIN IMMEDIATE transactions so that a check and its change are one step."""

    kind = "sqlite"

    def __init__(self, data_dir: str, idle: float, unjoined: float = None,
                 remember: float = REMEMBER_SECONDS):
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, "classroom.sqlite3")
        self.idle = idle
        self.remember = remember
        self.unjoined = idle if unjoined is None else min(unjoined, idle)
        self._local = threading.local()
        self._swept = 0.0
        with self._conn() as db:          # creates the schema once
            db.executescript(SCHEMA)
            for table, column, decl in ADDED_COLUMNS:
                if column not in [r[1] for r in db.execute(f"PRAGMA table_info({table})")]:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")

    def _cutoffs(self, now) -> dict:
        return dict(idle_before=now - self.idle, unjoined_before=now - self.unjoined)

    def describe(self) -> str:
        return f"SQLite {self.path}"

    def _conn(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA busy_timeout=10000")
            self._local.db, self._local.pid = db, os.getpid()
        return db

    class _Tx:
        def __init__(self, db):
            self.db = db

        def __enter__(self):
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, exc, tb):
            self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
            return False

    def _tx(self):
        return self._Tx(self._conn())

    def _live(self, db, code, now):
        """The session row (teacher, version, npolls, cur) of a live session, else Gone; an
        expired one is deleted on the spot."""
        row = db.execute(f"SELECT teacher, version, npolls, cur, {_OVER} FROM sessions "
                         "WHERE code = :code", dict(code=code, **self._cutoffs(now))).fetchone()
        if row is None:
            raise Gone(GONE)
        if row[4]:
            self._delete(db, "code = :code", dict(code=code), now)
            raise Gone(GONE)
        return row

    def _delete(self, db, where, args, now) -> int:
        """Delete the sessions `where` names, remembering their codes (known())."""
        db.execute(f"INSERT OR REPLACE INTO ended SELECT code, :now FROM sessions WHERE {where}",
                   dict(args, now=now))
        return db.execute(f"DELETE FROM sessions WHERE {where}", args).rowcount

    def _bump(self, db, code, now) -> int:
        db.execute("UPDATE sessions SET version = version + 1, touched = ? WHERE code = ?",
                   (now, code))
        return db.execute("SELECT version FROM sessions WHERE code = ?", (code,)).fetchone()[0]

    def _sweep(self, db, now, force=False):
        if force or now - self._swept > SWEEP_SECONDS:
            self._swept = now
            db.execute("DELETE FROM ended WHERE at < ?", (now - self.remember,))
            return self._delete(db, _OVER, self._cutoffs(now), now)
        return 0

    # -- the interface ------------------------------------------------------------------------

    def create(self, code, teacher_hash, state, now, max_sessions, client="",
               max_per_client=None):
        with self._tx() as db:
            self._sweep(db, now, force=True)
            if db.execute("SELECT 1 FROM sessions WHERE code = ?", (code,)).fetchone():
                raise CodeTaken("code in use")
            if max_per_client is not None:
                mine = db.execute("SELECT COUNT(*) FROM sessions WHERE client = ?",
                                  (client,)).fetchone()[0]
                if mine >= max_per_client:
                    raise Full(too_many_sessions(mine))
            n = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
            if n >= max_sessions:
                raise Full(f"This server already runs {n} class sessions, its limit; try again "
                           "when one has ended.")
            db.execute("INSERT INTO sessions (code, teacher, state, version, created, touched, "
                       "client) VALUES (?, ?, ?, 1, ?, ?, ?)",
                       (code, teacher_hash, state, now, now, client))

    def version(self, code, now):
        row = self._conn().execute(f"SELECT version, {_OVER} FROM sessions WHERE code = :code",
                                   dict(code=code, **self._cutoffs(now))).fetchone()
        return None if row is None or row[1] else row[0]

    def session(self, code, now):
        db = self._conn()
        db.execute("BEGIN")                      # one consistent snapshot of the reads
        try:
            row = db.execute(f"SELECT teacher, state, version, cur, {_OVER} FROM sessions "
                             "WHERE code = :code", dict(code=code, **self._cutoffs(now))).fetchone()
            if row is None or row[4]:
                return None
            members = db.execute("SELECT COUNT(*) FROM members WHERE code = ?",
                                 (code,)).fetchone()[0]
            poll = None
            if row[3]:
                p = db.execute("SELECT id, kind, spec, status, reveal, answered FROM polls "
                               "WHERE code = ? AND id = ?", (code, row[3])).fetchone()
                poll = poll_summary(*p) if p else None
        finally:
            db.execute("COMMIT")
        return dict(code=code, teacher=row[0], state=row[1], version=row[2], members=members,
                    poll=poll)

    def set_state(self, code, state, now) -> int:
        with self._tx() as db:
            self._live(db, code, now)
            db.execute("UPDATE sessions SET state = ? WHERE code = ?", (state, code))
            return self._bump(db, code, now)

    def join(self, code, student, now, max_members, client="", max_per_client=None) -> bool:
        with self._tx() as db:
            self._live(db, code, now)
            self._sweep(db, now)
            if db.execute("SELECT 1 FROM members WHERE code = ? AND student = ?",
                          (code, student)).fetchone():
                return False
            if max_per_client is not None:
                mine = db.execute("SELECT COUNT(*) FROM members WHERE code = ? AND client = ?",
                                  (code, client)).fetchone()[0]
                if mine >= max_per_client:
                    raise Full(too_many_members(mine))
            n = db.execute("SELECT COUNT(*) FROM members WHERE code = ?", (code,)).fetchone()[0]
            if n >= max_members:
                raise Full(f"This class is full: {n} people have joined, the limit of one "
                           "session.")
            db.execute("INSERT INTO members (code, student, joined, client) VALUES (?, ?, ?, ?)",
                       (code, student, now, client))
            self._bump(db, code, now)
            return True

    def is_member(self, code, student) -> bool:
        return self._conn().execute("SELECT 1 FROM members WHERE code = ? AND student = ?",
                                    (code, student)).fetchone() is not None

    def open_poll(self, code, kind, spec, now, max_polls) -> int:
        with self._tx() as db:
            _, _, npolls, cur, _ = self._live(db, code, now)
            if npolls >= max_polls:
                raise Full(f"This session has run {npolls} polls, the limit of one session; "
                           "start a new session for more.")
            db.execute("UPDATE polls SET status = 'closed' WHERE code = ? AND id = ? AND "
                       "status = 'open'", (code, cur))
            pid = npolls + 1
            db.execute("INSERT INTO polls (code, id, kind, spec, status) VALUES "
                       "(?, ?, ?, ?, 'open')", (code, pid, kind, spec))
            db.execute("UPDATE sessions SET npolls = ?, cur = ? WHERE code = ?",
                       (pid, pid, code))
            self._bump(db, code, now)
            return pid

    def answer(self, code, poll_id, student, value, now, max_answers) -> bool:
        """Record (or change) the student's answer to an open poll; True if it is new."""
        with self._tx() as db:
            self._live(db, code, now)
            if not db.execute("SELECT 1 FROM members WHERE code = ? AND student = ?",
                              (code, student)).fetchone():
                raise NotMember("Join the class first.")
            p = db.execute("SELECT status FROM polls WHERE code = ? AND id = ?",
                           (code, poll_id)).fetchone()
            if p is None or p[0] != "open":
                raise Closed("This poll is closed: its answer has been revealed or another "
                             "poll has started." if p else "There is no such poll.")
            new = db.execute("SELECT 1 FROM answers WHERE code = ? AND poll = ? AND student = ?",
                             (code, poll_id, student)).fetchone() is None
            if new:
                n = db.execute("SELECT COUNT(*) FROM answers WHERE code = ?",
                               (code,)).fetchone()[0]
                if n >= max_answers:
                    raise Full(f"This session holds {n} answers, the limit of one session.")
                db.execute("INSERT INTO answers VALUES (?, ?, ?, ?, ?)",
                           (code, poll_id, student, value, now))
                db.execute("UPDATE polls SET answered = answered + 1 WHERE code = ? AND id = ?",
                           (code, poll_id))
            else:
                db.execute("UPDATE answers SET value = ?, at = ? WHERE code = ? AND poll = ? "
                           "AND student = ?", (value, now, code, poll_id, student))
            self._bump(db, code, now)
            return new

    def answers(self, code, poll_id) -> list:
        return [r[0] for r in self._conn().execute(
            "SELECT value FROM answers WHERE code = ? AND poll = ? ORDER BY at",
            (code, poll_id))]

    def mine(self, code, poll_id, student):
        row = self._conn().execute("SELECT value FROM answers WHERE code = ? AND poll = ? AND "
                                   "student = ?", (code, poll_id, student)).fetchone()
        return row[0] if row else None

    def lock(self, code, poll_id, now):
        """Stop taking answers for the poll (status "revealing"), before they are counted for
        the reveal: none arrives between the count and the reveal."""
        with self._tx() as db:
            self._live(db, code, now)
            p = db.execute("SELECT status FROM polls WHERE code = ? AND id = ?",
                           (code, poll_id)).fetchone()
            if p is None or p[0] not in ("open", "revealing"):
                raise Closed("Only the open poll can be revealed.")
            db.execute("UPDATE polls SET status = 'revealing' WHERE code = ? AND id = ?",
                       (code, poll_id))
            self._bump(db, code, now)

    def reveal(self, code, poll_id, reveal, now) -> int:
        with self._tx() as db:
            self._live(db, code, now)
            p = db.execute("SELECT status FROM polls WHERE code = ? AND id = ?",
                           (code, poll_id)).fetchone()
            if p is None or p[0] != "revealing":
                raise Closed("Only the open poll can be revealed.")
            db.execute("UPDATE polls SET status = 'revealed', reveal = ? WHERE code = ? AND "
                       "id = ?", (reveal, code, poll_id))
            return self._bump(db, code, now)

    def end(self, code, now=None):
        with self._tx() as db:
            self._delete(db, "code = :code", dict(code=code), time.time() if now is None else now)

    def known(self, code, now) -> bool:
        """Whether `code` names a session that exists or ended less than `remember` seconds ago:
        a phone still asking for a class that just ended is not guessing codes."""
        return self._conn().execute(
            "SELECT 1 FROM sessions WHERE code = :code UNION ALL SELECT 1 FROM ended WHERE "
            "code = :code AND at >= :since", dict(code=code, since=now - self.remember)
        ).fetchone() is not None

    def expire(self, now) -> int:
        with self._tx() as db:
            return self._sweep(db, now, force=True)

    def count_join_failure(self, client, now, window) -> int:
        with self._tx() as db:
            row = db.execute("SELECT start, n FROM join_failures WHERE client = ?",
                             (client,)).fetchone()
            if row is None or row[0] < now - window:
                db.execute("INSERT OR REPLACE INTO join_failures VALUES (?, ?, 1)", (client, now))
                db.execute("DELETE FROM join_failures WHERE start < ?", (now - window,))
                return 1
            db.execute("UPDATE join_failures SET n = n + 1 WHERE client = ?", (client,))
            return row[1] + 1

    def join_failures(self, client, now, window) -> int:
        row = self._conn().execute("SELECT start, n FROM join_failures WHERE client = ?",
                                   (client,)).fetchone()
        return 0 if row is None or row[0] < now - window else row[1]

    def counts(self) -> dict:
        """Rows in each table (tests read it: expiry deletes answers)."""
        db = self._conn()
        return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("sessions", "members", "polls", "answers")}

    def close(self):
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None



def _sqlite_answer(store, method, args, kwargs):
    """SQLite's errors of a file it cannot use now (locked or busy past the busy timeout, or
    the disk failing) are Unavailable; any other error is a bug and stays one."""
    try:
        return method(store, *args, **kwargs)
    except sqlite3.OperationalError as e:
        text = str(e).lower()
        if any(w in text for w in ("locked", "busy", "unable to open", "disk i/o")):
            raise Unavailable(e) from e
        raise



guarded(SQLiteStore, _sqlite_answer)
