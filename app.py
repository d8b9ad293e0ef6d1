"""The explainer's web app: `python app.py [--host H] [--port P] [--model DIR]`.

`create_app` builds the Flask app around one loaded model: the default model `models/austen`,
or the directory given by --model or the LLM_EXPLAINER_MODEL environment variable (a Hugging
Face layout: config.json, model.safetensors, tokenizer files), and the draft model of the
speculative-decoding section (--draft-model / LLM_EXPLAINER_DRAFT_MODEL, else `<model dir>-draft`
next to the model when it exists: pipeline.speculative.load_draft). `main` serves it with
waitress for a classroom on 2 cores (web/serving.py: the caches warmed once, then two worker
processes forked; web/limits.py: threads, connection limit, idle timeout, and the gate that
answers 503 at once when too many requests compute).
"""
import os

# One BLAS thread per process, set before NumPy is first imported (it reads these once): the
# models are small and the server computes several requests at once on 2 cores, where
# OpenBLAS's own threads only fight each other. The Makefile sets the same; an explicit value
# in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402

from flask import Flask  # noqa: E402

from pipeline import ModelLoadError, load_model  # noqa: E402
from pipeline.speculative import load_draft  # noqa: E402
from web import assets, limits, security, serving, shading, streaming, views  # noqa: E402
from web.loaded import LoadedModel  # noqa: E402
from web.registry import sections  # noqa: E402


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
    model = app.config.get("MODEL") or load_model(app.config["MODEL_PATH"])
    draft, draft_problem = load_draft(model, app.config.get("DRAFT_MODEL"),
                                      app.config.get("DRAFT_MODEL_PATH"))
    if draft_problem and (app.config.get("DRAFT_MODEL") or app.config.get("DRAFT_MODEL_PATH")):
        app.logger.warning("speculative decoding is off: %s", draft_problem)
    app.extensions["explainer_model"] = LoadedModel.wrap(
        model, probe_encodings=app.config["PROBE_ENCODINGS"], draft=draft,
        draft_problem=draft_problem)
    missing = [o for o in app.extensions["explainer_model"].other_encodings if o.encoding is None]
    if missing:      # the page shows only the encodings that loaded; the operator is told why
        app.logger.warning("tokenization: other encodings not shown: %s", "; ".join(
            f"{o.name}: {o.problem}" for o in missing))
    if app.config.get("WARM_CACHES", True):
        serving.warm_in_background(app, app.extensions["explainer_model"])
    app.register_blueprint(views.bp)
    app.register_blueprint(assets.bp)
    assets.init_app(app)
    app.register_blueprint(streaming.bp)

    @app.context_processor
    def page_globals():
        return dict(all_sections=sections(), chip_style=shading.chip_style)

    serving.init_app(app)                    # the gate: a 503 at once when too many compute
    security.init_app(app)                   # CSP and the other headers on every response
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
    if args.workers > 1 and hasattr(os, "fork"):
        config["WARM_CACHES"] = False        # warmed once by serving.run, before the fork
    try:
        app = create_app(config)
    except ModelLoadError as e:          # its message names the file (and the tensor)
        print(f"app.py: cannot load the model: {e}", file=sys.stderr)
        return 2
    return serving.run(app, args.host, args.port, args.workers, args.threads)


if __name__ == "__main__":
    sys.exit(main())
