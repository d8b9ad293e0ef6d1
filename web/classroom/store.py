"""Where a class's shared state lives: sessions, who joined, polls and answers.

One small interface, two implementations, chosen at start (`python app.py --store ...`):

    SQLiteStore(data_dir)     the default: Python's sqlite3 in WAL mode, one file in the data
                              directory (--data-dir, default data/classroom/); every worker
                              process of one server opens it; nothing to start
    RedisStore(url)           --store redis://host:port/db: several app instances behind a
                              proxy serve one class; Redis pub/sub carries each change to every
                              process, which answers the followers' polls from what it heard

Every change of a session (the teacher's state, a join, a poll opened, an answer, a reveal)
increments the session's `version`: a follower's poll sends the version it has (ETag) and gets
304 until it changes. Sessions expire after `idle` seconds without a change (web/limits.py
CLASSROOM["idle_seconds"]); their members, polls and answers go with them (SQLite: foreign
keys ON DELETE CASCADE, swept at most once a minute and checked on every read; Redis: every key
of the session carries the same time-to-live, renewed by each change).

Stored: the join code, a SHA-256 hash of the teacher's secret, the teacher's page state (the
query string of the projected page), anonymous random student ids (no name, no account, no
address), the polls (the question, the model's answer) and each student's answer. No personal
data.

Caps (web/limits.py CLASSROOM) are passed in by the views and enforced here, atomically:
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


GONE = "There is no class with this code: it ended, expired or never existed."


def _poll_summary(pid, kind, spec, status, reveal, answered):
    return dict(id=int(pid), kind=kind, spec=json.loads(spec), status=status,
                reveal=json.loads(reveal) if reveal else None, answered=int(answered))


# --- SQLite ----------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
  code TEXT PRIMARY KEY, teacher TEXT NOT NULL, state TEXT NOT NULL,
  version INTEGER NOT NULL, created REAL NOT NULL, touched REAL NOT NULL,
  npolls INTEGER NOT NULL DEFAULT 0, cur INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS sessions_touched ON sessions(touched);
CREATE TABLE IF NOT EXISTS members (
  code TEXT NOT NULL REFERENCES sessions(code) ON DELETE CASCADE,
  student TEXT NOT NULL, joined REAL NOT NULL, PRIMARY KEY (code, student));
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
"""
SWEEP_SECONDS = 60


class SQLiteStore:
    """The embedded store: one SQLite file in WAL mode (readers never wait for the writer),
    one connection per thread and process (opened after the workers are forked), writes in
    BEGIN IMMEDIATE transactions so that a check and its change are one step."""

    kind = "sqlite"

    def __init__(self, data_dir: str, idle: float):
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, "classroom.sqlite3")
        self.idle = idle
        self._local = threading.local()
        self._swept = 0.0
        with self._conn() as db:          # creates the schema once
            db.executescript(SCHEMA)

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
        row = db.execute("SELECT teacher, version, npolls, cur, touched FROM sessions "
                         "WHERE code = ?", (code,)).fetchone()
        if row is None:
            raise Gone(GONE)
        if row[4] < now - self.idle:
            db.execute("DELETE FROM sessions WHERE code = ?", (code,))
            raise Gone(GONE)
        return row

    def _bump(self, db, code, now) -> int:
        db.execute("UPDATE sessions SET version = version + 1, touched = ? WHERE code = ?",
                   (now, code))
        return db.execute("SELECT version FROM sessions WHERE code = ?", (code,)).fetchone()[0]

    def _sweep(self, db, now, force=False):
        if force or now - self._swept > SWEEP_SECONDS:
            self._swept = now
            return db.execute("DELETE FROM sessions WHERE touched < ?",
                              (now - self.idle,)).rowcount
        return 0

    # -- the interface ------------------------------------------------------------------------

    def create(self, code, teacher_hash, state, now, max_sessions):
        with self._tx() as db:
            self._sweep(db, now, force=True)
            if db.execute("SELECT 1 FROM sessions WHERE code = ?", (code,)).fetchone():
                raise CodeTaken("code in use")
            n = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
            if n >= max_sessions:
                raise Full(f"This server already runs {n} class sessions, its limit; try again "
                           "when one has ended.")
            db.execute("INSERT INTO sessions (code, teacher, state, version, created, touched) "
                       "VALUES (?, ?, ?, 1, ?, ?)", (code, teacher_hash, state, now, now))

    def version(self, code, now):
        row = self._conn().execute("SELECT version, touched FROM sessions WHERE code = ?",
                                   (code,)).fetchone()
        return None if row is None or row[1] < now - self.idle else row[0]

    def session(self, code, now):
        db = self._conn()
        db.execute("BEGIN")                      # one consistent snapshot of the reads
        try:
            row = db.execute("SELECT teacher, state, version, cur, touched FROM sessions "
                             "WHERE code = ?", (code,)).fetchone()
            if row is None or row[4] < now - self.idle:
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

    def join(self, code, student, now, max_members) -> bool:
        with self._tx() as db:
            self._live(db, code, now)
            self._sweep(db, now)
            if db.execute("SELECT 1 FROM members WHERE code = ? AND student = ?",
                          (code, student)).fetchone():
                return False
            n = db.execute("SELECT COUNT(*) FROM members WHERE code = ?", (code,)).fetchone()[0]
            if n >= max_members:
                raise Full(f"This class is full: {n} people have joined, the limit of one "
                           "session.")
            db.execute("INSERT INTO members VALUES (?, ?, ?)", (code, student, now))
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

    def end(self, code):
        with self._tx() as db:
            db.execute("DELETE FROM sessions WHERE code = ?", (code,))

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
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], idle) end
  redis.call('ZADD', KEYS[5], now, ARGV[1])
  redis.call('PUBLISH', ARGV[4], ARGV[1] .. ' ' .. v)
  return v
end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
"""
# KEYS: S, S:m, S:p, S:a, active; ARGV: code, now, idle_ms, channel, ...
_LUA = {
    "state": _LUA_BUMP + """
redis.call('HSET', KEYS[1], 'state', ARGV[5])
return bump(ARGV[2], ARGV[3])
""",
    "join": _LUA_BUMP + """
if redis.call('SISMEMBER', KEYS[2], ARGV[5]) == 1 then return 0 end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[6]) then return -2 end
redis.call('SADD', KEYS[2], ARGV[5])
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


class RedisStore:
    """The shared store: Redis (the `redis` package). Changes are Lua scripts (atomic); each
    process keeps the versions it hears on the updates channel, so a follower's poll for an
    unchanged session is answered 304 without asking Redis."""

    kind = "redis"

    def __init__(self, url: str, idle: float, prefix: str = "llmx:class:"):
        import redis
        self.url = url
        self.idle = idle
        self.prefix = prefix
        self.channel = prefix + "updates"
        self.r = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10,
                                      health_check_interval=30)
        self.r.ping()                               # fail at start, not at the first class
        self._scripts = {name: self.r.register_script(src) for name, src in _LUA.items()}
        self._heard = {}                            # code -> (version, when heard)
        self._pid = None
        self._listening = threading.Event()
        self._lock = threading.Lock()
        self._closed = False

    def describe(self) -> str:
        return f"Redis {self.url}"

    def _keys(self, code):
        s = f"{self.prefix}s:{code}"
        return [s, s + ":m", s + ":p", s + ":a", self.prefix + "active"]

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
        while not self._closed:
            try:
                pubsub = self.r.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                self._heard = {}                     # missed messages: ask Redis again
                self._listening.set()
                for message in pubsub.listen():
                    code, _, version = str(message.get("data", "")).partition(" ")
                    if version.isdigit():
                        self._heard[code] = (int(version), time.monotonic())
            except Exception:                        # noqa: BLE001 - a lost connection
                self._listening.clear()
                if not self._closed:
                    time.sleep(0.5)

    def version(self, code, now):
        self._listen()
        heard = self._heard.get(code)
        if heard and self._listening.is_set() and \
                time.monotonic() - heard[1] < VERSION_FRESH_SECONDS:
            return heard[0]
        v = self.r.hget(self._keys(code)[0], "version")
        if v is None:
            self._heard.pop(code, None)
            return None
        self._heard[code] = (int(v), time.monotonic())
        return int(v)

    # -- the interface ------------------------------------------------------------------------

    def create(self, code, teacher_hash, state, now, max_sessions):
        s, _, _, _, active = self._keys(code)
        pipe = self.r.pipeline()
        pipe.zremrangebyscore(active, "-inf", now - self.idle)
        pipe.execute()
        ok = self.r.eval("""
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return -2 end
redis.call('HSET', KEYS[1], 'teacher', ARGV[2], 'state', ARGV[3], 'version', 1,
  'created', ARGV[4], 'touched', ARGV[4], 'npolls', 0, 'nanswers', 0, 'cur', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1""", 2, s, active, code, teacher_hash, state, repr(now), max_sessions,
            int(self.idle * 1000))
        if ok == -1:
            raise CodeTaken("code in use")
        if ok == -2:
            raise Full(f"This server already runs {max_sessions} class sessions, its limit; "
                       "try again when one has ended.")

    def session(self, code, now):
        s, m, p, _, _ = self._keys(code)
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

    def join(self, code, student, now, max_members) -> bool:
        n = self._run("join", code, now, student, max_members)
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
        pipe.publish(self.channel, f"{code} ended")
        pipe.execute()
        self._heard.pop(code, None)

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


def open_store(spec: str, data_dir: str, idle: float):
    """The store named by --store: "sqlite" (default; in data_dir) or a redis:// URL."""
    if not spec or spec == "sqlite":
        return SQLiteStore(data_dir, idle)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(spec, idle)
    raise ValueError(f"--store must be 'sqlite' or a redis:// URL, not {spec!r}")
