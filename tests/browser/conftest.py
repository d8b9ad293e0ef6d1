"""Browser tests: the real app served by waitress on a free port of 127.0.0.1, driven in
Debian's Chromium (/usr/bin/chromium) by Playwright; Playwright's own browser is not used."""
import os
import threading

import pytest
from waitress.server import create_server

from pipeline import DEFAULT_MODEL_DIR, load_model

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic",
                 # a page of a second context (a teacher and a student) keeps drawing frames and
                 # running its timers: a page Chromium thinks is in the background can stop
                 # requestAnimationFrame, which some checks and the app's figures wait on
                 "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows",
                 "--disable-background-timer-throttling"]


def pytest_collection_modifyitems(items):
    """Every test of this folder carries the `browser` marker (pyproject.toml), so that
    `pytest -m "not browser"` runs the others."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: `make test` installs Debian's chromium")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def live_app():
    """The app the browser tests are served, its sections warmed."""
    if not os.path.exists(os.path.join(DEFAULT_MODEL_DIR, "model.safetensors")):
        pytest.skip("models/austen/model.safetensors is missing")
    from app import create_app
    from web.serving.server import warm
    app = create_app({"MODEL": load_model(None), "WARM_CACHES": False})
    # as web/serving/server.py's run does before it serves: every section's warm (the timings)
    warm(app)
    return app


@pytest.fixture(autouse=True)
def in_the_served_apps_context(live_app):
    """Each browser test runs in the served app's context: a section's helper the test calls
    reads the same caches and measurements as the server's answers
    (web/model_state/explainer.py)."""
    with live_app.app_context():
        yield


@pytest.fixture(scope="session")
def stream_slots(live_app):
    """The served app's stream slots (web.serving.streaming.StreamSlots)."""
    return live_app.extensions["explainer"].slots


@pytest.fixture(scope="session")
def live_server(live_app):
    """The app, served for real by waitress in a background thread."""
    from web.serving import streaming
    app = live_app
    server = create_server(app, host="127.0.0.1", port=0, threads=4,
                           **streaming.SERVER_OPTIONS)  # as app.py serves it
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    server.close()


@pytest.fixture(scope="session")
def two_models_server(request):
    """(app, base URL): the app offering the Austen model and SmolLM2 (tests/conftest.py
    smol_app, the one the other tests read), served by waitress as app.py serves it, once for
    the whole run. The modules that show both models share it: a SmolLM2 load and its
    sections' caches (minutes cold on a loaded machine) are made once, not once per module.
    Without SmolLM2's package it offers the Austen model alone (those tests of SmolLM2 skip)."""
    from web.model_state.explainer import installed_smollm2
    from web.serving import streaming
    if installed_smollm2() is not None:
        app = request.getfixturevalue("smol_app")
    else:
        from app import create_app
        app = create_app({"MODEL": request.getfixturevalue("model"), "INSTALLED_MODELS": True,
                          "PROBE_ENCODINGS": False, "WARM_CACHES": False})
    server = create_server(app, host="127.0.0.1", port=0, threads=4,
                           **streaming.SERVER_OPTIONS)
    threading.Thread(target=server.run, daemon=True).start()
    yield app, f"http://127.0.0.1:{server.effective_port}"
    server.close()


@pytest.fixture(scope="session")
def base_url(live_server):
    return live_server


@pytest.fixture(scope="session")
def model(live_server):
    return load_model(None)


@pytest.fixture()
def dialogs(page):
    """Every alert/confirm/prompt the page opens: a test expects none."""
    seen = []
    page.on("dialog", lambda d: (seen.append(d.message), d.dismiss()))
    return seen


@pytest.fixture()
def page_errors(page):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return errors


# The one place browser tests' waits are set. A passing test waits no longer than it needs to.
EXPECT_TIMEOUT_MS = 30_000       # an expect() (Playwright's default is 5 s): a prompt change
#   recomputes all sections and redraws ~40 figures, which on a loaded 2-core machine (CI, other
#   jobs) can take longer than 5 s
NAVIGATION_TIMEOUT_MS = 180_000  # a goto or reload (default 30 s): the first page of a run
#   computes every section's per-model caches, and the page loads every section


@pytest.fixture(autouse=True)
def patient_expect():
    from playwright.sync_api import expect
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    yield


def load_every_section(page):
    """Load each section that is still a placeholder: the page computes a section only when it
    nears the screen, and most tests read sections far down. All are asked for at once, as
    printing does (static/lazy.js: Explainer.loadAll); one the busy server refused is asked
    again, or its Try again button pressed, as a reader would."""
    lazy = page.locator("[data-lazy]")
    retry = page.get_by_role("button", name="Try again")
    for _ in range(30):
        if lazy.count() == 0:
            break
        page.evaluate("() => window.Explainer && window.Explainer.loadAll &&"
                      " window.Explainer.loadAll()")
        page.wait_for_load_state("networkidle")
        try:
            if retry.first.is_visible():
                retry.first.click()
        except Exception:          # swapped for its section meanwhile: look again
            pass
    from playwright.sync_api import expect
    expect(lazy).to_have_count(0)
    page.evaluate("() => window.scrollTo(0, 0)")


@pytest.fixture()
def page(page):
    """Playwright's page whose goto() and reload() also load every section (scrolling to each,
    as a reader would). page.goto_first_screen() is the plain goto: only what the first screen
    loads; page.load_every_section() loads the rest at any time (after a prompt change)."""
    page.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    plain = page.goto

    def goto(url, **kw):
        response = plain(url, **kw)
        if response is None or response.status < 400:
            load_every_section(page)
        return response

    def loading(navigate):
        def go(*args, **kw):
            response = navigate(*args, **kw)
            if response is None or response.status < 400:
                load_every_section(page)
            return response
        return go

    page.goto_first_screen = plain
    page.load_every_section = lambda: load_every_section(page)
    page.goto = goto
    page.reload = loading(page.reload)
    return page


@pytest.fixture()
def class_store(live_app, tmp_path):
    """The served app's classes, in a store of this test's own."""
    from web.classroom.store.sqlite import SQLiteStore
    c = live_app.extensions["classroom"]
    before = c._store
    c.store = SQLiteStore(str(tmp_path / "data"), c.limits["idle_seconds"])
    yield c.store
    c.store = before
