"""The explainer's web app: `python app.py [--host H] [--port P] [--model DIR]`.

Serves the page with waitress, a production WSGI server (4 worker threads, its default). The
model is loaded once, when the app is created, and shared by every request: the default model
`models/austen`, or the directory given by --model or the LLM_EXPLAINER_MODEL environment
variable (a Hugging Face layout: config.json, model.safetensors, tokenizer files). The draft
model of the speculative-decoding section is loaded once too: --draft-model /
LLM_EXPLAINER_DRAFT_MODEL, else `<model dir>-draft` next to the model when it exists
(models/austen-draft for the default model).
"""
import argparse
import os
import threading

from flask import Flask

from web import assets, streaming, views
from web.loaded import LoadedModel
from web.registry import SECTIONS

HERE = os.path.dirname(os.path.abspath(__file__))
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")


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


def warm_sections(app, lm):
    """Run each section's `warm` (prompt-independent caches) one after another in a background
    thread, so the first page does not wait for all of them; a failure is only logged."""
    def run():
        for s in SECTIONS:
            if s.warm is not None:
                try:
                    s.warm(lm)
                except Exception:
                    app.logger.exception("warming the %s section failed", s.id)
    threading.Thread(target=run, name="warm-sections", daemon=True).start()


def create_app(test_config=None):
    """The Flask app. test_config may hold MODEL (an already loaded model: tests load it once),
    MODEL_PATH, DRAFT_MODEL (a loaded draft model) or DRAFT_MODEL_PATH, PROBE_ENCODINGS
    (False skips looking for other tiktoken encodings) and WARM_CACHES (False: no background
    warm-up of the sections' caches)."""
    app = Flask(__name__, template_folder=os.path.join(HERE, "web", "templates"),
                static_folder=os.path.join(HERE, "web", "static"))
    app.config.from_mapping(MODEL_PATH=os.environ.get("LLM_EXPLAINER_MODEL") or None,
                            DRAFT_MODEL_PATH=os.environ.get("LLM_EXPLAINER_DRAFT_MODEL") or None,
                            PROBE_ENCODINGS=True)
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
    app.register_blueprint(streaming.bp)

    @app.context_processor
    def page_globals():
        return dict(all_sections=SECTIONS)

    @app.after_request
    def security_headers(response):
        # Plotly draws with inline styles; scripts come only from this server.
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response

    return app


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
    parser.add_argument("--threads", type=int, default=4, help="waitress worker threads")
    args = parser.parse_args(argv)
    config = {k: v for k, v in (("MODEL_PATH", args.model),
                                ("DRAFT_MODEL_PATH", args.draft_model)) if v}
    app = create_app(config or None)
    from waitress import serve
    print(f"Serving the explainer on http://{args.host}:{args.port}/ (Ctrl-C stops it)",
          flush=True)
    serve(app, host=args.host, port=args.port, threads=args.threads,
          **streaming.SERVER_OPTIONS)    # notices a closed stream at once


if __name__ == "__main__":
    main()
