"""The factory and the command line: which model is served, and serving it for real."""
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from pipeline import DEFAULT_MODEL_DIR
from web.core import limits
from web_support import has_default_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRAFT = os.path.join(os.path.dirname(DEFAULT_MODEL_DIR), "austen-draft")
needs_weights = pytest.mark.skipif(not has_default_model(), reason="no default model weights")


@needs_weights
def test_model_directory_from_the_environment(monkeypatch):
    if not os.path.exists(os.path.join(DRAFT, "model.safetensors")):
        pytest.skip("no austen-draft weights")
    from app import create_app
    monkeypatch.setenv("LLM_EXPLAINER_MODEL", DRAFT)
    # SmolLM2 left out (INSTALLED_MODELS): the variable names the default, which is all that is
    # checked, and reading SmolLM2's file would take 5-15 s
    app = create_app({"PROBE_ENCODINGS": False, "WARM_CACHES": False, "INSTALLED_MODELS": False})
    assert app.extensions["explainer"].default_model.name == "austen-draft"
    page = app.test_client().get("/").get_data(as_text=True)
    assert "austen-draft" in page


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> set:
    """Process ids whose parent is pid (from /proc)."""
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.add(int(name))
    return out


def _serve(*args):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # the server warms every model it offers before it answers (SmolLM2's measurements take
    # tens of seconds on 2 cores: the README's measured block has the figure)
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
                assert r.status == 200 and b"Tokenization" in r.read()
                assert "waitress" in r.headers.get("Server", "")
            return proc, port
        except (ConnectionError, urllib.error.URLError, TimeoutError):
            # not listening yet, or still warming its caches (connections wait meanwhile)
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.2)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def serving_line(proc) -> str:
    """The "Serving the explainer on ..." line of the server's output (start-up warnings, such
    as an encoding that is not available offline, and the warm-up's progress come first)."""
    for _ in range(400):
        line = proc.stdout.readline()
        if line.startswith("Serving") or not line:
            return line
    return ""


@needs_weights
def test_python_app_py_serves_from_two_workers_and_sigterm_stops_them_all():
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this system: app.py serves from one process")
    proc, port = _serve()
    try:
        workers = _children(proc.pid)
        assert len(workers) == limits.SERVER_WORKERS == 2, workers
        assert (f"{limits.SERVER_WORKERS} worker(s) x {limits.SERVER_THREADS} threads"
                in serving_line(proc))
        for _ in range(6):                            # every connection is answered
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/section/logits",
                                        timeout=10) as r:
                assert r.status == 200
    finally:
        proc.terminate()
        assert proc.wait(20) == 0
    for pid in workers:                               # no worker outlives the server
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    assert _refused(port)


@needs_weights
def test_python_app_py_workers_1_serves_from_one_process():
    proc, port = _serve("--workers", "1")
    try:
        assert _children(proc.pid) == set()
        assert "1 worker(s)" in serving_line(proc)
    finally:
        proc.terminate()
        proc.wait(20)
    assert _refused(port)


def test_workers_must_be_at_least_one():
    run = subprocess.run([sys.executable, "app.py", "--workers", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--workers and --threads must be at least 1" in run.stderr


def test_help_lists_host_port_and_model():
    out = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout
    assert "--host" in out and "--port" in out and "--model" in out
