"""How the app is served to a classroom: the gate in front of every computing request, the
start-up (a page that answers at once, the default model first, the others warmed behind it),
and the server itself (waitress, in worker processes forked from a supervisor).

    run(app, host, port, workers, threads)   bind, warm, fork `workers` processes, serve

The order of things (forked, the default): the supervisor binds the socket and, while it warms
the default model (each section's `warm`, then the default page rendered once), a thread of its
own answers every connection at once (StartingPage: 503, Retry-After, the step it is at). Then
it forks the workers, which serve the default model. It loads and warms the other models after,
one by one; when one is ready it forks a new generation of workers, which inherit it, and sends
SIGUSR1 to the old generation, whose workers stop accepting, close their idle connections,
finish what they are answering (streams included) within RETIRE_SECONDS and exit. A request
for a model still warming gets a short page saying so, with its progress (Progress: a shared
anonymous map the supervisor writes and every worker reads), that reloads itself.

Why new generations rather than workers that load a model from disk themselves: every
measurement and warmed cache is made once, in the supervisor, and inherited copy-on-write, so
every worker shows the same measurement (one quantity, one value) and nothing is computed or
held twice; a worker that loaded a model itself would have to read every warmed cache back
(SmolLM2's quantized schemes alone are hundreds of MB, per worker) or warm it again. Measured on
this machine: forking a generation takes milliseconds and its workers' Pss is ~220 MB each
beside the supervisor's (the weights counted once), the same as the first generation's. The
disk (web/model_state/disk_cache.py) keeps what makes the next start quick: measurements, keyed by
the model
file's hash, the code version and the machine, and a GGUF model's float32 weights, which are
memory-mapped (read-only pages shared by every process). Workers end with the supervisor
however it ends, SIGKILL included: each watches the read end of a pipe whose write end only the
supervisor holds (EOF: it is gone). With --workers 1, or where there is no fork (Windows), one
process serves at once and warms its models in a background thread.

Why waitress and a small fork supervisor rather than gunicorn's pre-fork server (gthread worker):
the app relies on three things waitress does itself and gunicorn's gthread worker does not.
(1) `environ["waitress.client_disconnected"]`: a closed tab stops its stream before the next
model pass (web/serving/streaming.py); gunicorn only notices when a write fails. (2) Idle and slow
connections are closed after `channel_timeout` (30 s) by waitress's event loop, whatever the
client sent; the table of gunicorn's workers in benoitc/gunicorn#2652 gives gthread no time
limit for a client that connects and sends nothing (25.x hands such a client back to its poller
after 5 s so it stops holding a thread, gunicorn#3519), and that waiting is outside the gate.
(3) The page state may be a 64 KiB query string (web/core/limits.py MAX_QUERY_BYTES); gunicorn's
request line is capped at 8190 bytes unless the cap is switched off altogether.
"""
import html
import json
import mmap
import os
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse

from flask import g, render_template, request

from pipeline import load_model
from web.core import limits
from web.core.params import parse_query_string
from web.core.registry import sections
from web.model_state.disk_cache import DiskCache
from web.serving import streaming

# --- the gate: at most GATE_SLOTS requests compute at once per process --------------------------

# Endpoints that never compute (the class's follow polls and answers: web/classroom/views.py)
# pass outside the gate, so that 60 phones polling never queue behind a section's build.
UNGATED = set()


def gated(endpoint) -> bool:
    """Routes that compute pass through the gate; static files, 404s and UNGATED do not."""
    return (endpoint is not None and endpoint != "static" and not endpoint.startswith("assets.")
            and endpoint not in UNGATED)


def init_app(app):
    """Put `app`'s computing routes behind a limits.Gate sized by app.config (GATE_SLOTS,
    GATE_WAITING, GATE_WAIT_SECONDS): a request that finds no slot in time gets a 503 with
    Retry-After at once (a text line for htmx, the busy page otherwise).

    A big model's requests (web.model_state.loaded.LoadedModel.big: `model=` names it) pass a gate
    of their own with GATE_SLOTS_BIG slots: they take tens of times longer than the small
    model's, and a class reading the small model must not wait behind them (each worker
    computes at most that many of them at once, beside the small model's own slots). Two, not
    one: most of a big model's answers take milliseconds and a few take half a second (a
    section's first greedy run, a beam search); with one slot per worker the quick ones queued
    behind those, with two they pass them while the cores share the work (bench/load_test.py
    with 30 students on SmolLM2: docs/measured.md)."""
    gate = limits.Gate(app.config["GATE_SLOTS"], app.config["GATE_WAITING"],
                       app.config["GATE_WAIT_SECONDS"])
    app.extensions["explainer_gate"] = gate
    big_gate = limits.Gate(app.config["GATE_SLOTS_BIG"], app.config["GATE_WAITING"],
                           app.config["GATE_WAIT_SECONDS"])
    app.extensions["explainer_big_gate"] = big_gate

    def gate_for_request():
        # the raw query, as web.core.params reads it: request.args would raise on bytes that are not
        # UTF-8, which the page answers with a message, not a 500
        key = dict(parse_query_string(request.query_string)).get("model")
        lm = app.extensions["explainer"].get(key) if key else None
        return big_gate if lm is not None and lm.big else gate

    @app.before_request
    def enter_gate():
        if gated(request.endpoint):
            chosen = gate_for_request()
            chosen.acquire()                     # raises limits.Busy: a 503 at once
            g.gate_slot = chosen

    @app.teardown_request
    def leave_gate(exc=None):
        held = g.pop("gate_slot", None)
        if held is not None:
            held.release()

    @app.errorhandler(limits.Busy)
    def busy(e):
        # htmx requests get the message as text (static/errors.js shows it in the page's status
        # line), and so do the token streams' requests (Accept: text/event-stream:
        # static/stream.js shows it); a whole-page load gets a small page saying the same.
        if request.headers.get("HX-Request") == "true" or \
                "text/event-stream" in request.accept_mimetypes.values():
            body, mimetype = str(e), "text/plain"
        else:
            body, mimetype = render_template("busy.html", message=str(e),
                                             retry_after=limits.RETRY_AFTER_SECONDS), "text/html"
        response = app.response_class(body, status=503, mimetype=mimetype)
        response.headers["Retry-After"] = str(limits.RETRY_AFTER_SECONDS)
        response.headers["Cache-Control"] = "no-store"
        return response


# --- start-up progress: what every process can read of it --------------------------------------

class Progress:
    """Where the start-up is, model by model, in memory every process of the server shares: an
    anonymous shared map made before the first fork. The supervisor writes (web/serving/server.py
    `Startup`), the workers read it for the warming page, and the starting page reads it too.

    One record per model, in the picker's order: key, title, state ("waiting", "loading",
    "warming", "ready" or "failed"), the step it is at (`step`, `done` of `steps`) and the
    problem of a failed one. A sequence number, odd while a write is under way, lets a reader
    tell a torn read and read again."""

    SIZE = 256 * 1024
    _HEAD = struct.Struct("<QI")          # sequence number, length of the JSON that follows

    def __init__(self):
        self._map = mmap.mmap(-1, self.SIZE)  # MAP_SHARED | MAP_ANONYMOUS: forks see writes
        self._lock = threading.Lock()
        self._seq = 0
        self._models = {}
        self.started = time.time()

    def set(self, key: str, **fields):
        with self._lock:
            self._models.setdefault(key, {"key": key}).update(fields)
            body = json.dumps({"started": self.started, "models": list(self._models.values())}
                              ).encode()[:self.SIZE - self._HEAD.size]
            self._seq += 1                                   # odd: being written
            self._map[:self._HEAD.size] = self._HEAD.pack(self._seq, 0)
            self._map[self._HEAD.size:self._HEAD.size + len(body)] = body
            self._seq += 1
            self._map[:self._HEAD.size] = self._HEAD.pack(self._seq, len(body))

    def read(self) -> dict:
        """{key: record}, as the supervisor last wrote it ({} before its first write)."""
        for _ in range(100):
            seq, n = self._HEAD.unpack(self._map[:self._HEAD.size])
            if seq % 2 == 0:
                body = self._map[self._HEAD.size:self._HEAD.size + n]
                if self._HEAD.unpack(self._map[:self._HEAD.size])[0] == seq:
                    if not n:
                        return {}
                    return {m["key"]: m for m in json.loads(body)["models"]}
            time.sleep(0.001)
        return {}


def progress_line(record: dict) -> str:
    """One model's progress as the pages say it: "warming: quantization (step 7 of 11)"."""
    state = record.get("state", "waiting")
    if state == "failed":
        return f"it could not be loaded: {record.get('problem', 'see the server log')}"
    if state == "ready":
        return "ready"
    if state == "waiting":
        return (f"waiting for {record.get('after', 'the model before it')} to finish warming, "
                f"then step 1 of {record.get('steps', '?')}: loading its weights")
    return (f"{record.get('step', state)} (step {record.get('done', 0) + 1} of "
            f"{record.get('steps', '?')})")


# --- start-up: the models beside the default, loaded and warmed in the background ------------

class Startup:
    """The models an app offers that were not loaded with it (`pending`: key -> (path, title)),
    and the shared progress of every model. create_app makes it (app.extensions["startup"]);
    `load(key)` loads one (the function create_app gave: the draft model and the key as
    create_app would have made them) and offers it in the app's Explainer."""

    def __init__(self, load, progress=None):
        self.pending = {}
        self._load = load
        self.progress = progress or Progress()

    def add_pending(self, key: str, path: str, title: str, after: str):
        """Offer the model at `path` once loaded, under `key`; it waits for `after`."""
        self.pending[key] = (path, title)
        self.progress.set(key, title=title, state="waiting", after=after, done=0,
                          steps=len(warm_steps()) + 2)

    def load(self, app, key: str):
        disk = app.extensions.get("disk_cache")
        load = (lambda path: disk.load_model(path, load_model)) if disk else load_model
        lm = self._load(self.pending[key][0], key, load)
        explainer = app.extensions["explainer"]
        # a request iterating the old dict (the picker) is not disturbed by the new entry
        explainer.models = dict(explainer.models)
        explainer.add(lm)
        shared = app.extensions.get("shared_answers")
        if shared is not None:              # pages made before list one model fewer
            shared.clear()
        return lm


def warm_steps() -> list:
    return [s for s in sections() if s.warm is not None]


def warm(app, page: bool = False, progress=None, keys=None):
    """For every model the app offers (or those in `keys`), run every registered section's
    `warm(lm)` (prompt-independent caches and timings), one after another; with page=True also
    render each model's default page once (it fills the default prompt's caches and imports
    every module a section uses). A failure is only logged. progress(key, step, done, steps),
    when given, is told each step as it starts; it returns the seconds the model took."""
    say = progress or (lambda key, step, done, steps: None)
    models = app.extensions["explainer"].models
    took = 0.0
    with app.app_context():              # the results go to this app's caches
        for key in (keys if keys is not None else list(models)):
            lm = models[key]
            steps = warm_steps()
            total = len(steps) + (1 if page else 0)
            start = time.perf_counter()
            for i, s in enumerate(steps):
                say(lm.key, f"warming: {s.id}", i, total)
                try:
                    s.warm(lm)
                except Exception:
                    app.logger.exception("warming the %s section failed (%s)", s.id, lm.key)
            if page:
                say(lm.key, "warming: its first page", len(steps), total)
                status = app.test_client().get(f"/?model={lm.key}",
                                                environ_base={WARMING_UP: True}).status_code
                if status != 200:
                    app.logger.warning("warming: the first page of %s answered %s", lm.key,
                                       status)
            took = time.perf_counter() - start
    return took


def warm_and_tell(app, key: str, page: bool, load: bool = False) -> bool:
    """Load (load=True: a pending model) and warm one model, its progress in the app's Startup
    and on standard output; True when it is ready."""
    startup = app.extensions["startup"]
    progress = startup.progress
    start = time.perf_counter()
    n = len(warm_steps()) + (1 if page else 0) + (1 if load else 0)
    if load:
        progress.set(key, state="loading", step="loading its weights", done=0, steps=n)
        print(f"  loading {key}", flush=True)
        try:
            startup.load(app, key)
        except Exception as e:
            app.logger.exception("loading %s failed", key)
            progress.set(key, state="failed", problem=" ".join(str(e).split())[:300])
            return False

    def tell(k, step, done, steps):
        progress.set(k, state="warming", step=step, done=done + (1 if load else 0), steps=n)
        print(f"  {k}: {step} ({done + (1 if load else 0) + 1} of {n})", flush=True)
    warm(app, page=page, progress=tell, keys=[key])
    took = time.perf_counter() - start
    progress.set(key, state="ready", step="ready", done=n, steps=n, seconds=round(took, 1))
    print(f"  {key} ready in {took:.1f} s", flush=True)
    return True


def warm_in_background(app):
    """warm() in a background thread, so the first page does not wait for it (one process)."""
    threading.Thread(target=warm, args=(app,), name="warm-sections", daemon=True).start()


def init_startup(app):
    """A request for a model that is still loading or warming (`model=` names one the app's
    Startup has pending) is answered at once: a short page saying so, with its progress, that
    reloads itself (a meta refresh: the CSP allows no inline script) until the model is ready;
    an htmx request gets the same as one line of text (static/errors.js shows it and tries again
    after Retry-After). Registered before the gate (serving.init_app), so it never waits for a
    slot."""

    @app.before_request
    def model_still_warming():
        startup = app.extensions.get("startup")
        if (startup is None or not startup.pending or request.endpoint == "static"
                or request.environ.get(WARMING_UP)):
            return None
        key = dict(parse_query_string(request.query_string)).get("model")
        if key is None or key not in startup.pending:
            return None
        record = startup.progress.read().get(key, {"key": key, "state": "waiting"})
        if record.get("state") == "ready" and key in app.extensions["explainer"].models:
            return None
        return warming_response(app, key, startup.pending[key][1], record)


# set in the environ of the warm-up's own request for a model's first page (warm(page=True))
WARMING_UP = "explainer.warming_up"


WARMING_REFRESH_SECONDS = 2


def warming_response(app, key, title, record):
    state = record.get("state", "waiting")
    if state == "ready":
        # ready in the newer workers, not in this retiring one: the reload (at once) reaches
        # them once this one retires
        message = f"{title} is ready: this page reloads now."
    elif state == "failed":
        message = f"{title} could not be loaded: {record.get('problem', 'see the server log')}"
    else:
        message = (f"{title} is still warming up (the server measures each model once when it "
                   f"starts): {progress_line(record)}.")
    if request.headers.get("HX-Request") == "true":
        body, mimetype = message, "text/plain"
    else:
        without = [(n, v) for n, v in parse_query_string(request.query_string) if n != "model"]
        body = render_template(
            "warming.html", title=title, message=message, record=record, state=state,
            refresh=(0 if state == "ready" else None if state == "failed"
                     else WARMING_REFRESH_SECONDS),
            default_url="/" + ("?" + urllib.parse.urlencode(without, quote_via=urllib.parse.quote)
                               if without else ""),
            default_title=app.extensions["explainer"].default_model.card.title)
        mimetype = "text/html"
    response = app.response_class(body, status=503, mimetype=mimetype)
    if state != "failed":
        response.headers["Retry-After"] = str(0 if state == "ready" else WARMING_REFRESH_SECONDS)
    response.headers["Cache-Control"] = "no-store"
    # ready: the reload reaches the newer workers once this retiring one has closed its idle
    # connections (serve_worker's retire). Not a Connection header: a WSGI application may not
    # set a hop-by-hop header (waitress refuses the answer, and the client got a 500).
    return response


# --- the starting page: every connection answered before the first worker serves ------------

STARTING_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta http-equiv="refresh" content="{refresh}">
  <title>Starting: the page opens in a moment</title>
  <link rel="stylesheet" href="/static/style.css">
</head>
<body>
<main>
  <h1>The server is starting</h1>
  <p role="status">{message}</p>
  {bar}
  <p>This page reloads itself every {refresh} seconds and opens the explainer when it is
  ready.</p>
</main>
</body>
</html>
"""


class StartingPage:
    """Answers every connection on the listening socket while the default model loads and
    warms, before any worker serves: 503 with Retry-After and a page (or, for htmx, a line)
    saying where the start-up is. A thread accepts; each connection is answered by a short-lived
    thread of its own (a slow client holds no other). stop() returns once none runs, so that
    the supervisor forks with no thread of its own running."""

    READ_SECONDS = 1.0

    def __init__(self, sock, progress, default: str):
        self.sock, self.progress, self.default = sock, progress, default
        self._stop = threading.Event()
        self._handlers = []
        self._thread = threading.Thread(target=self._accept, name="starting-page", daemon=True)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            with open(os.path.join(here, "static", "style.css"), "rb") as f:
                self._style = f.read()
        except OSError:
            self._style = b""

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        for t in self._handlers:
            t.join()
        self._handlers.clear()

    def _accept(self):
        import selectors
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not sel.select(0.1):
                    continue
                try:
                    conn, _ = self.sock.accept()
                except (BlockingIOError, InterruptedError, ConnectionError):
                    continue
                except OSError:
                    return
                self._handlers = [t for t in self._handlers if t.is_alive()]
                t = threading.Thread(target=self._answer, args=(conn,), daemon=True)
                self._handlers.append(t)
                t.start()

    def message(self) -> tuple:
        first = self.progress.read().get(self.default, {"key": self.default, "state": "loading"})
        title = first.get("title", first["key"])
        return (f"Loading and measuring {title} before the first page: {progress_line(first)}.",
                first)

    def _answer(self, conn):
        from web.core.security import SECURITY_HEADERS
        try:
            conn.settimeout(self.READ_SECONDS)
            data = b""
            try:
                while b"\r\n\r\n" not in data and len(data) < 256 * 1024:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except (socket.timeout, OSError):
                pass
            head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1] if len(head[0].split(" ")) > 2 else "/"
            htmx = any(h.lower().replace(" ", "") == "hx-request:true" for h in head[1:])
            if path.split("?")[0] == "/static/style.css" and self._style:
                status, ctype, body = "200 OK", "text/css; charset=utf-8", self._style
                extra = {"Cache-Control": "no-store"}
            else:
                message, record = self.message()
                status = "503 Service Unavailable"
                extra = {"Retry-After": str(WARMING_REFRESH_SECONDS), "Cache-Control": "no-store"}
                if htmx:
                    ctype, body = "text/plain; charset=utf-8", message.encode()
                else:
                    bar = ""
                    if record.get("steps"):
                        bar = (f'<p><progress value="{record.get("done", 0)}" '
                               f'max="{record["steps"]}"></progress></p>')
                    ctype = "text/html; charset=utf-8"
                    body = STARTING_PAGE.format(refresh=WARMING_REFRESH_SECONDS,
                                                message=html.escape(message), bar=bar).encode()
            headers = {"Content-Type": ctype, "Content-Length": str(len(body)),
                       "Connection": "close", **extra, **SECURITY_HEADERS}
            conn.sendall(f"HTTP/1.1 {status}\r\n".encode() + "".join(
                f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n" + body)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            conn.close()


# --- the server ----------------------------------------------------------------------------

def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the workers start so that they all accept from it.
    socket.create_server sets SO_REUSEADDR (on POSIX): a new server binds the port at once even
    while connections of the old one linger in TIME_WAIT."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=1024)


def server_settings(app) -> dict:
    """waitress's settings (web/core/limits.py). Waitress removes X-Forwarded-* headers before the
    app sees them unless told otherwise: behind trusted proxies (app.py --proxy N: PROXY_HOPS)
    it keeps them for the app's ProxyFix, which takes only the entries those N proxies added."""
    return dict(limits.SERVER_SETTINGS,
                clear_untrusted_proxy_headers=not app.config.get("PROXY_HOPS"))


def serve(app, sock, threads: int):
    """waitress on `sock` in this process, until it is stopped."""
    from waitress import serve as waitress_serve
    waitress_serve(app, sockets=[sock], threads=threads, **server_settings(app),
                   **streaming.SERVER_OPTIONS)    # notices a closed stream at once


# A retired worker (an older generation, once a newer one serves every model) stops accepting,
# closes its idle keep-alive connections, lets its requests in flight finish (a stream too) and
# exits; after RETIRE_SECONDS it exits whatever is still running. A connection accepted less
# than IDLE_GRACE_SECONDS before, that has not sent a byte yet (its request not read), is left to
# send it and is answered, not closed unanswered (a browser asks again on a reused connection
# that closes, not always on a new one); a kept-alive one is closed as soon as it is idle, however
# often it asks (a class member's page polls every 500 ms).
RETIRE_SECONDS = 30
IDLE_GRACE_SECONDS = 1.0


def bytes_waiting(sock) -> bool:
    """Whether a request's bytes have reached the socket and are not read yet: closing it then
    would reset the connection under a request already sent."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:                     # nothing waiting (BlockingIOError), or closed
        return False


def serve_worker(app, sock, threads: int, supervisor_alive: int):
    """A worker's life: waitress on `sock` until SIGTERM (at once), SIGUSR1 (retire gracefully)
    or the end of the supervisor (read end of a pipe whose write end only the supervisor holds:
    EOF means it is gone, however it died, kill -9 included)."""
    from waitress import create_server

    def watch_supervisor():
        while True:
            try:
                if not os.read(supervisor_alive, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os._exit(0)
    threading.Thread(target=watch_supervisor, name="supervisor-watch", daemon=True).start()
    # web/model_state/found.py: map chosen models
    for started in app.extensions.get("worker_start", ()):
        started()
    server = create_server(app, sockets=[sock], threads=threads, **server_settings(app),
                           **streaming.SERVER_OPTIONS)

    def retire(signum=None, frame=None):
        server.accepting = False            # its readable() is False: no new connection here
        deadline = time.monotonic() + RETIRE_SECONDS

        def close_idle():                    # in waitress's loop thread (the trigger runs it)
            young = time.time() - IDLE_GRACE_SECONDS            # waitress's clock
            for channel in list(server.active_channels.values()):
                unread = (channel.last_activity == channel.creation_time
                          and channel.creation_time > young)
                if (not channel.requests and channel.request is None
                        and not channel.total_outbufs_len and not unread
                        and not bytes_waiting(channel.socket)):
                    channel.will_close = True

        def until_idle():
            while time.monotonic() < deadline:
                server.trigger.pull_trigger(close_idle)
                if not server.active_channels:
                    break
                time.sleep(0.1)
            os._exit(0)
        threading.Thread(target=until_idle, name="retiring", daemon=True).start()
    signal.signal(signal.SIGUSR1, retire)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    server.run()


class Workers:
    """The supervisor's worker processes, forked in generations from the one listening socket.
    fork_generation() forks `n` new workers (they inherit every model and cache this process
    holds now) and retires the previous generation (SIGUSR1: serve_worker). A thread reaps
    them; one of the current generation that ends on its own stops the server (exit status 1
    unless it was stopped)."""

    def __init__(self, app, sock, n: int, threads: int):
        self.app, self.sock, self.n, self.threads = app, sock, n, threads
        self.current, self.retiring = [], set()
        self.generation = 0
        self._alive_r, self._alive_w = os.pipe()
        self._lock = threading.Lock()
        self.ended = threading.Event()
        self.first_status = None
        self._reaper = None

    def fork_generation(self):
        # SIGUSR1 stays blocked in a new worker until it has set its handler (serve_worker):
        # a retire signal that came sooner would otherwise end it at once
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        try:
            new = [self._fork() for _ in range(self.n)]
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        with self._lock:
            old, self.current = self.current, new
            self.retiring.update(old)
            self.generation += 1
        for pid in old:
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name="reaper", daemon=True)
            self._reaper.start()
        return new

    def _fork(self) -> int:
        pid = os.fork()
        if pid == 0:                                  # a worker
            code = 0
            try:
                os.close(self._alive_w)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                serve_worker(self.app, self.sock, self.threads, self._alive_r)
            except KeyboardInterrupt:
                pass
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        return pid

    def pids(self) -> list:
        with self._lock:
            return [*self.current, *self.retiring]

    def _reap(self):
        # each worker by its pid (never os.wait(): that would also take the status of a child
        # process some other part of the program started and waits for)
        while True:
            for pid in self.pids():
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done, status = pid, 0
                if not done:
                    continue
                with self._lock:
                    if pid in self.retiring:
                        self.retiring.discard(pid)
                        continue
                    self.current.remove(pid)
                    if self.first_status is None:
                        self.first_status = os.waitstatus_to_exitcode(status)
                if not self.ended.is_set():       # a worker ended on its own: stop the server
                    self.stop()
                    os.kill(os.getpid(), signal.SIGTERM)
            if self.ended.is_set() and not self.pids():
                return
            time.sleep(0.05)

    def stop(self):
        """SIGTERM to every worker; `ended` is set."""
        self.ended.set()
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait_all(self, seconds: float = 30):
        """Until every worker has ended (bounded)."""
        deadline = time.monotonic() + seconds
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)

    def exit_status(self) -> int:
        first = self.first_status
        return 0 if first in (None, 0, -signal.SIGTERM, -signal.SIGINT) else 1


class Stopped(BaseException):
    """SIGTERM or Ctrl-C reached the supervisor."""


# glibc's malloc, left to itself, keeps the memory of freed large arrays: it raises its mmap
# threshold after each big free (up to 32 MiB), so later activations come from heaps it does not
# give back, and each of waitress's threads may get a heap of its own. A big model's activations
# (tens of MB per prompt) then pile up in every worker. Fixed thresholds return them to the
# system when freed; two heaps per process are plenty for 2 computing requests.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
MALLOC_SETTINGS = ((M_MMAP_THRESHOLD, 256 * 1024), (M_TRIM_THRESHOLD, 1024 * 1024),
                   (M_ARENA_MAX, 2))


def return_freed_memory():
    """Apply MALLOC_SETTINGS (glibc's mallopt; elsewhere nothing): True when applied."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return all(libc.mallopt(option, value) == 1 for option, value in MALLOC_SETTINGS)
    except (OSError, AttributeError):
        return False


def listen(host: str, port: int, name: str = "app.py"):
    """The listening socket, or None after printing why not (the caller exits with status 2)."""
    try:
        return listening_socket(host, port)
    except OSError as e:
        print(f"{name}: cannot listen on {host}:{port}: {e.strerror}", file=sys.stderr)
        return None


def run(app, host: str, port: int, workers: int, threads: int, name: str = "app.py",
        sock=None) -> int:
    """Serve `app` on host:port (or on `sock`, already bound) until stopped; the exit status
    (2: the address is unusable). See the module's docstring for the order of things."""
    return_freed_memory()
    forked = workers > 1 and hasattr(os, "fork")
    sock = sock or listen(host, port, name)
    if sock is None:
        return 2
    startup = app.extensions.get("startup") or Startup(None)
    app.extensions["startup"] = startup
    # measurements and a GGUF model's float32 weights, kept between starts
    # (web/model_state/disk_cache.py)
    app.extensions.setdefault("disk_cache", DiskCache(app.config["CLASSROOM_DATA_DIR"]))
    app.extensions["disk_cache"].prune_older_versions()    # what older code kept, never read
    # a GGUF file found on the machine is warmed too once chosen and loaded (in the worker that
    # loads it: web/model_state/found.py FoundModels.warm, this module's warm)
    app.config.setdefault("WARM_FOUND_MODELS", True)
    default = app.extensions["explainer"].default
    startup.progress.set(default, title=app.extensions["explainer"].default_model.card.title,
                         state="warming", step="starting", done=0, steps=1)
    serving = (f"Serving the explainer on http://{host}:{port}/ ({workers if forked else 1} "
               f"worker(s) x {threads} threads; Ctrl-C stops it)")
    if not forked:
        def in_background():
            warm_and_tell(app, default, page=False)
            for key in list(startup.pending):
                warm_and_tell(app, key, page=False, load=True)
        threading.Thread(target=in_background, name="warm-models", daemon=True).start()
        print(serving, flush=True)
        serve(app, sock, threads)
        return 0

    serving_pool = []

    def stopped(signum, frame):
        # Once workers serve, the models still warming run code this handler interrupts at any
        # point, and an exception raised there may never reach run(): the warm-up went on
        # after SIGTERM. So the workers are stopped here and the supervisor leaves at once.
        if serving_pool:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            serving_pool[0].stop()
            serving_pool[0].wait_all()
            os._exit(0)
        raise Stopped()
    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    starting = StartingPage(sock, startup.progress, default).start()
    pool = None
    try:
        print(f"Measuring and filling the caches of {default} before serving on "
              f"http://{host}:{port}/ (a page saying so answers meanwhile) ...", flush=True)
        warm_and_tell(app, default, page=True)
        starting.stop()
        pool = Workers(app, sock, workers, threads)
        pool.fork_generation()
        serving_pool.append(pool)
        print(serving, flush=True)
        for key in list(startup.pending):
            if pool.ended.is_set():
                break
            if warm_and_tell(app, key, page=True, load=True) and not pool.ended.is_set():
                pool.fork_generation()   # they serve it too; the older ones retire
                print(f"  workers of generation {pool.generation} serve "
                      f"{', '.join(app.extensions['explainer'].models)}", flush=True)
        print("Every model is warmed (bench/bench_startup.py waits for this line)", flush=True)
        pool.ended.wait()
    except Stopped:
        pass
    finally:
        starting.stop()
        if pool is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            pool.stop()
            pool.wait_all()
    return pool.exit_status() if pool is not None else 0
