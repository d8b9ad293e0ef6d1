"""Where a class's shared state lives: sessions, who joined, polls and answers.

One small interface (this module: its errors and messages; `open_store`, the factory), two
implementations, chosen at start (`python app.py --store ...`):

    SQLiteStore(data_dir)     sqlite.py, the default: Python's sqlite3 in WAL mode, one file
                              in the data directory (--data-dir, default data/classroom/);
                              every worker process of one server opens it; nothing to start
    RedisStore(url)           redis.py, --store redis://host:port/db: several app instances
                              behind a proxy serve one class; Redis pub/sub carries each
                              change to every process, which answers the followers' polls
                              from what it heard

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
from typing import Protocol


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


def poll_summary(pid, kind, spec, status, reveal, answered):
    return dict(id=int(pid), kind=kind, spec=json.loads(spec), status=status,
                reveal=json.loads(reveal) if reveal else None, answered=int(answered))


class Store(Protocol):
    """What the views call, and both stores answer (tests/test_classroom_store.py checks the
    two classes against it). Times `now` are the caller's clock in seconds; a refused change
    raises a StoreError."""
    kind: str                                   # "sqlite" or "redis"

    def describe(self) -> str: ...             # one line for the start-up message
    def create(self, code, teacher_hash, state, now, max_sessions, client="",
               max_per_client=None): ...
    def version(self, code, now): ...          # the session's version (a follower's ETag)
    def session(self, code, now): ...          # its state, members and current poll
    def set_state(self, code, state, now) -> int: ...
    def join(self, code, student, now, max_members, client="",
             max_per_client=None) -> bool: ...
    def is_member(self, code, student) -> bool: ...
    def open_poll(self, code, kind, spec, now, max_polls) -> int: ...
    def answer(self, code, poll_id, student, value, now, max_answers) -> bool: ...
    def answers(self, code, poll_id) -> list: ...
    def mine(self, code, poll_id, student): ...
    def lock(self, code, poll_id, now): ...
    def reveal(self, code, poll_id, reveal, now) -> int: ...
    def end(self, code): ...
    def known(self, code, now) -> bool: ...   # a code that ended recently is still known
    def expire(self, now) -> int: ...
    def count_join_failure(self, client, now, window) -> int: ...
    def join_failures(self, client, now, window) -> int: ...
    def close(self): ...


def guarded(cls, translate):
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


def open_store(spec: str, data_dir: str, idle: float, unjoined: float = None,
               remember: float = REMEMBER_SECONDS) -> Store:
    """The store named by --store: "sqlite" (default; in data_dir) or a redis:// URL."""
    if not spec or spec == "sqlite":
        from web.classroom.store.sqlite import SQLiteStore
        return SQLiteStore(data_dir, idle, unjoined, remember)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from web.classroom.store.redis import RedisStore
        return RedisStore(spec, idle, unjoined=unjoined, remember=remember)
    raise ValueError(f"--store must be 'sqlite' or a redis:// URL, not {spec!r}")

