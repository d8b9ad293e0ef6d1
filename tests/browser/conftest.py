"""Browser tests: the real app served by waitress on a free port of 127.0.0.1, driven in
Debian's Chromium by Playwright; Playwright's own browser is not used."""
import os
import threading

import pytest
from waitress.server import create_server

from pipeline import DEFAULT_MODEL_DIR, load_model
from web.core import limits

# Debian's chromium-headless-shell (`make test` installs it): the same Blink and V8 as Debian's
# chromium of the same version, without the full browser's windowing and compositor. It is what
# Playwright itself runs for headless Chromium. Chromium is most of the browser tests' CPU, and a
# page costs the shell about a third less of it than the full browser (the commit that chose it
# says how that was measured). CHROMIUM=/usr/bin/chromium runs them in the full browser.
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
CHROMIUM = os.environ.get("CHROMIUM") or (HEADLESS_SHELL if os.path.exists(HEADLESS_SHELL)
                                          else "/usr/bin/chromium")
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
    `pytest -m "not browser"` runs the others.

    The tests that serve SmolLM2 (two_models_server, smol_app) name the xdist group "smollm2"
    (a module's pytestmark, or a model parameter's marks): SmolLM2's load and its sections'
    caches are then made on one worker only, and the Austen model's half of such a module runs
    beside them on the other. Every other test is in its file's group (tests/conftest.py)."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: `make test` installs Debian's chromium "
                    "and chromium-headless-shell")
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
    queue_at_the_gates(app)
    return app


# A test setting of the served apps (not the app's behaviour for users): a computing request
# waits up to this long for one of the compute gate's slots (web/core/limits.py Gate) instead of
# being refused after GATE_WAIT_SECONDS (2 s). `make test` runs the browser tests on two pytest
# workers, each with its own servers: while one worker's tests hold the 2 cores, the other's
# answers come late rather than as "Try again". The tests of the refusal itself set their own
# gates (test_browser_hardening.py's tight_server, test_browser_classroom_room.py).
TEST_GATE_WAIT_SECONDS = 60.0
TEST_GATE_WAITING = 64


def queue_at_the_gates(app):
    """Let `app`'s compute gates queue (TEST_GATE_WAIT_SECONDS); returns a function that puts
    back what they were."""
    gates = [app.extensions[name] for name in ("explainer_gate", "explainer_big_gate")]
    before = [(g.wait, g.waiting) for g in gates]
    for g in gates:
        g.wait, g.waiting = TEST_GATE_WAIT_SECONDS, TEST_GATE_WAITING

    def restore():
        for g, (wait, waiting) in zip(gates, before, strict=True):
            g.wait, g.waiting = wait, waiting
    return restore


@pytest.fixture(scope="session")
def smol_app(smol_app):
    """tests/conftest.py's smol_app, its gates queueing while the browser tests serve it
    (queue_at_the_gates); put back after."""
    restore = queue_at_the_gates(smol_app)
    yield smol_app
    restore()


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
    server = create_server(app, host="127.0.0.1", port=0, threads=limits.SERVER_THREADS,
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
        queue_at_the_gates(app)
    server = create_server(app, host="127.0.0.1", port=0, threads=limits.SERVER_THREADS,
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


# Every placeholder that is neither loaded nor showing its "Try again" (a refusal): waited on
# instead of the network's quiet, which costs half a second each time. Up to a page load's
# time: the sections' requests queue at the server's gates (a SmolLM2 page's two at a time).
UNANSWERED = "[data-lazy]:not(:has(.lazy-failed:not([hidden])))"


def evaluate_loaded(page, script, arg=None):
    """page.evaluate, again once the page has loaded if a navigation under way (a reload, the
    page loaded again by a Back its history cache lacks) replaced the page meanwhile."""
    from playwright.sync_api import Error
    for _ in range(5):
        try:
            return page.evaluate(script, arg)
        except Error as e:
            if "Execution context was destroyed" not in str(e):
                raise
            page.wait_for_load_state()
    return page.evaluate(script, arg)


def retry_refused(page, scope="[data-lazy]"):
    """Press "Try again" on each placeholder (within `scope`) the busy server refused, as a
    reader would."""
    for button in page.locator(f"{scope} .lazy-retry").all():
        try:
            if button.is_visible():
                button.click()
        except Exception:          # swapped for its section meanwhile: look again
            pass


def load_every_section(page):
    """Load each section that is still a placeholder: the page computes a section only when it
    nears the screen, and most tests read sections far down. All are asked for at once, as
    printing does (static/lazy.js: Explainer.loadAll); one the busy server refused is asked
    again, or its Try again button pressed, as a reader would."""
    from playwright.sync_api import expect
    lazy = page.locator("[data-lazy]")
    for _ in range(30):
        if lazy.count() == 0:
            break
        evaluate_loaded(page, "() => window.Explainer && window.Explainer.loadAll &&"
                              " window.Explainer.loadAll()")
        expect(page.locator(UNANSWERED)).to_have_count(0, timeout=NAVIGATION_TIMEOUT_MS)
        retry_refused(page)
    expect(lazy).to_have_count(0)
    page.wait_for_load_state("networkidle")    # what the sections ask for once swapped in
    page.evaluate("() => window.scrollTo(0, 0)")


# The sections' placeholders named by id, each asked for as static/lazy.js's load() asks when
# one nears the screen (its `near` trigger, marked as loading so that the page does not ask
# twice); the ids still placeholders are returned. An id the page lacks is an error.
LOAD_NAMED = """(ids) => ids.filter(id => {
  const el = document.getElementById(id);
  if (!el) throw new Error("the page has no section #" + id);
  if (!el.hasAttribute("data-lazy")) return false;
  if (!el._loading) { el._loading = true; htmx.trigger(el, "near"); }
  return true;
})"""


def load_sections(page, *ids):
    """Load the sections named (ids such as "attention", "logits") that are still placeholders,
    and no other: a test that reads one section does not wait for the ~40 figures of all. One
    the busy server refused is asked again (its Try again pressed), as load_every_section does.
    Sections near the screen load by themselves as usual."""
    from playwright.sync_api import expect
    named = ", ".join(f"#{i}[data-lazy]" for i in ids)
    unanswered = ", ".join(f"#{i}{UNANSWERED}" for i in ids)
    for _ in range(30):
        if not evaluate_loaded(page, LOAD_NAMED, list(ids)):
            break
        expect(page.locator(unanswered)).to_have_count(0, timeout=NAVIGATION_TIMEOUT_MS)
        retry_refused(page, named)
    expect(page.locator(named)).to_have_count(0)


@pytest.fixture()
def page(page, request):
    """Playwright's page whose goto() and reload() also load every section (as printing does),
    or, for a test marked @pytest.mark.sections("attention", ...), only the sections it reads.
    page.goto_first_screen() and page.reload_first_screen() are the plain goto and reload: only
    what the first screen loads; page.load_every_section() loads the rest at any time (after a
    prompt change), and page.load_sections(*ids) the sections named."""
    page.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    marker = request.node.get_closest_marker("sections")
    if marker is not None:
        def after():
            load_sections(page, *marker.args)
    else:
        def after():
            load_every_section(page)

    def loading(navigate):
        def go(*args, **kw):
            response = navigate(*args, **kw)
            if response is None or response.status < 400:
                after()
            return response
        return go

    page.goto_first_screen = page.goto
    page.reload_first_screen = page.reload
    page.load_every_section = lambda: load_every_section(page)
    page.load_sections = lambda *ids: load_sections(page, *ids)
    page.goto = loading(page.goto)
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
