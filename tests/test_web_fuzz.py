"""Property-based tests of every GET route with arbitrary queries: never a 5xx, every 4xx says
why, nothing the user typed becomes markup, and every answer comes back in bounded time.

Routes: `/`, `/section/<id>` for every registered section, and every other GET route of the app
(found in its URL map, e.g. a stream), so routes added later are fuzzed without editing this.
Queries mix every parameter name with unknown ones, repeat keys, and draw values from: Unicode
of all planes (lone surrogates included, sent as their UTF-8-style bytes), control characters,
raw non-UTF-8 bytes, broken percent-escapes, huge / negative / NaN / float numbers, the ends of
each parameter's range and text just past its length limit.

    .venv/bin/python -m pytest -q tests/test_web_fuzz.py                          # CI: ~1 min
    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -q tests/test_web_fuzz.py  # 1000 / route
"""
import os
import re
import time
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_web_hardening import assert_inert
from web.core.registry import SECTIONS, all_params
from web_support import HX

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# examples per route: CI keeps the whole file near a minute on 2 cores (the page renders every
# section, so it gets fewer); the long run is the thorough one
EXAMPLES = {"ci": 15, "long": 1000}[PROFILE]
PAGE_EXAMPLES = {"ci": 6, "long": 1000}[PROFILE]


def fuzz(n):
    return settings(max_examples=n, deadline=None, derandomize=PROFILE == "ci",
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


FUZZ = fuzz(EXAMPLES)
MAX_SECONDS = 30          # a hang, not slowness: the CPU is shared while tests run
STREAM_CHUNKS = 6         # a stream (SSE) is read this far, then closed: its pace is deliberate

PARAMS = all_params()
NAMES = [p.name for p in PARAMS]


def other_get_routes(app) -> list:
    """GET routes besides / and /section/<id>, with any URL variables filled in by section ids."""
    out = []
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.endpoint == "static" \
                or rule.endpoint.startswith("assets.") \
                or rule.rule in ("/", "/section/<section_id>"):
            continue
        if not rule.arguments:
            out.append(rule.rule)
        elif rule.arguments == {"section_id"}:
            out += [rule.rule.replace("<section_id>", s.id) for s in SECTIONS]
    return sorted(out)


# --- query strategies ------------------------------------------------------------------------

any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
any_text = st.text(any_char, max_size=40)
words = st.sampled_from(["Elizabeth", " Darcy", "the", "\n", "\t", " ", "é", "😀", "中文",
                         "<img src=x onerror=alert(1)>", '"><svg onload=alert(1)>',
                         "<script>alert(1)</script>", "javascript:alert(1)", "&amp;", "%00"])
prose = st.lists(words, max_size=12).map("".join)
numbers = st.one_of(
    st.integers(-10 ** 40, 10 ** 40).map(str),
    st.integers(-3, 300).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e309", "-0", "+7",
                     " 5 ", "0x10", "1_000", "٣", "５", "", "  ", "true", "null", "[]", "{}"]))


def edges(p) -> st.SearchStrategy:
    if p.kind == "float":
        return st.sampled_from([v for v in (p.min, p.max, p.default) if v is not None]
                               or [0.0]).flatmap(lambda v: st.sampled_from(
                                   [v - 1e-9, v, v + 1e-9, v - 0.5, v + 0.5])).map(repr)
    if p.kind == "int":
        return st.sampled_from([v for v in (p.min, p.max, p.default) if v is not None]
                               or [0]).flatmap(lambda v: st.sampled_from([v - 1, v, v + 1]))\
            .map(str)
    n = p.max_chars or 2000
    return st.sampled_from([n - 1, n, n + 1]).flatmap(
        lambda k: st.sampled_from(["a", "é", "😀", " "]).map(lambda c: c * k))


values = st.one_of(any_text, prose, numbers)
names = st.one_of(st.sampled_from(NAMES), st.text(any_char, max_size=8),
                  st.sampled_from(["", "prompt[]", "PROMPT", "section", "__class__"]))


def encode(text: str) -> bytes:
    """Percent-encode like a browser, letting lone surrogates through as their 3 bytes."""
    return urllib.parse.quote_from_bytes(text.encode("utf-8", "surrogatepass"), safe="").encode()


@st.composite
def queries(draw) -> bytes:
    pairs = draw(st.lists(st.tuples(names, values), max_size=6))
    # often a valid-looking prompt, so the sections compute rather than stop at the prompt
    if draw(st.booleans()):
        pairs.append(("prompt", draw(prose.filter(str.strip) | any_text)))
    for p in draw(st.lists(st.sampled_from(PARAMS), max_size=3)):
        pairs.append((p.name, draw(edges(p))))
    if draw(st.integers(0, 9)) == 0 and pairs:               # a key given twice
        pairs.append(draw(st.sampled_from(pairs)))
    parts = [encode(k) + b"=" + encode(v) for k, v in pairs]
    raw = draw(st.lists(st.sampled_from([b"%", b"%G1", b"%e9", b"%ED%A0%80", b"\xff\xfe",
                                         b"\xe9t\xe9", b"prompt", b"=", b"&&", b"%zz=1",
                                         b"prompt=%C3", b"merges=%00", b"+"]), max_size=3))
    parts += raw
    order = draw(st.permutations(parts))
    return b"&".join(order)


# --- the properties ------------------------------------------------------------------------

def check(client, path: str, query: bytes, htmx: bool):
    start = time.monotonic()
    # the raw bytes, as a server passes them (WSGI's QUERY_STRING is bytes as latin-1)
    r = client.get(path, headers=HX if htmx else {}, buffered=False,
                   environ_overrides={"QUERY_STRING": query.decode("latin-1")})
    body = b""
    for i, chunk in enumerate(r.response):
        body += chunk if isinstance(chunk, bytes) else chunk.encode()
        if i + 1 >= STREAM_CHUNKS and r.is_streamed:
            break
    r.close()
    elapsed = time.monotonic() - start
    assert r.status_code < 500, (path, query, r.status_code)
    assert elapsed < MAX_SECONDS, (path, query, elapsed)
    text = body.decode("utf-8", "replace")
    if 400 <= r.status_code < 500:
        if r.mimetype == "text/html" and (path == "/" or path.startswith("/section/")):
            messages = [re.sub(r"<[^>]+>", "", m).strip() for m in
                        re.findall(r'<p class="error" id="error-[^"]+"[^>]*>(.*?)</p>', text, re.S)]
            assert any(messages), (path, query, r.status_code, "no message shown")
        else:
            assert text.strip(), (path, query, r.status_code, "an empty 4xx")
    if r.mimetype == "text/html":
        assert_inert(text)
    push = r.headers.get("HX-Push-Url")
    if push is not None:
        assert r.status_code == 200 and push.startswith("/") and push.isascii()
        assert not re.search(r"[\s<>\"']", push)


@pytest.mark.parametrize("path", [f"/section/{s.id}" for s in SECTIONS])
@FUZZ
@given(query=queries(), htmx=st.booleans())
def test_section_route_never_fails_and_always_explains(app, path, query, htmx):
    check(app.test_client(), path, query, htmx)


@fuzz(PAGE_EXAMPLES)
@given(query=queries(), htmx=st.booleans())
def test_page_never_fails_and_always_explains(app, query, htmx):
    check(app.test_client(), "/", query, htmx)


def test_other_get_routes_never_fail(app):
    """Any other GET route (a stream, say) gets the same queries; bounded reads."""
    routes = other_get_routes(app)

    @FUZZ
    @given(path=st.sampled_from(routes or ["/"]), query=queries(), htmx=st.booleans())
    def run(path, query, htmx):
        check(app.test_client(), path, query, htmx)

    if not routes:
        pytest.skip("no GET routes besides / and /section/<id> are registered yet")
    run()


@FUZZ
@given(path=st.text(any_char, max_size=30))
def test_arbitrary_paths_are_4xx_not_5xx(app, path):
    r = app.test_client().get("/" + urllib.parse.quote(
        path.encode("utf-8", "surrogatepass"), safe="/"))
    assert r.status_code < 500
    r.close()
