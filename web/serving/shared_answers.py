"""One answer for many identical requests: a class that loads the same page at once computes it
once per worker process, and the others are served what it made, outside the compute gate.

Sixty phones that join a class in the same second all open the teacher's page (the same address)
and then ask for the same sections as they near the screen. Each request is a function of what
it sends: the route, the query string, the htmx headers the views read, and what is withheld from
a class's member (web/classroom/withheld.py); the model's measurements are made once per
process. So the first request of a kind computes (through the gate, web/serving/server.py); the ones
that arrive while it runs wait for it without taking a gate slot, and the ones after it get its
bytes from memory (a few dozen of the latest answers, at most MAX_BYTES). Without this, 60
identical page loads queued behind the gate's 2 slots and 16 places, and 22 phones got the busy
page.

Only the page's own GET routes whose answer depends on nothing else are shared (SHARED
endpoints); only a 200 is kept (a refusal, a 503 or an answer marked no-store is not an answer
to share), and a model that joins the app's models clears them (web/serving/server.py Startup.load:
a page made before lists one model fewer). A request that
waits gives up after WAIT_SECONDS and computes itself. The answers are kept before compression
and the security headers, which are applied to each response as usual.
"""
import threading
from collections import OrderedDict

from flask import current_app, request

from web.core.views import VARY

# The routes whose answer is a function of the request's query, the headers in HEADERS and what
# is withheld (web/core/views.py: the page, a section, the overview).
SHARED = {"explainer.page", "explainer.section", "explainer.overview"}
# The request headers web/core/views.py reads: those its answers Vary on, and HX-Trigger (a
# section loading itself writes no address).
HEADERS = VARY + ("HX-Trigger",)
MAX_BYTES = 48 * 1024 * 1024
MAX_ANSWERS = 256
WAIT_SECONDS = 10.0
_ENV = "explainer.shared_answer_key"


class SharedAnswers:
    """The answers of one process: the latest ones (LRU by bytes) and the ones being made."""

    def __init__(self, max_bytes: int = MAX_BYTES, wait: float = WAIT_SECONDS):
        self.max_bytes = max_bytes
        self.wait = wait
        self._done = OrderedDict()          # key -> (status, headers, body)
        self._bytes = 0
        self._running = {}                  # key -> threading.Event
        self._lock = threading.Lock()
        self.computed = 0                   # answers made (tests and benchmarks read them)
        self.shared = 0                     # answers given from another request's work

    def clear(self):
        """Forget every answer (a model became ready: its pages are no longer the warming
        page)."""
        with self._lock:
            self._done.clear()
            self._bytes = 0

    def _get(self, key):
        with self._lock:
            hit = self._done.get(key)
            if hit is not None:
                self._done.move_to_end(key)
            return hit

    def _put(self, key, answer):
        size = len(answer[2])
        if size > self.max_bytes // 4:
            return
        with self._lock:
            old = self._done.pop(key, None)
            if old is not None:
                self._bytes -= len(old[2])
            self._done[key] = answer
            self._bytes += size
            while self._bytes > self.max_bytes or len(self._done) > MAX_ANSWERS:
                _, dropped = self._done.popitem(last=False)
                self._bytes -= len(dropped[2])

    def answer(self, key):
        """(status, headers, body) of an identical request, waiting for one being made; None
        when this request is to compute (it is then the one others wait for)."""
        hit = self._get(key)
        if hit is None:
            with self._lock:
                running = self._running.get(key)
                if running is None:
                    self._running[key] = threading.Event()
                    return None
            running.wait(self.wait)
            hit = self._get(key)
        if hit is not None:
            with self._lock:
                self.shared += 1
        return hit

    def made(self, key, response):
        """The computing request's response: kept when it is a whole 200."""
        if response.status_code == 200 and not response.is_streamed and \
                not response.direct_passthrough and \
                "no-store" not in response.headers.get("Cache-Control", ""):
            headers = [(k, v) for k, v in response.headers.items()
                       if k.lower() not in ("content-length", "set-cookie")]
            self._put(key, (response.status_code, headers, response.get_data()))
        with self._lock:
            self.computed += 1

    def finished(self, key):
        """The computing request is over, answered or not: whoever waits goes on."""
        with self._lock:
            running = self._running.pop(key, None)
        if running is not None:
            running.set()


def request_key():
    """What makes this request's answer, or None when it is not one to share."""
    if request.method != "GET" or request.endpoint not in SHARED:
        return None
    from web.classroom.withheld import withheld
    from web.core import registry
    return (request.endpoint, request.path, request.query_string,
            tuple(request.headers.get(h, "") for h in HEADERS), withheld().key(),
            tuple(map(id, registry.sections())))   # the sections the page is made of


def init_app(app):
    """Serve identical requests from one computation. Its check runs before the compute gate
    (inserted first among before_request functions) and keeps the view's own response (its
    after_request runs first, before compression and the security headers)."""
    shared = SharedAnswers(app.config.get("SHARED_ANSWERS_BYTES", MAX_BYTES))
    app.extensions["shared_answers"] = shared

    def serve_shared():
        key = request_key()
        if key is None:
            return None
        hit = shared.answer(key)
        if hit is None:
            request.environ[_ENV] = key           # this request computes; others wait for it
            return None
        status, headers, body = hit
        return current_app.response_class(body, status=status, headers=headers)

    def keep_answer(response):
        key = request.environ.get(_ENV)
        if key is not None:
            shared.made(key, response)
        return response

    def release(exc=None):
        key = request.environ.pop(_ENV, None)
        if key is not None:
            shared.finished(key)

    app.before_request_funcs.setdefault(None, []).insert(0, serve_shared)
    app.after_request(keep_answer)
    app.teardown_request(release)
    return shared
