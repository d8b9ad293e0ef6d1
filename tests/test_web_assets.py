"""The files the page links (web/serving/assets.py): compressed answers (brotli, gzip) when the
request
asks and only then, streams left alone, content-hashed URLs cached for a year, and the plotly.js
bundle of the same version as the Python plotly package."""
import base64
import gzip
import html
import json
import os
import re
import shutil
import socket
import urllib.parse

import brotli
import numpy as np
import plotly.offline
import pytest
from flask import Flask, Response, jsonify

from web.serving import assets
from web_support import HX, every_section, text_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECODE = {"br": brotli.decompress, "gzip": gzip.decompress}
# The page's own scripts, in the order templates/page.html runs them (explainer.js first: it
# makes the namespace the others share).
SCRIPTS = ["explainer.js", "figure-style.js", "figures.js", "boxes.js", "stream.js",
           "generation.js", "chat.js", "errors.js", "controls.js", "lazy.js", "requests.js",
           "suggest.js", "section-map.js", "glossary.js", "anchor.js", "exports.js", "predict.js",
           "tour.js", "present.js", "theme.js", "deeper.js", "cuts.js", "copy-link.js",
           "overview.js", "classroom.js"]
LINKED = ["favicon.svg", "style.css", "htmx.min.js", "plotly.min.js", *SCRIPTS]


def linked_urls(page: str) -> dict:
    """{name: URL} of every file the page's <head> links under /assets/<digest>/<name>."""
    head = page.split("</head>", 1)[0]
    urls = re.findall(r'<(?:link|script)\b[^>]*\b(?:href|src)="([^"]+)"', head)
    out = {}
    for u in urls:
        m = re.fullmatch(r"/assets/([0-9a-f]{16})/(.+)", u)
        assert m, f"{u} is not a content-hashed URL"
        out[m.group(2)] = u
    return out


def body(response) -> bytes:
    """The response's bytes, decompressed as its Content-Encoding says."""
    data = response.get_data()
    enc = response.headers.get("Content-Encoding")
    return DECODE[enc](data) if enc else data


# --- compression -----------------------------------------------------------------------------

@pytest.mark.parametrize("encoding, accept", [
    ("br", "br"), ("gzip", "gzip"), ("br", "gzip, deflate, br, zstd"),  # what Chromium sends
    ("gzip", "br;q=0.5, gzip"), (None, ""), (None, "identity"), (None, "deflate")])
def test_the_page_is_compressed_only_as_the_request_asks(client, encoding, accept):
    plain = client.get("/")
    r = client.get("/", headers={"Accept-Encoding": accept} if accept else {})
    assert r.status_code == 200 and plain.headers.get("Content-Encoding") is None
    assert r.headers.get("Content-Encoding") == encoding
    assert "Accept-Encoding" in r.headers["Vary"]            # a cache keeps one per encoding
    assert body(r) == plain.get_data()
    if encoding:
        assert len(r.get_data()) < len(plain.get_data()) / 2
        assert int(r.headers["Content-Length"]) == len(r.get_data())


@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_htmx_fragments_are_compressed(client, encoding):
    plain = client.get("/section/tokenization", headers=HX)
    r = client.get("/section/tokenization", headers={**HX, "Accept-Encoding": encoding})
    assert r.status_code == 200 and r.mimetype == "text/html"
    assert r.headers["Content-Encoding"] == encoding and body(r) == plain.get_data()


@pytest.mark.parametrize("encoding", ["br", "gzip"])
@pytest.mark.parametrize("name", LINKED)
def test_linked_files_are_compressed_and_equal_the_files(client, name, encoding):
    source = (os.path.join(ROOT, "static", name) if name not in assets.VENDOR
              else assets.VENDOR[name][1])
    with open(source, "rb") as f:
        expected = f.read()
    url = linked_urls(text_of(client.get("/")))[name]
    for _ in range(2):                        # the second answer comes from the kept copy
        r = client.get(url, headers={"Accept-Encoding": encoding})
        assert r.status_code == 200 and body(r) == expected
        if len(expected) >= 500:              # below that compression does not pay
            assert r.headers["Content-Encoding"] == encoding
            assert len(r.get_data()) < len(expected) * 0.6
    assert client.get(url).get_data() == expected     # no Accept-Encoding: as it is


@pytest.fixture(scope="module")
def small_app(tmp_path_factory):
    """A bare Flask app with assets.init_app: a JSON route and two streamed routes."""
    static = tmp_path_factory.mktemp("static")
    (static / "a.js").write_text("let x = 1;\n" * 200)
    app = Flask(__name__)
    app.config.update(TESTING=True, ASSETS_STATIC_DIR=str(static))
    assets.init_app(app)
    app.register_blueprint(assets.bp)
    lines = [f"line {i}: " + "the same words again " * 5 + "\n" for i in range(100)]

    @app.get("/json")
    def as_json():
        return jsonify(lines=lines)

    @app.get("/events")
    def events():
        return Response((f"event: token\ndata: {json.dumps(t)}\n\n" for t in lines),
                        mimetype="text/event-stream")

    @app.get("/text-stream")
    def text_stream():
        return Response(iter(lines), mimetype="text/plain")

    return app


@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_json_is_compressed(small_app, encoding):
    r = small_app.test_client().get("/json", headers={"Accept-Encoding": encoding})
    assert r.headers["Content-Encoding"] == encoding
    assert json.loads(body(r))["lines"][99].startswith("line 99: ")


@pytest.mark.parametrize("path", ["/events", "/text-stream"])
def test_streamed_answers_are_not_compressed(small_app, path):
    r = small_app.test_client().get(path, headers={"Accept-Encoding": "br, gzip"},
                                    buffered=False)
    assert r.is_streamed and "Content-Encoding" not in r.headers
    first = next(iter(r.response))            # the first chunk alone, as the view yielded it
    assert first.decode().endswith("\n") and "line 0: " in first.decode()
    r.close()


def test_the_token_stream_is_neither_compressed_nor_held_back(server, app):
    """A browser asks for compressed answers; the stream still sends each token as it is made."""
    slots = app.extensions["explainer"].slots
    before = len(slots.finished)
    path = "/generate/stream?" + urllib.parse.urlencode(dict(gen_max=40, gen_pace=25))
    sock = socket.create_connection(("127.0.0.1", server), timeout=20)
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                     "Accept-Encoding: gzip, deflate, br, zstd\r\n\r\n".encode())
        received = b""
        while b"event: token" not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        # the first token is readable as it is, and the server is still generating the rest
        assert len(slots.finished) == before
        head = received.split(b"\r\n\r\n", 1)[0].lower()
        assert head.startswith(b"http/1.1 200 ok") and b"content-encoding" not in head
        assert b"content-type: text/event-stream" in head
    finally:
        sock.close()
    # the loop notices the close and stops
    with slots.changed:
        assert slots.changed.wait_for(lambda: len(slots.finished) > before, timeout=20)


# --- content-hashed URLs ---------------------------------------------------------------------

def test_the_page_links_every_file_by_its_digest(app, client):
    urls = linked_urls(text_of(client.get("/")))
    assert sorted(urls) == sorted(LINKED)
    files = app.extensions["explainer_assets"]
    for name, url in urls.items():
        assert url == f"/assets/{assets.digest_of(files[name].data)}/{name}"


def test_the_page_runs_every_script_of_static_in_its_order(client):
    """Each script of static/ is linked by the page, after htmx and plotly.js, in the order
    SCRIPTS names (retry.js is the busy page's own)."""
    head = text_of(client.get("/")).split("</head>", 1)[0]
    names = [u.rsplit("/", 1)[1] for u in re.findall(r'<script\b[^>]*\bsrc="([^"]+)"', head)]
    assert names == ["htmx.min.js", "plotly.min.js", *SCRIPTS]
    assert all(re.search(rf'<script src="[^"]+/{re.escape(n)}" defer>', head) for n in names)
    on_disk = {n for n in os.listdir(os.path.join(ROOT, "static")) if n.endswith(".js")}
    assert on_disk == {*SCRIPTS, "retry.js"}


def test_the_digest_names_the_bytes():
    a, b = b"let x = 1;\n", b"let x = 2;\n"
    assert assets.digest_of(a) == assets.digest_of(bytes(a))
    assert assets.digest_of(a) != assets.digest_of(b)
    assert re.fullmatch(r"[0-9a-f]{16}", assets.digest_of(a))


def make_app(model, static_dir):
    from app import create_app
    return create_app({"MODEL": model, "TESTING": True, "PROBE_ENCODINGS": False,
                       "WARM_CACHES": False, "ASSETS_STATIC_DIR": str(static_dir)})


def test_a_changed_file_gets_a_new_url(model, tmp_path):
    changed = "stream.js"
    static = tmp_path / "static"
    shutil.copytree(os.path.join(ROOT, "static"), static)
    before = make_app(model, static).test_client()
    old = linked_urls(text_of(before.get("/")))
    (static / changed).write_bytes((static / changed).read_bytes() + b"\n// changed\n")
    after = make_app(model, static).test_client()
    new = linked_urls(text_of(after.get("/")))
    assert new[changed] != old[changed]
    assert new[changed] == f"/assets/{assets.digest_of((static / changed).read_bytes())}/{changed}"
    assert {k: v for k, v in new.items() if k != changed} == \
           {k: v for k, v in old.items() if k != changed}
    # the old URL still gets the file (today's), but is not to be kept for a year
    r = after.get(old[changed])
    assert r.status_code == 200 and r.get_data().endswith(b"// changed\n")
    assert r.headers["Cache-Control"] == "no-cache"
    r = after.get(new[changed])
    assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"


@pytest.mark.parametrize("name", LINKED)
def test_hashed_urls_are_cached_for_a_year(client, name):
    url = linked_urls(text_of(client.get("/")))[name]
    r = client.get(url, headers={"Accept-Encoding": "br"})
    assert r.status_code == 200
    assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    # a browser that checks anyway (a forced reload) gets 304 for the same version
    again = client.get(url, headers={"Accept-Encoding": "br", "If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304 and again.get_data() == b""


@pytest.mark.parametrize("path", ["/assets/0123456789abcdef/figures.js", "/assets/old/style.css",
                                  "/vendor/plotly.min.js", "/vendor/htmx.min.js",
                                  "/static/figures.js"])
def test_other_urls_get_the_file_without_the_long_cache(client, path):
    r = client.get(path)
    assert r.status_code == 200 and len(r.get_data()) > 1000
    assert "immutable" not in r.headers.get("Cache-Control", "")
    assert "max-age=31536000" not in r.headers.get("Cache-Control", "")
    r.close()


@pytest.mark.parametrize("path", ["/assets/0123456789abcdef/nope.js", "/assets/x/../app.py",
                                  "/assets/x/vendor/htmx.min.js"])
def test_unknown_files_are_404(client, path):
    assert client.get(path).status_code == 404


def test_files_are_not_gated(model):
    from app import create_app
    tight = create_app({"MODEL": model, "TESTING": True, "PROBE_ENCODINGS": False,
                        "WARM_CACHES": False, "GATE_SLOTS": 1, "GATE_WAITING": 0})
    c = tight.test_client()
    url = linked_urls(text_of(c.get("/")))["plotly.min.js"]
    gate = tight.extensions["explainer_gate"]
    gate.acquire()                                 # another request is computing
    try:
        assert c.get("/?prompt=A%20page%20not%20made%20yet").status_code == 503
        assert c.get(url).status_code == 200
        assert c.get("/").status_code == 200       # made once already: shared, not computed
    finally:
        gate.release()


# --- plotly.js -------------------------------------------------------------------------------

def test_served_plotly_js_is_the_version_the_python_package_bundles(client):
    version = plotly.offline.get_plotlyjs_version()
    url = linked_urls(text_of(client.get("/")))["plotly.min.js"]
    head = client.get(url).get_data()[:300].decode()
    m = re.search(r"plotly\.js \(cartesian - minified\) v(\d+\.\d+\.\d+)", head)
    assert m, head
    assert m.group(1) == version
    with open(os.path.join(ROOT, "package.json")) as f:
        pinned = json.load(f)["dependencies"]["plotly.js-cartesian-dist-min"]
    assert pinned == version                       # --save-exact: no range
    with open(os.path.join(ROOT, "package-lock.json")) as f:
        lock = json.load(f)["packages"]["node_modules/plotly.js-cartesian-dist-min"]
    assert lock["version"] == version


def bundle_traces() -> set:
    """The trace types of the installed cartesian bundle, as its README lists them."""
    with open(os.path.join(os.path.dirname(assets.PLOTLY_JS), "README.md")) as f:
        line = re.search(r"Contains trace modules (.*)\.", f.read()).group(1)
    return set(re.findall(r"`(\w+)`", line))


def test_every_figure_of_the_page_has_a_trace_type_of_the_bundle(client):
    page = text_of(client.get("/", headers=every_section()))
    figures = [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]
    assert len(figures) >= 10
    used = {t.get("type", "scatter") for f in figures for t in f["data"]}
    assert "scatter" in bundle_traces() and used <= bundle_traces(), used - bundle_traces()


def test_many_neurons_are_all_drawn_with_a_type_of_the_bundle():
    from web.figures.feedforward import activation_figure
    n = 11008                                       # a large model's feed-forward width
    xs = np.linspace(-3, 3, n, dtype=np.float32)
    ys = np.maximum(xs, 0)
    fig = json.loads(activation_figure(xs[:50], ys[:50], xs, ys, np.arange(5), "relu", 0, 3))
    assert {t["type"] for t in fig["data"]} <= bundle_traces()
    neurons = fig["data"][1]
    assert len(base64.b64decode(neurons["x"]["bdata"])) == 4 * n   # every neuron, as float32
