"""The explainer's web app: `python app.py [--host H] [--port P] [--model DIR]`.

Serves the page with waitress, a production WSGI server, set up for a classroom on 2 cores
(web/limits.py: two worker processes forked after the model is loaded, threads, connection
limit, idle timeout, and the gate that answers 503 at once when too many requests compute).
The model is loaded once, before the workers are forked, and shared by every request: the
default model `models/austen`, or the directory given by --model or the
LLM_EXPLAINER_MODEL environment variable (a Hugging Face layout: config.json,
model.safetensors, tokenizer files). The draft model of the speculative-decoding section is
loaded once too: --draft-model / LLM_EXPLAINER_DRAFT_MODEL, else `<model dir>-draft` next to
the model when it exists (models/austen-draft for the default model).
"""
import os
import threading

# One BLAS thread per process, set before NumPy is first imported (it reads these once): the
# models are small and the server computes several requests at once on 2 cores, where
# OpenBLAS's own threads only fight each other. The Makefile sets the same; an explicit value
# in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402

from flask import Flask, g, render_template, request  # noqa: E402

from web import assets, limits, shading, streaming, views  # noqa: E402
from web.loaded import LoadedModel  # noqa: E402
from web.registry import SECTIONS  # noqa: E402

# Content-Security-Policy: scripts only from this server (no inline script, no eval), nothing
# from any other origin, no plugins, no framing. The one loosening is for Plotly:
#   style-src 'unsafe-inline'  plotly.js (4.x) writes its CSS rules into a <style> element it
#                              creates at run time (lib/dom.js addStyleRule: the modebar, hover
#                              and drag cursors) and sets style="" attributes on the SVG it
#                              draws; without it the figures draw unstyled hover labels and
#                              Chromium reports a violation per figure. Inline *styles* cannot
#                              run code; inline scripts stay forbidden.
#   img-src data:              plotly.js draws a heatmap into a <canvas> and shows it as an SVG
#                              <image> whose href is canvas.toDataURL() (traces/heatmap/plot.js);
#                              without data: every heatmap is blank. An image cannot run code
#                              (an SVG loaded as an image runs no script). No blob:, no origins.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",                   # frame-ancestors for old browsers
    "Referrer-Policy": "no-referrer",            # the URL holds the prompt: never send it on
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
}


def gated(endpoint) -> bool:
    """Routes that compute pass through the gate; static files and 404s do not."""
    return endpoint is not None and endpoint != "static" and not endpoint.startswith("assets.")


def load(path):
    from pipeline import load_model
    return load_model(path)


def load_draft(model, config):
    """(draft model or None, why there is none): DRAFT_MODEL (loaded), DRAFT_MODEL_PATH, or the
    sibling directory `<model dir>-draft`; a draft with another tokenizer is refused."""
    from pipeline import ModelLoadError
    from pipeline.speculative import DraftMismatch, check_draft
    draft, path = config.get("DRAFT_MODEL"), config.get("DRAFT_MODEL_PATH")
    if draft is None and not path:
        sibling = os.path.normpath(model.path or "") + "-draft"
        if not model.path or not os.path.isdir(sibling):
            return None, (f"no draft model: give one with --draft-model (looked for {sibling})"
                          if model.path else "no draft model given")
        path = sibling
    if draft is None:
        try:
            draft = load(path)
        except ModelLoadError as e:
            return None, f"the draft model did not load: {e}"
    try:
        check_draft(model, draft)
    except DraftMismatch as e:
        return None, f"the draft model cannot serve this model: {e}"
    return draft, ""


def warm(app, lm, page: bool = False):
    """Run each section's `warm` (prompt-independent caches) one after another; with page=True
    also render the default page once (it fills the default prompt's caches and loads every
    module a section uses). A failure is only logged."""
    for s in SECTIONS:
        if s.warm is not None:
            try:
                s.warm(lm)
            except Exception:
                app.logger.exception("warming the %s section failed", s.id)
    if page:
        status = app.test_client().get("/").status_code
        if status != 200:
            app.logger.warning("warming: the default page answered %s", status)


def warm_sections(app, lm):
    """warm() in a background thread, so the first page does not wait for it."""
    threading.Thread(target=warm, args=(app, lm), name="warm-sections", daemon=True).start()


def create_app(test_config=None):
    """The Flask app. test_config may hold MODEL (an already loaded model: tests load it once),
    MODEL_PATH, DRAFT_MODEL (a loaded draft model) or DRAFT_MODEL_PATH, PROBE_ENCODINGS
    (False skips looking for other tiktoken encodings) and WARM_CACHES (False: no background
    warm-up of the sections' caches)."""
    app = Flask(__name__)
    app.config.from_mapping(MODEL_PATH=os.environ.get("LLM_EXPLAINER_MODEL") or None,
                            DRAFT_MODEL_PATH=os.environ.get("LLM_EXPLAINER_DRAFT_MODEL") or None,
                            PROBE_ENCODINGS=True,
                            MAX_CONTENT_LENGTH=limits.MAX_CONTENT_LENGTH,
                            GATE_SLOTS=limits.GATE_SLOTS, GATE_WAITING=limits.GATE_WAITING,
                            GATE_WAIT_SECONDS=limits.GATE_WAIT_SECONDS)
    if test_config:
        app.config.from_mapping(test_config)
    model = app.config.get("MODEL") or load(app.config["MODEL_PATH"])
    draft, draft_problem = load_draft(model, app.config)
    if draft_problem and (app.config.get("DRAFT_MODEL") or app.config.get("DRAFT_MODEL_PATH")):
        app.logger.warning("speculative decoding is off: %s", draft_problem)
    app.extensions["explainer_model"] = LoadedModel.wrap(
        model, probe_encodings=app.config["PROBE_ENCODINGS"], draft=draft,
        draft_problem=draft_problem)
    if app.config.get("WARM_CACHES", True):
        warm_sections(app, app.extensions["explainer_model"])
    app.register_blueprint(views.bp)
    app.register_blueprint(assets.bp)
    assets.init_app(app)
    app.register_blueprint(streaming.bp)

    @app.context_processor
    def page_globals():
        return dict(all_sections=SECTIONS, chip_style=shading.chip_style)

    gate = limits.Gate(app.config["GATE_SLOTS"], app.config["GATE_WAITING"],
                       app.config["GATE_WAIT_SECONDS"])
    app.extensions["explainer_gate"] = gate

    @app.before_request
    def enter_gate():
        if gated(request.endpoint):
            gate.acquire()                       # raises limits.Busy: a 503 at once
            g.holds_gate_slot = True

    @app.teardown_request
    def leave_gate(exc=None):
        if g.pop("holds_gate_slot", False):
            gate.release()

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

    @app.after_request
    def security_headers(response):
        response.headers.update(SECURITY_HEADERS)
        return response

    return app


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the workers start so that they all accept from it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=1024)


def serve(app, sock, threads: int):
    from waitress import serve as waitress_serve
    waitress_serve(app, sockets=[sock], threads=threads, **limits.SERVER_SETTINGS,
                   **streaming.SERVER_OPTIONS)    # notices a closed stream at once


def serve_workers(app, sock, workers: int, threads: int) -> int:
    """Fork `workers` processes that serve `app` from the one listening socket (the kernel hands
    each new connection to one of them). Python runs one thread at a time per process, so one
    process uses one core however many threads it has: two workers use both cores of the
    classroom server. The model is loaded before the fork and shared (copy-on-write); each
    worker warms and keeps its own caches. The first worker to stop (or SIGTERM / Ctrl-C to
    this process) stops them all."""
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:                                  # a worker
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                # Warm before serving: connections that arrive meanwhile wait in the socket's
                # backlog a second or two instead of meeting a cold worker.
                warm(app, app.extensions["explainer_model"], page=True)
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on "
                        "(default 127.0.0.1: this machine only; 0.0.0.0 to share on a network)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--model", default=None, help="model directory (default: "
                        "$LLM_EXPLAINER_MODEL, else models/austen)")
    parser.add_argument("--draft-model", default=None, help="draft model directory for "
                        "speculative decoding (default: $LLM_EXPLAINER_DRAFT_MODEL, else "
                        "<model dir>-draft if it exists)")
    parser.add_argument("--workers", type=int, default=limits.SERVER_WORKERS,
                        help="server processes (default %(default)s, one per core: see "
                        "web/limits.py); 1 serves from this process")
    parser.add_argument("--threads", type=int, default=limits.SERVER_THREADS,
                        help="waitress threads per worker (default %(default)s: see "
                        "web/limits.py)")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.threads < 1:
        parser.error("--workers and --threads must be at least 1")
    config = {k: v for k, v in (("MODEL_PATH", args.model),
                                ("DRAFT_MODEL_PATH", args.draft_model)) if v}
    forked = args.workers > 1 and hasattr(os, "fork")
    if forked:
        config["WARM_CACHES"] = False        # each worker warms its own, after the fork
    from pipeline import ModelLoadError
    try:
        app = create_app(config)
    except ModelLoadError as e:          # its message names the file (and the tensor)
        print(f"app.py: cannot load the model: {e}", file=sys.stderr)
        return 2
    try:
        sock = listening_socket(args.host, args.port)
    except OSError as e:
        print(f"app.py: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"Serving the explainer on http://{args.host}:{args.port}/ "
          f"({args.workers if forked else 1} worker(s) x {args.threads} threads; "
          "Ctrl-C stops it)", flush=True)
    if forked:
        return serve_workers(app, sock, args.workers, args.threads)
    serve(app, sock, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
