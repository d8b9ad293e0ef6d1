"""A redis-server the test owns, run as docs/classroom.md's several-instance recipe runs it
(append-only file, fsync every second): stopped, frozen (SIGSTOP), killed with -9 and started again
on the same port and directory. Skipped with the reason when Debian's redis-server is not installed
(`make test` installs it)."""
import os
import re
import shutil
import signal
import subprocess
import time

from tests.classroom_support import free_port

# the several-instance recipe (its redis-server command, its nginx configuration)
README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                      "classroom.md")


def readme_redis_args() -> list:
    """The persistence options of the `redis-server` command of docs/classroom.md (the
    several-instance recipe), without its --port and --dir, which the test chooses."""
    with open(README, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip().startswith("redis-server ")]
    assert lines, "docs/classroom.md's recipe has no redis-server command"
    words = re.sub(r"\s*&\s*$", "", lines[0]).split()[1:]
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w in ("--port", "--dir"):
            skip = True
        else:
            out.append(w)
    return out


class RedisServer:
    """redis-server on a free port of 127.0.0.1 with its own directory; start() again after
    stop() or kill() reuses both."""

    def __init__(self, directory, args=None):
        self.exe = shutil.which("redis-server")
        self.port = free_port()
        self.dir = str(directory)
        self.args = readme_redis_args() if args is None else list(args)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def start(self, timeout=15.0):
        import redis
        self.proc = subprocess.Popen([self.exe, *self.args, "--port", str(self.port),
                                      "--bind", "127.0.0.1", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()              # answers LOADING until the file is read
                client.close()
                return self
            except (redis.ConnectionError, redis.BusyLoadingError) as e:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    raise AssertionError("redis-server did not answer") from e
                time.sleep(0.02)

    def stop(self):
        """A clean shutdown (SIGTERM: the append-only file is flushed)."""
        self.proc.terminate()
        self.proc.wait(timeout=15)

    def kill(self):
        self.proc.kill()                    # SIGKILL: nothing is flushed
        self.proc.wait(timeout=15)

    def freeze(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def aof_text(self) -> bytes:
        """Everything in the append-only files (Redis 7: appendonlydir/*.aof)."""
        out = b""
        for root, _, files in os.walk(self.dir):
            for name in sorted(files):
                if ".aof" in name:
                    with open(os.path.join(root, name), "rb") as f:
                        out += f.read()
        return out

    def wait_in_aof(self, marker: bytes, timeout=10.0):
        """Until the append-only file holds `marker` (written by the server, so a kill -9 keeps
        it: the page cache survives the process)."""
        deadline = time.monotonic() + timeout
        while marker not in self.aof_text():
            assert time.monotonic() < deadline, f"{marker!r} never reached the append-only file"
            time.sleep(0.02)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.thaw()
            except ProcessLookupError:
                pass
            self.proc.kill()
            self.proc.wait(timeout=15)
