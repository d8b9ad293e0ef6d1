"""The explainer's web app: `python app.py [--host H] [--port P] [--model DIR_OR_GGUF ...]`.

`create_app` builds the Flask app around the models it offers (web/model_state/explainer.py;
`model=` in the
URL picks one; docs/models.md); `main` serves it with waitress for a classroom on 2 cores
(web/serving/server.py, web/core/limits.py; docs/serving.md), with the options of
web/serving/command_line.py.
"""
import os

# One BLAS thread per process, set before NumPy is first imported (it reads these once): the
# models are small and the server computes several requests at once on 2 cores, where
# OpenBLAS's own threads only fight each other. The Makefile sets the same; an explicit value
# in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys

from flask import Flask

from pipeline import ModelLoadError
from web.classroom import views as classroom
from web.core import limits, security, views
from web.core.registry import refresh_trigger, sections
from web.figures import DARK_INKS
from web.model_state import found, offered
from web.presentation import glossary, numbers, shading
from web.serving import assets, chat_stream, command_line, shared_answers, streaming
from web.serving import server as serving

DEFAULT_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "classroom")


def create_app(test_config=None):
    """The Flask app. Its models (web/model_state/explainer.py): the default model (MODEL_PATH, else
    models/austen), SmolLM2-135M-Instruct when its package is installed (INSTALLED_MODELS), and
    the directories or .gguf files in MODEL_PATHS (--model, repeatable: the first is the
    default). test_config may also hold MODEL (an already loaded model, the default: tests load
    it once; with it the installed models are left out unless INSTALLED_MODELS is True),
    EXTRA_MODELS (loaded models offered beside it), DRAFT_MODEL (a loaded draft model) or
    DRAFT_MODEL_PATH, PROBE_ENCODINGS (False skips looking for other tiktoken encodings),
    WARM_CACHES (False: no background warm-up of the sections' caches) and PROXY_HOPS (--proxy:
    how many proxies in front are trusted to say the client's address, scheme and host)."""
    app = Flask(__name__)
    app.config.from_mapping(MODEL_PATH=os.environ.get("LLM_EXPLAINER_MODEL") or None,
                            MODEL_PATHS=(),
                            DRAFT_MODEL_PATH=os.environ.get("LLM_EXPLAINER_DRAFT_MODEL") or None,
                            PROBE_ENCODINGS=True,
                            MAX_CONTENT_LENGTH=limits.MAX_CONTENT_LENGTH,
                            GATE_SLOTS=limits.GATE_SLOTS, GATE_SLOTS_BIG=limits.GATE_SLOTS_BIG,
                            GATE_WAITING=limits.GATE_WAITING,
                            GATE_WAIT_SECONDS=limits.GATE_WAIT_SECONDS,
                            CLASSROOM_STORE=os.environ.get("LLM_EXPLAINER_STORE") or "sqlite",
                            CLASSROOM_DATA_DIR=os.environ.get("LLM_EXPLAINER_DATA_DIR")
                            or DEFAULT_DATA_DIR)
    if test_config:
        app.config.from_mapping(test_config)
    cfg = app.config
    offered.offer_models(app)                # web/model_state/offered.py: the models, their drafts
    if app.config.get("WARM_CACHES", True):
        serving.warm_in_background(app)
    app.register_blueprint(views.bp)
    app.register_blueprint(assets.bp)
    assets.init_app(app)
    app.register_blueprint(streaming.bp)
    app.register_blueprint(chat_stream.bp)     # /chat/stream: the chat section's answer
    classroom.init_app(app)                  # /class: the class in one room (web/classroom/)

    # the glossary's definitions, for the `term` macro (templates/macros.html), and the `part`
    # macro's record of what it renders; globals, since the macros are imported without the
    # page's context
    app.jinja_env.globals.update(glossary=glossary.GLOSSARY, glossary_anchor=views.term_anchor,
                                 keep_part=views.keep_part)
    # fixed, count, agree (web/presentation/numbers.py)
    app.jinja_env.filters.update(numbers.FILTERS)

    @app.context_processor
    def page_globals():
        return dict(all_sections=sections(), chip_style=shading.chip_style,
                    refresh_trigger=refresh_trigger, figure_dark_inks=DARK_INKS)

    serving.init_startup(app)                # a model still warming: a page that says so
    found.init_app(app)                      # GGUF files on this machine: listed, loaded on choice
    serving.init_app(app)                    # the gate: a 503 at once when too many compute
    security.init_app(app)                   # CSP and the other headers on every response
    shared_answers.init_app(app)             # identical requests computed once (a class at once)
    hops = int(cfg.get("PROXY_HOPS") or 0)
    if hops:       # the client's own address (the class's join limit), scheme and host
        from werkzeug.middleware.proxy_fix import ProxyFix
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops,
                                x_port=hops, x_prefix=0)
    return app


def main(argv=None):
    """Serve the app as the command line says (web/serving/command_line.py: the options)."""
    args, config = command_line.parse(argv, __doc__.splitlines()[0])
    try:
        app = create_app(config)
    except ModelLoadError as e:          # its message names the file (and the tensor)
        print(f"app.py: cannot load the model: {e}", file=sys.stderr)
        return 2
    try:                                 # the class store opens now: a bad --store stops here
        app.extensions["classroom"].store  # noqa: B018 (reading the property opens it)
    except Exception as e:
        print(f"app.py: cannot open the class store {app.config['CLASSROOM_STORE']!r}: {e}",
              file=sys.stderr)
        return 2
    return serving.run(app, args.host, args.port, args.workers, args.threads)


if __name__ == "__main__":
    sys.exit(main())
