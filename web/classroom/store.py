"""Where a class's shared state lives: sessions, who joined, polls and answers.

One small interface, two implementations, chosen at start (`python app.py --store ...`):

    SQLiteStore(data_dir)     the default: Python's sqlite3 in WAL mode, one file in the data
                              directory (--data-dir, default data/classroom/); every worker
                              process of one server opens it; nothing to start
    RedisStore(url)           --store redis://host:port/db: several app instances behind a
                              proxy serve one class; Redis pub/sub carries each change to every
                              process, which answers the followers' polls from what it heard

One client address (a hash of it: web/classroom/codes.py client_tag) may hold a few live
sessions and a few members of one session (web/core/limits.py "sessions_per_client",
"members_per_client"), so one phone or one script cannot fill the server or a class. A session
nobody has joined ends sooner than one with a class ("unjoined_idle_seconds").

Every change of a session (the teacher's state, a join, a poll opened, an answer, a reveal)
increments the session's `version`: a follower's poll sends the version it has (ETag) and gets
304 until it changes. Sessions expire after `idle` seconds without a change (web/core/limits.py
CLASSROOM["idle_seconds"]); their members, polls and answers go with them (SQLite: foreign
keys ON DELETE CASCADE, swept at most once a minute and checked on every read; Redis: every key
of the session carries the same time-to-live, renewed by each change).

Stored: the join code, a SHA-256 hash of the teacher's secret, the teacher's page state (the
query string of the projected page), anonymous random student ids (no name, no account, no
address), the polls (the question, the model's answer) and each student's answer. No personal
data.

Caps (web/core/limits.py CLASSROOM) are passed in by the views and enforced here, atomically:
sessions active at once, members per session, polls per session, answers per session.
"""
import json
import os
import sqlite3
import threading
import time


class StoreError(Exception):
    """A refused change; `status` is the HTTP status the views answer with."""
    status = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Gone(StoreError):
    status = 404


class Full(StoreError):
    status = 429


class Closed(StoreError):
    status = 409


class NotMember(StoreError):
    status = 403


class CodeTaken(StoreError):
    status = 409


UNAVAILABLE = "The class store is not answering; your answers are kept when it returns."


class Unavailable(StoreError):
    """The store does not answer (Redis stopped, frozen or unreachable; SQLite locked for longer
    than its busy timeout): the views answer 503 with Retry-After, never a 500 or a hang.
    `cause` (the driver's error) is for the logs and app.py's start-up message."""
    status = 503

    def __init__(self, cause=None):
        super().__init__(UNAVAILABLE)
        self.cause = cause

    def __str__(self):
        return self.message + (f" ({self.cause})" if self.cause else "")


GONE = "There is no class with this code: it ended, expired or never existed."
# How long the code of a session that ended or expired is remembered (known()): the followers'
# polls and reloads of a class that just ended are not wrong codes (web/core/limits.py's join
# window).
REMEMBER_SECONDS = 600


def too_many_sessions(n) -> str:
    return (f"This address already runs {n} class sessions, the limit for one address: end one "
            "first (the class panel lists this browser's sessions), or wait until one expires.")


def too_many_members(n) -> str:
    return (f"{n} people have already joined this class from this network address, the limit "
            "for one address. If you are one of them, open the class in the browser you joined "
            "with. If the whole class reaches the server through one address, the teacher can "
            "raise the limit (app.py --members-per-address).")


def _poll_summary(pid, kind, spec, status, reveal, answered):
    return dict(id=int(pid), kind=kind, spec=json.loads(spec), status=status,
                reveal=json.loads(reveal) if reveal else None, answered=int(answered))


# --- SQLite ----------------------------------------------------------------------------------

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
                poll = _poll_summary(*p) if p else None
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


# --- Redis -----------------------------------------------------------------------------------
# Four keys per session, all with the session's time-to-live: S (a hash: teacher, state,
# version, npolls, nanswers, cur), S:m (the members' set), S:p (the polls: id -> JSON, "n:<id>"
# -> answers counted), S:a ("<poll>:<student>" -> answer). A sorted set of live sessions by
# last change caps how many run. Each change is one Lua script: checked and done atomically,
# then published on the updates channel as "<code> <version>".

_LUA_BUMP = """
local function bump(now, idle)
  local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
  redis.call('HSET', KEYS[1], 'touched', now)
  if redis.call('SCARD', KEYS[2]) == 0 then             -- nobody joined: the shorter life
    idle = redis.call('HGET', KEYS[1], 'unjoined') or idle
  end
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], idle) end
  redis.call('SET', KEYS[6], 1, 'PX', idle + tonumber(redis.call('HGET', KEYS[1], 'remember')))
  redis.call('ZADD', KEYS[5], now, ARGV[1])
  redis.call('PUBLISH', ARGV[4], ARGV[1] .. ' ' .. v)
  return v
end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
"""
# KEYS: S, S:m, S:p, S:a, active, K (the code is known: outlives S by `remember`);
# ARGV: code, now, idle_ms, channel, ...
_LUA = {
    "state": _LUA_BUMP + """
redis.call('HSET', KEYS[1], 'state', ARGV[5])
return bump(ARGV[2], ARGV[3])
""",
    "join": _LUA_BUMP + """
if redis.call('SISMEMBER', KEYS[2], ARGV[5]) == 1 then return 0 end
local per_client = 'c:' .. ARGV[7]
if tonumber(ARGV[8]) >= 0 and
   tonumber(redis.call('HGET', KEYS[1], per_client) or '0') >= tonumber(ARGV[8]) then
  return -3
end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[6]) then return -2 end
redis.call('SADD', KEYS[2], ARGV[5])
redis.call('HINCRBY', KEYS[1], per_client, 1)
bump(ARGV[2], ARGV[3])
return 1
""",
    "open": _LUA_BUMP + """
local npolls = tonumber(redis.call('HGET', KEYS[1], 'npolls'))
if npolls >= tonumber(ARGV[7]) then return -2 end
local cur = redis.call('HGET', KEYS[1], 'cur')
if cur ~= '0' then
  local p = cjson.decode(redis.call('HGET', KEYS[3], cur))
  if p.status == 'open' then
    p.status = 'closed'
    redis.call('HSET', KEYS[3], cur, cjson.encode(p))
  end
end
local id = redis.call('HINCRBY', KEYS[1], 'npolls', 1)
redis.call('HSET', KEYS[3], tostring(id), cjson.encode({kind = ARGV[5], spec = ARGV[6],
  status = 'open'}), 'n:' .. id, 0)
redis.call('HSET', KEYS[1], 'cur', id)
bump(ARGV[2], ARGV[3])
return id
""",
    "answer": _LUA_BUMP + """
if redis.call('SISMEMBER', KEYS[2], ARGV[6]) == 0 then return -3 end
local raw = redis.call('HGET', KEYS[3], ARGV[5])
if not raw then return -4 end
if cjson.decode(raw).status ~= 'open' then return -5 end
local field = ARGV[5] .. ':' .. ARGV[6]
local new = 0
if redis.call('HEXISTS', KEYS[4], field) == 0 then
  if tonumber(redis.call('HGET', KEYS[1], 'nanswers')) >= tonumber(ARGV[8]) then return -2 end
  redis.call('HINCRBY', KEYS[1], 'nanswers', 1)
  redis.call('HINCRBY', KEYS[3], 'n:' .. ARGV[5], 1)
  new = 1
end
redis.call('HSET', KEYS[4], field, ARGV[7])
bump(ARGV[2], ARGV[3])
return new
""",
    "lock": _LUA_BUMP + """
local raw = redis.call('HGET', KEYS[3], ARGV[5])
if not raw then return -4 end
local p = cjson.decode(raw)
if p.status ~= 'open' and p.status ~= 'revealing' then return -5 end
p.status = 'revealing'
redis.call('HSET', KEYS[3], ARGV[5], cjson.encode(p))
return bump(ARGV[2], ARGV[3])
""",
    "reveal": _LUA_BUMP + """
local raw = redis.call('HGET', KEYS[3], ARGV[5])
if not raw then return -4 end
local p = cjson.decode(raw)
if p.status ~= 'revealing' then return -5 end
p.status = 'revealed'
p.reveal = ARGV[6]
redis.call('HSET', KEYS[3], ARGV[5], cjson.encode(p))
return bump(ARGV[2], ARGV[3])
""",
}
VERSION_FRESH_SECONDS = 10.0     # a version heard on the channel is trusted this long
# ... and only while the listener has heard from Redis (a message or the answer to its ping)
# this recently: a frozen Redis or a dead connection stops the trust within CONTACT_SECONDS.
PING_SECONDS = 0.5
CONTACT_SECONDS = 1.5
DROP_SECONDS = 5.0               # no word for this long: the listener connects again
RECONNECT_SECONDS = (0.1, 1.0)   # the listener's wait before connecting again: first, longest
# Every Redis call gives up after STORE_TIMEOUT_SECONDS (connecting or reading), without
# retrying; after a failure, calls answer Unavailable at once for DOWN_SECONDS, then one call
# tries Redis again while the others still answer at once (a frozen Redis does not hold a
# waitress thread per follower's poll).
STORE_TIMEOUT_SECONDS = 1.0
DOWN_SECONDS = 1.0


class RedisStore:
    """The shared store: Redis (the `redis` package). Changes are Lua scripts (atomic); each
    process keeps the versions it hears on the updates channel, so a follower's poll for an
    unchanged session is answered 304 without asking Redis."""

    kind = "redis"

    def __init__(self, url: str, idle: float, prefix: str = "llmx:class:", unjoined=None,
                 remember: float = REMEMBER_SECONDS):
        import redis
        self.url = url
        self.idle = idle
        self.remember = remember
        self.unjoined = idle if unjoined is None else min(unjoined, idle)
        self.prefix = prefix
        self.channel = prefix + "updates"
        self._failures = (redis.ConnectionError, redis.TimeoutError)
        self.r = self._client()
        try:
            self.r.ping()                           # fail at start, not at the first class
        except self._failures as e:
            raise Unavailable(e) from e
        self._sub = self._client()                  # the listener's own connection
        self._scripts = {name: self.r.register_script(src) for name, src in _LUA.items()}
        self._heard = {}                  # code -> (version, or None once ended; when heard)
        self._heard_lock = threading.Lock()
        self._generation = 0              # + 1 whenever the listener may have missed a message
        self._contact = 0.0               # when the listener last heard from Redis
        self._pid = None
        self._listening = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._down_until = 0.0            # > 0: a call failed; see DOWN_SECONDS
        self._probe = threading.RLock()

    def _client(self):
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        return redis.Redis.from_url(self.url, decode_responses=True,
                                    socket_timeout=STORE_TIMEOUT_SECONDS,
                                    socket_connect_timeout=STORE_TIMEOUT_SECONDS,
                                    retry=Retry(NoBackoff(), 0))

    def _answer(self, method, args, kwargs):
        """Every interface method runs here (see _guarded at the end of the module): Redis's
        connection errors and timeouts become Unavailable (503), and while Redis is failing
        only one call at a time waits for it."""
        probing = failed = False
        if self._down_until:
            if time.monotonic() < self._down_until or not self._probe.acquire(blocking=False):
                raise Unavailable()
            probing = True
        try:
            return method(self, *args, **kwargs)
        except self._failures as e:
            failed = True
            self._down_until = time.monotonic() + DOWN_SECONDS
            raise Unavailable(e) from e
        finally:
            if probing:
                if not failed:                       # Redis answered (Gone and Full too)
                    self._down_until = 0.0
                self._probe.release()

    def describe(self) -> str:
        return f"Redis {self.url}"

    def _keys(self, code):
        s = f"{self.prefix}s:{code}"
        return [s, s + ":m", s + ":p", s + ":a", self.prefix + "active", self.prefix + "k:" + code]

    def _run(self, name, code, now, *args):
        result = self._scripts[name](keys=self._keys(code), args=[
            code, repr(now), int(self.idle * 1000), self.channel, *args])
        if result == -1:
            raise Gone(GONE)
        return result

    # -- the listener: versions published by every process of every instance ------------------

    def _listen(self):
        """Started once per process (after the fork): keeps self._heard up to date."""
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._heard = {}
            self._listening.clear()
        threading.Thread(target=self._listener, name="classroom-redis-updates",
                         daemon=True).start()

    def _listener(self):
        """Hears "<code> <version>" and "<code> ended" on the updates channel, and pings Redis
        when nothing comes, so that version() knows how recent its word is. A lost connection
        forgets what was heard (messages may have been missed) and connects again after
        RECONNECT_SECONDS (doubling from the first to the longest)."""
        wait, pruned = RECONNECT_SECONDS[0], time.monotonic()
        while not self._closed:
            pubsub = None
            try:
                pubsub = self._sub.pubsub()
                pubsub.subscribe(self.channel)
                last = pinged = time.monotonic()
                while not self._closed:
                    message = pubsub.get_message(timeout=PING_SECONDS)
                    t = time.monotonic()
                    if message is not None:              # any word: Redis answers
                        last = self._contact = t
                        if message["type"] == "subscribe":
                            with self._heard_lock:       # what was missed: ask Redis again
                                self._heard = {}
                                self._generation += 1
                            self._listening.set()
                            wait = RECONNECT_SECONDS[0]
                        elif message["type"] == "message":
                            self._hear(str(message["data"]), t)
                    if t - last > DROP_SECONDS:
                        raise TimeoutError("no word from Redis")
                    if t - pinged >= PING_SECONDS:
                        pubsub.ping("listening")
                        pinged = t
                    if t - pruned > 60:                  # stale entries are asked again anyway
                        pruned = t
                        with self._heard_lock:
                            self._heard = {c: h for c, h in self._heard.items()
                                           if t - h[1] < VERSION_FRESH_SECONDS}
            except Exception:                        # noqa: BLE001 - a lost connection
                pass
            finally:
                self._listening.clear()
                with self._heard_lock:
                    self._generation += 1
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:                # noqa: BLE001 - already gone
                        pass
            if not self._closed:
                time.sleep(wait)
                wait = min(2 * wait, RECONNECT_SECONDS[1])

    def _hear(self, data, t):
        code, _, version = data.partition(" ")
        with self._heard_lock:
            if version == "ended":                   # version() answers None at once
                self._heard[code] = (None, t)
            elif version.isdigit():
                cur = self._heard.get(code)
                v = int(version)
                self._heard[code] = (max(v, cur[0]) if cur and cur[0] is not None else v, t)

    def version(self, code, now):
        """The session's version (None: ended, expired or unknown), from what the listener
        heard while it is in contact with Redis, else from Redis. What Redis answers is kept
        only if the listener missed nothing meanwhile (same generation) and heard nothing newer:
        a read that raced with a change or the end never hides it."""
        self._listen()
        t = time.monotonic()
        with self._heard_lock:
            heard = self._heard.get(code)
            generation = self._generation
        trusted = self._listening.is_set() and t - self._contact < CONTACT_SECONDS
        if heard and trusted and t - heard[1] < VERSION_FRESH_SECONDS:
            return heard[0]
        v = self.r.hget(self._keys(code)[0], "version")
        v = None if v is None else int(v)
        with self._heard_lock:
            cur = self._heard.get(code)
            fresh = cur is not None and time.monotonic() - cur[1] < VERSION_FRESH_SECONDS
            if fresh and cur[0] is None:
                return None                          # it ended after Redis was read
            if generation != self._generation:
                return v
            if v is None:
                if cur is not None and cur[0] is not None:
                    del self._heard[code]            # expired: nothing is published
            elif cur is None or not fresh or cur[0] is None or v >= cur[0]:
                self._heard[code] = (v, time.monotonic())
            else:
                return cur[0]                        # the listener heard a newer one
        return v

    # -- the interface ------------------------------------------------------------------------

    def create(self, code, teacher_hash, state, now, max_sessions, client="",
               max_per_client=None):
        s, _, _, _, active, _ = self._keys(code)
        pipe = self.r.pipeline()
        pipe.zremrangebyscore(active, "-inf", now - self.idle)
        pipe.execute()
        # Sessions that ended sooner (nobody joined them, or the teacher ended them) leave the
        # count of live ones and of their client's here, before the caps are checked.
        ok = self.r.eval("""
local function live(c) return redis.call('EXISTS', ARGV[7] .. 's:' .. c) == 1 end
for _, c in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if not live(c) then redis.call('ZREM', KEYS[2], c) end
end
local mine = 0
for _, c in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if live(c) then mine = mine + 1 else redis.call('SREM', KEYS[3], c) end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if tonumber(ARGV[9]) >= 0 and mine >= tonumber(ARGV[9]) then return -3 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return -2 end
redis.call('HSET', KEYS[1], 'teacher', ARGV[2], 'state', ARGV[3], 'version', 1,
  'created', ARGV[4], 'touched', ARGV[4], 'npolls', 0, 'nanswers', 0, 'cur', 0,
  'unjoined', ARGV[8], 'client', ARGV[10], 'remember', ARGV[11])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('SET', KEYS[4], 1, 'PX', ARGV[8] + ARGV[11])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return 1""", 4, s, active, f"{self.prefix}cl:{client}", self._keys(code)[5], code,
            teacher_hash, state, repr(now), max_sessions, int(self.idle * 1000), self.prefix,
            int(self.unjoined * 1000), -1 if max_per_client is None else max_per_client, client,
            int(self.remember * 1000))
        if ok == -1:
            raise CodeTaken("code in use")
        if ok == -3:
            raise Full(too_many_sessions(max_per_client))
        if ok == -2:
            raise Full(f"This server already runs {max_sessions} class sessions, its limit; "
                       "try again when one has ended.")

    def session(self, code, now):
        s, m, p, _, _, _ = self._keys(code)
        pipe = self.r.pipeline(transaction=True)
        pipe.hgetall(s)
        pipe.scard(m)
        pipe.hgetall(p)
        head, members, polls = pipe.execute()
        if not head:
            return None
        poll = None
        cur = head.get("cur", "0")
        if cur != "0" and cur in polls:
            d = json.loads(polls[cur])
            poll = _poll_summary(cur, d["kind"], d["spec"], d["status"], d.get("reveal"),
                                 polls.get(f"n:{cur}", 0))
        return dict(code=code, teacher=head["teacher"], state=head["state"],
                    version=int(head["version"]), members=members, poll=poll)

    def set_state(self, code, state, now) -> int:
        return self._run("state", code, now, state)

    def join(self, code, student, now, max_members, client="", max_per_client=None) -> bool:
        n = self._run("join", code, now, student, max_members, client,
                      -1 if max_per_client is None else max_per_client)
        if n == -3:
            raise Full(too_many_members(max_per_client))
        if n == -2:
            raise Full(f"This class is full: {max_members} people have joined, the limit of "
                       "one session.")
        return n == 1

    def is_member(self, code, student) -> bool:
        return bool(self.r.sismember(self._keys(code)[1], student))

    def open_poll(self, code, kind, spec, now, max_polls) -> int:
        n = self._run("open", code, now, kind, spec, max_polls)
        if n == -2:
            raise Full(f"This session has run {max_polls} polls, the limit of one session; "
                       "start a new session for more.")
        return n

    def answer(self, code, poll_id, student, value, now, max_answers) -> bool:
        n = self._run("answer", code, now, str(poll_id), student, value, max_answers)
        if n == -3:
            raise NotMember("Join the class first.")
        if n == -4:
            raise Closed("There is no such poll.")
        if n == -5:
            raise Closed("This poll is closed: its answer has been revealed or another poll "
                         "has started.")
        if n == -2:
            raise Full(f"This session holds {max_answers} answers, the limit of one session.")
        return n == 1

    def answers(self, code, poll_id) -> list:
        a = self._keys(code)[3]
        return [v for _, v in self.r.hscan_iter(a, match=f"{poll_id}:*", count=500)]

    def mine(self, code, poll_id, student):
        return self.r.hget(self._keys(code)[3], f"{poll_id}:{student}")

    def lock(self, code, poll_id, now):
        if self._run("lock", code, now, str(poll_id)) in (-4, -5):
            raise Closed("Only the open poll can be revealed.")

    def reveal(self, code, poll_id, reveal, now) -> int:
        n = self._run("reveal", code, now, str(poll_id), reveal)
        if n in (-4, -5):
            raise Closed("Only the open poll can be revealed.")
        return n

    def end(self, code):
        keys = self._keys(code)
        pipe = self.r.pipeline()
        pipe.delete(*keys[:4])
        pipe.zrem(keys[4], code)
        pipe.set(keys[5], 1, px=int(self.remember * 1000))
        pipe.publish(self.channel, f"{code} ended")
        pipe.execute()
        self._hear(f"{code} ended", time.monotonic())

    def known(self, code, now) -> bool:
        """Whether `code` names a session that exists or ended less than `remember` seconds ago
        (its K key outlives the session's by that long)."""
        s, *_, k = self._keys(code)
        return self.r.exists(s, k) > 0

    def expire(self, now) -> int:
        """The keys expire by themselves; this drops ended sessions from the count of live
        ones."""
        return self.r.zremrangebyscore(self.prefix + "active", "-inf", now - self.idle)

    def count_join_failure(self, client, now, window) -> int:
        key = f"{self.prefix}jf:{client}"
        pipe = self.r.pipeline()
        pipe.incr(key)
        pipe.expire(key, int(window), nx=True)
        return pipe.execute()[0]

    def join_failures(self, client, now, window) -> int:
        return int(self.r.get(f"{self.prefix}jf:{client}") or 0)

    def close(self):
        self._closed = True
        self.r.close()
        self._sub.close()


def open_store(spec: str, data_dir: str, idle: float, unjoined: float = None,
               remember: float = REMEMBER_SECONDS):
    """The store named by --store: "sqlite" (default; in data_dir) or a redis:// URL."""
    if not spec or spec == "sqlite":
        return SQLiteStore(data_dir, idle, unjoined, remember)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(spec, idle, unjoined=unjoined, remember=remember)
    raise ValueError(f"--store must be 'sqlite' or a redis:// URL, not {spec!r}")


def _guarded(cls, translate):
    """Run every public method of the store class `cls` through `translate(store, method,
    args, kwargs)`: a store that does not answer is Unavailable (503), whichever method asked."""
    def guard(method):
        def call(self, *args, **kwargs):
            return translate(self, method, args, kwargs)
        call.__name__, call.__doc__, call.__wrapped__ = method.__name__, method.__doc__, method
        return call
    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_") and name not in ("describe", "close"):
            setattr(cls, name, guard(value))


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


_guarded(SQLiteStore, _sqlite_answer)
_guarded(RedisStore, RedisStore._answer)
