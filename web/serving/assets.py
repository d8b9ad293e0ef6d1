"""The files the page links, under content-hashed URLs, and compressed answers.

Files: every file of static/ and the two third-party scripts, installed from npm by `npm ci`
(package.json pins them): htmx 2.0.x and plotly.js's cartesian bundle
(`plotly.js-cartesian-dist-min`, pinned to the plotly.js version that the Python `plotly`
package bundles; tests/test_web_assets.py checks that they match). Each file is read once when
the app starts and served from memory at /assets/<digest>/<name>, where <digest> is the start of
the SHA-256 of its bytes: a new version of a file has a new URL, so the URL can be cached for a
year (`immutable`: the browser does not even ask again). Templates link a file with
`asset_url(name)`. A URL whose digest is old or wrong still gets today's file, but with
`no-cache` (the browser checks its ETag each time). The plain URLs /vendor/htmx.min.js,
/vendor/plotly.min.js and Flask's /static/<file> keep working, also without the long cache.

Compression: flask-compress compresses the answers whose type is text-like (the page, htmx
fragments, JSON, JS, CSS, SVG) with brotli or gzip, whichever the request's Accept-Encoding
prefers, and sets `Vary: Accept-Encoding`. A streamed answer (the Server-Sent Events of
/generate/stream) is never compressed: a compressor holds bytes back until it has enough, which
would hold the tokens back; text/event-stream is also left out of the compressed types. The
compressed bytes of a hashed file are kept (one copy per algorithm): its bytes never change.
"""
import hashlib
import mimetypes
import os
from dataclasses import dataclass

from flask import Blueprint, abort, current_app, g, request, url_for
from flask_compress import Compress

bp = Blueprint("assets", __name__)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLOTLY_JS = os.path.join(ROOT, "node_modules", "plotly.js-cartesian-dist-min",
                         "plotly-cartesian.min.js")
HTMX_JS = os.path.join(ROOT, "node_modules", "htmx.org", "dist", "htmx.min.js")
# name in URLs -> (config key that may point elsewhere, default path)
VENDOR = {"htmx.min.js": ("HTMX_JS", HTMX_JS), "plotly.min.js": ("PLOTLY_JS", PLOTLY_JS)}
IMMUTABLE = "public, max-age=31536000, immutable"
DIGEST_CHARS = 16                                  # 64 bits of SHA-256: no two versions collide


@dataclass(frozen=True)
class Asset:
    data: bytes
    digest: str
    mimetype: str


def digest_of(data: bytes) -> str:
    """The part of an asset's URL that names its bytes."""
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


class HashedCache:
    """flask-compress's cache of compressed bodies, kept for the hashed files only (the views
    below name them by digest in g.asset_cache_key): their bytes never change, so each is
    compressed once per algorithm. Any other answer has the key "<algorithm>;" and is
    compressed afresh every time."""

    def __init__(self):
        self.data = {}

    def get(self, key: str):
        return self.data.get(key)

    def set(self, key: str, value: bytes):
        if not key.endswith(";"):
            self.data[key] = value


COMPRESS_DEFAULTS = {
    "COMPRESS_ALGORITHM": ["br", "gzip"],          # in this order when a request accepts both
    "COMPRESS_BR_LEVEL": 5,    # plotly.js: 454 kB (4: 501 kB, gzip 497 kB); the page in ~5 ms
    "COMPRESS_MIMETYPES": ["text/html", "text/css", "text/plain", "text/javascript",
                           "application/javascript", "application/json", "image/svg+xml"],
    "COMPRESS_STREAMS": False,                     # a streamed answer goes out as it is made
    "COMPRESS_CACHE_BACKEND": HashedCache,
    "COMPRESS_CACHE_KEY": lambda request: g.get("asset_cache_key", ""),
}


def read_assets(static_dir: str, vendor: dict, log=None) -> dict:
    """{name: Asset} for every file under static_dir (its path there, with "/") and every
    vendor {name: path}; a vendor file that is missing is left out (and logged)."""
    files = {}
    for folder, _, names in os.walk(static_dir):
        for n in names:
            path = os.path.join(folder, n)
            files[os.path.relpath(path, static_dir).replace(os.sep, "/")] = path
    for name, path in vendor.items():
        if name in files:
            raise ValueError(f"static/{name} has the name of a vendor script")
        if not os.path.exists(path):
            if log:
                log(f"missing {path}: run `make run` (it runs `npm ci`)")
            continue
        files[name] = path
    assets = {}
    for name, path in sorted(files.items()):
        with open(path, "rb") as f:
            data = f.read()
        mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        assets[name] = Asset(data, digest_of(data), mimetype)
    return assets


def init_app(app):
    """Read and hash the files once, give templates `asset_url`, and compress answers."""
    vendor = {name: app.config.get(key, path) for name, (key, path) in VENDOR.items()}
    app.extensions["explainer_assets"] = read_assets(
        app.config.get("ASSETS_STATIC_DIR", app.static_folder), vendor, app.logger.error)
    for key, value in COMPRESS_DEFAULTS.items():
        app.config.setdefault(key, value)
    Compress(app)

    @app.context_processor
    def asset_globals():
        return dict(asset_url=asset_url)


def asset_url(name: str) -> str:
    """The content-hashed URL of a static/ file ("figures.js") or a vendor script
    ("htmx.min.js")."""
    asset = current_app.extensions["explainer_assets"].get(name)
    if asset is None and name not in VENDOR:
        raise ValueError(f"no asset named {name!r}")
    # a vendor script that is missing gets a URL that answers 404 (its absence is logged)
    return url_for("assets.hashed", digest=asset.digest if asset else "missing", name=name)


def _answer(name: str, cache_control: str):
    asset = current_app.extensions["explainer_assets"].get(name)
    if asset is None:
        if name in VENDOR:
            current_app.logger.error("missing %s: run `make run` (it runs `npm ci`)", name)
        abort(404)
    g.asset_cache_key = f"{asset.digest}/{name}"
    response = current_app.response_class(asset.data, mimetype=asset.mimetype)
    response.set_etag(asset.digest)
    response.headers["Cache-Control"] = cache_control
    return response.make_conditional(request)


@bp.get("/assets/<digest>/<path:name>")
def hashed(digest, name):
    """A file under its hashed URL: cached for a year; an old or wrong digest gets today's file,
    to be checked again next time."""
    asset = current_app.extensions["explainer_assets"].get(name)
    return _answer(name, IMMUTABLE if asset and digest == asset.digest else "no-cache")


@bp.get("/vendor/plotly.min.js")
def plotly_js():
    """plotly.js (the cartesian bundle from npm), under its plain URL."""
    return _answer("plotly.min.js", "no-cache")


@bp.get("/vendor/htmx.min.js")
def htmx_js():
    """htmx 2, from node_modules, under its plain URL."""
    return _answer("htmx.min.js", "no-cache")
