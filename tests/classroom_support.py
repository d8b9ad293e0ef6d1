"""Shared by tests/test_classroom_*.py: a real redis-server on a free port (started here,
skipped with the reason when Debian's redis-server is not installed: `make test` installs it),
and the two stores."""
import shutil
import socket
import subprocess
import time
import uuid

import pytest

from web.classroom.store import RedisStore, SQLiteStore

NO_REDIS = ("redis-server is not installed: `make test` installs Debian's redis-server "
            "(apt-get install -y redis-server)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip(NO_REDIS)
    port = free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path_factory.mktemp("redis"))],
                            stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    import redis
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not answer")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def make_store(kind, tmp_path, idle, redis_url=None):
    if kind == "sqlite":
        return SQLiteStore(str(tmp_path / f"data-{uuid.uuid4().hex[:6]}"), idle)
    return RedisStore(redis_url, idle, prefix=f"test:{uuid.uuid4().hex[:8]}:")
