"""The explainer's web app: `python app.py [--host H] [--port P] [--model DIR]`.

Serves the page with waitress, a production WSGI server (4 worker threads, its default). The
model is loaded once, when the app is created, and shared by every request: the default model
`models/austen`, or the directory given by --model or the LLM_EXPLAINER_MODEL environment
variable (a Hugging Face layout: config.json, model.safetensors, tokenizer files).
"""
import argparse
import os

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


def create_app(test_config=None):
    """The Flask app. test_config may hold MODEL (an already loaded model: tests load it once),
    MODEL_PATH, and PROBE_ENCODINGS (False skips looking for other tiktoken encodings)."""
    app = Flask(__name__, template_folder=os.path.join(HERE, "web", "templates"),
                static_folder=os.path.join(HERE, "web", "static"))
    app.config.from_mapping(MODEL_PATH=os.environ.get("LLM_EXPLAINER_MODEL") or None,
                            PROBE_ENCODINGS=True)
    if test_config:
        app.config.from_mapping(test_config)
    model = app.config.get("MODEL") or load(app.config["MODEL_PATH"])
    app.extensions["explainer_model"] = LoadedModel.wrap(
        model, probe_encodings=app.config["PROBE_ENCODINGS"])
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
    parser.add_argument("--threads", type=int, default=4, help="waitress worker threads")
    args = parser.parse_args(argv)
    config = {"MODEL_PATH": args.model} if args.model else None
    app = create_app(config)
    from waitress import serve
    print(f"Serving the explainer on http://{args.host}:{args.port}/ (Ctrl-C stops it)",
          flush=True)
    serve(app, host=args.host, port=args.port, threads=args.threads,
          **streaming.SERVER_OPTIONS)    # notices a closed stream at once


if __name__ == "__main__":
    main()
