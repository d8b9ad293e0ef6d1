"""Shared by tests/test_classroom_*.py: the two stores, and a free port. The real
redis-server on a free port is the fixture `redis_url` of tests/conftest.py (skipped with the
reason NO_REDIS when Debian's redis-server is not installed: `make test` installs it)."""
import socket
import uuid

from web.classroom.store.redis import RedisStore
from web.classroom.store.sqlite import SQLiteStore

NO_REDIS = ("redis-server is not installed: `make test` installs Debian's redis-server "
            "(apt-get install -y redis-server)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_store(kind, tmp_path, idle, redis_url=None):
    if kind == "sqlite":
        return SQLiteStore(str(tmp_path / f"data-{uuid.uuid4().hex[:6]}"), idle)
    return RedisStore(redis_url, idle, prefix=f"test:{uuid.uuid4().hex[:8]}:")
