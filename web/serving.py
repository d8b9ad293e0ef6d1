"""How the app is served to a classroom: the gate in front of every computing request, warming
the caches once, and the server itself (waitress, in worker processes forked from the one that
loaded the model).

    run(app, host, port, workers, threads)   bind, warm, fork `workers` processes, serve

The model is loaded, the socket bound and every prompt-independent cache filled (each section's
`warm`, then the default page rendered once) in the parent process, BEFORE the workers are
forked: the workers share all of it copy-on-write, so a timing measured while warming is the
same number in every worker, and no worker starts cold. Where there is no fork (Windows) or
with --workers 1, one process serves and warms in a background thread.

Why waitress and a small fork supervisor rather than gunicorn's pre-fork server (gthread worker):
the app relies on three things waitress does itself and gunicorn's gthread worker does not.
(1) `environ["waitress.client_disconnected"]`: a closed tab stops its stream before the next
model pass (web/streaming.py); gunicorn only notices when a write fails. (2) Idle and slow
connections are closed after `channel_timeout` (30 s) by waitress's event loop, whatever the
client sent; the table of gunicorn's workers in benoitc/gunicorn#2652 gives gthread no time
limit for a client that connects and sends nothing (25.x hands such a client back to its poller
after 5 s so it stops holding a thread, gunicorn#3519), and that waiting is outside the gate.
(3) The page state may be a 64 KiB query string (web/limits.py MAX_QUERY_BYTES); gunicorn's
request line is capped at 8190 bytes unless the cap is switched off altogether.
"""
import os
import signal
import socket
import sys
import threading
import time

from flask import g, render_template, request

from web import limits, streaming
from web.params import parse_query_string
from web.registry import sections


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

    A big model's requests (web.loaded.LoadedModel.big: `model=` names it) pass a gate of their
    own with GATE_SLOTS_BIG slots: they take tens of times longer than the small model's, and
    a class reading the small model must not wait behind them (each worker computes at most
    that many of them at once, beside the small model's own slots)."""
    gate = limits.Gate(app.config["GATE_SLOTS"], app.config["GATE_WAITING"],
                       app.config["GATE_WAIT_SECONDS"])
    app.extensions["explainer_gate"] = gate
    big_gate = limits.Gate(app.config["GATE_SLOTS_BIG"], app.config["GATE_WAITING"],
                           app.config["GATE_WAIT_SECONDS"])
    app.extensions["explainer_big_gate"] = big_gate

    def gate_for_request():
        # the raw query, as web.params reads it: request.args would raise on bytes that are not
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
        # htmx requests get the message as text (app.js shows it in the page's status line);
        # a whole-page load gets a small page saying the same.
        if request.headers.get("HX-Request") == "true":
            body, mimetype = str(e), "text/plain"
        else:
            body, mimetype = render_template("busy.html", message=str(e)), "text/html"
        response = app.response_class(body, status=503, mimetype=mimetype)
        response.headers["Retry-After"] = str(limits.RETRY_AFTER_SECONDS)
        response.headers["Cache-Control"] = "no-store"
        return response


# --- warming: prompt-independent caches and measurements, made once ----------------------------

def warm(app, page: bool = False, progress=None):
    """For every model the app offers, run every registered section's `warm(lm)`
    (prompt-independent caches and timings), one after another; with page=True also render each
    model's default page once (it fills the default prompt's caches and imports every module a
    section uses). A failure is only logged. run() calls it in the parent process, before the
    workers are forked. progress(text), when given, is told each step as it starts and ends."""
    say = progress or (lambda text: None)
    models = app.extensions["explainer"].models
    with app.app_context():              # the results go to this app's caches
        for n, lm in enumerate(models.values(), start=1):
            steps = [s for s in sections() if s.warm is not None]
            start = time.perf_counter()
            for i, s in enumerate(steps, start=1):
                say(f"warming {lm.key} ({n} of {len(models)}): {s.id} ({i} of {len(steps)})")
                try:
                    s.warm(lm)
                except Exception:
                    app.logger.exception("warming the %s section failed (%s)", s.id, lm.key)
            if page:
                say(f"warming {lm.key}: its first page")
                status = app.test_client().get(f"/?model={lm.key}").status_code
                if status != 200:
                    app.logger.warning("warming: the first page of %s answered %s", lm.key,
                                       status)
            say(f"warmed {lm.key} in {time.perf_counter() - start:.1f} s")


def warm_in_background(app):
    """warm() in a background thread, so the first page does not wait for it (one process)."""
    threading.Thread(target=warm, args=(app,), name="warm-sections", daemon=True).start()


# --- the server ----------------------------------------------------------------------------

def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the workers start so that they all accept from it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=1024)


def serve(app, sock, threads: int):
    """waitress on `sock` in this process, until it is stopped."""
    from waitress import serve as waitress_serve
    waitress_serve(app, sockets=[sock], threads=threads, **limits.SERVER_SETTINGS,
                   **streaming.SERVER_OPTIONS)    # notices a closed stream at once


def serve_workers(app, sock, workers: int, threads: int) -> int:
    """Fork `workers` processes that serve `app` from the one listening socket (the kernel hands
    each new connection to one of them). Python runs one thread at a time per process, so one
    process uses one core however many threads it has: two workers use both cores of the
    classroom server. Each worker has its own gate and stream slots. The first worker to stop
    (or SIGTERM / Ctrl-C to this process) stops them all; the exit status is 0 when they were
    stopped, 1 when one failed."""
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:                                  # a worker
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                serve(app, sock, threads)
            except KeyboardInterrupt:
                pass
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)

    def stop(signum=None, frame=None):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    first, left = None, set(pids)
    while left:
        pid, status = os.wait()
        left.discard(pid)
        if first is None:
            first = os.waitstatus_to_exitcode(status)
            stop()
    return 0 if first in (0, -signal.SIGTERM, -signal.SIGINT) else 1


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


def run(app, host: str, port: int, workers: int, threads: int, name: str = "app.py") -> int:
    """Serve `app` on host:port until stopped; the exit status (2: the address is unusable).
    workers > 1 (where the system has fork): warm in this process, then fork the workers;
    otherwise serve from this process (create_app has started its background warm-up)."""
    return_freed_memory()
    forked = workers > 1 and hasattr(os, "fork")
    try:
        sock = listening_socket(host, port)
    except OSError as e:
        print(f"{name}: cannot listen on {host}:{port}: {e.strerror}", file=sys.stderr)
        return 2
    serving = (f"Serving the explainer on http://{host}:{port}/ ({workers if forked else 1} "
               f"worker(s) x {threads} threads; Ctrl-C stops it)")
    if not forked:
        print(serving, flush=True)
        serve(app, sock, threads)
        return 0
    # Connections that arrive while this runs wait in the socket's backlog; the address is
    # printed once the workers answer.
    print(f"Measuring and filling the caches of {', '.join(app.extensions['explainer'].models)} "
          f"before serving on http://{host}:{port}/ ...", flush=True)
    warm(app, page=True, progress=lambda text: print("  " + text, flush=True))
    print(serving, flush=True)
    return serve_workers(app, sock, workers, threads)
