"""The factory and the command line: which model is served, and serving it for real."""
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from pipeline import DEFAULT_MODEL_DIR
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
    app = create_app({"PROBE_ENCODINGS": False})
    assert app.extensions["explainer_model"].name == "austen-draft"
    page = app.test_client().get("/").get_data(as_text=True)
    assert "austen-draft" in page


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_weights
def test_python_app_py_serves_with_waitress_on_localhost():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    assert r.status == 200 and b"Tokenization" in r.read()
                    assert "waitress" in r.headers.get("Server", "")
                break
            except (ConnectionError, urllib.error.URLError):
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(10)


def test_help_lists_host_port_and_model():
    out = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout
    assert "--host" in out and "--port" in out and "--model" in out
