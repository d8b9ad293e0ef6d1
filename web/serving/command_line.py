"""The server's command line (`python app.py ...`, `make run`): its options, checked, and the
app's configuration they give (app.py's main creates the app from it and serves it)."""
import argparse
import os

from web.core import limits


def parse(argv, description: str):
    """(the parsed options, the create_app configuration they give). A bad value exits with
    status 2 and argparse's message naming the option."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on "
                        "(default 127.0.0.1: this machine only; 0.0.0.0 to share on a network)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--model", action="append", default=[], help="a model directory "
                        "(Hugging Face layout) or .gguf file to offer; repeatable, the first is "
                        "the default (default: $LLM_EXPLAINER_MODEL, else models/austen; "
                        "SmolLM2 is offered too when its package is installed)")
    parser.add_argument("--models", action="append", default=[], metavar="DIR",
                        help="a folder to search (recursively) for .gguf files to offer in the "
                        "page's model picker, loaded when chosen (repeatable; Ollama's, LM "
                        "Studio's and Hugging Face's stores are searched too: "
                        "web/model_state/found.py)")
    parser.add_argument("--draft-model", default=None, help="draft model directory for "
                        "speculative decoding (default: $LLM_EXPLAINER_DRAFT_MODEL, else "
                        "<model dir>-draft if it exists)")
    parser.add_argument("--workers", type=int, default=limits.SERVER_WORKERS,
                        help="server processes (default %(default)s, one per core: see "
                        "web/core/limits.py); 1 serves from this process")
    parser.add_argument("--threads", type=int, default=limits.SERVER_THREADS,
                        help="waitress threads per worker (default %(default)s: see "
                        "web/core/limits.py)")
    parser.add_argument("--store", default=None, help="where class sessions live: 'sqlite' "
                        "(default: a file in --data-dir) or redis://host:port/db, shared by "
                        "several instances (web/classroom/store/)")
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
    for folder in args.models:
        if not os.path.isdir(folder):
            parser.error(f"--models {folder}: no such folder")
    if args.proxy < 0:
        parser.error("--proxy must be 0 or more")
    config = {k: v for k, v in (("MODEL_PATHS", tuple(args.model)),
                                ("FOUND_MODEL_DIRS", tuple(args.models)),
                                ("DRAFT_MODEL_PATH", args.draft_model),
                                ("CLASSROOM_STORE", args.store),
                                ("CLASSROOM_DATA_DIR", args.data_dir),
                                ("PROXY_HOPS", args.proxy)) if v}
    # serving.run warms the default model, then loads and warms the others while it serves
    config.update(WARM_CACHES=False, DEFER_MODELS=True)
    return args, config
