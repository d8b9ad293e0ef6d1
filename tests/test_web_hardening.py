"""Hardening, for every registered section: limits, the time budget, the overload gate, security
headers, inert user text, start-up errors, and the accessibility of the rendered page.

Everything is parametrized over web.core.registry.SECTIONS and each section's PARAMS, so a section
that lands later is checked without editing this file."""
import html
import html.parser
import os
import re
import subprocess
import sys
import time
import urllib.parse

import pytest

from web.core import limits
from web.core.params import Param, parse_state
from web.core.registry import SECTIONS, all_params
from web_support import HX, error_message, every_section, text_of, url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_IDS = [s.id for s in SECTIONS]
OWNED = [(s, p) for s in SECTIONS for p in s.params]       # (section, one of its params)
OWNED_IDS = [f"{s.id}-{p.name}" for s, p in OWNED]
INTS = [(s, p) for s, p in OWNED if p.kind in ("int", "float")]
TEXTS = [(s, p) for s, p in OWNED if p.kind == "text"]


# --- a tiny DOM, enough to reason about controls, labels, headings and attributes ------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.walk()

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


class DOM(html.parser.HTMLParser):
    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.root = self.current = Node("#root", {}, None)
        self.feed(markup)
        self.close()
        self.nodes = list(self.root.walk())
        self.by_id = {}
        for n in self.nodes:
            self.by_id.setdefault(n.attrs.get("id"), n)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def accessible_name(dom: DOM, el: Node) -> str:
    """The accessible name of a form control (the parts of the W3C algorithm the page uses)."""
    if el.attrs.get("aria-labelledby"):
        return " ".join(dom.by_id[i].text() for i in el.attrs["aria-labelledby"].split()
                        if i in dom.by_id).strip()
    if (el.attrs.get("aria-label") or "").strip():
        return el.attrs["aria-label"].strip()
    if el.attrs.get("id"):
        for label in (n for n in dom.nodes if n.tag == "label"):
            if label.attrs.get("for") == el.attrs["id"] and label.text().strip():
                return label.text().strip()
    for a in el.ancestors():
        if a.tag == "label" and a.text().strip():
            return a.text().strip()
    if el.tag == "button" and el.text().strip():
        return el.text().strip()
    if el.tag == "input" and el.attrs.get("type") in ("submit", "button", "reset"):
        return (el.attrs.get("value") or "").strip()
    return (el.attrs.get("title") or "").strip()


def controls(dom: DOM) -> list:
    return [n for n in dom.nodes if n.tag in ("select", "textarea", "button")
            or (n.tag == "input" and n.attrs.get("type") != "hidden")]


def describe(el: Node) -> str:
    return "<%s %s>" % (el.tag, " ".join(f'{k}="{v}"' for k, v in el.attrs.items()
                                           if k in ("id", "name", "type")))


# --- limits: one table, every parameter bounded -------------------------------------------

@pytest.mark.parametrize("param", all_params(), ids=lambda p: p.name)
def test_every_parameter_is_bounded(param):
    if param.kind in ("int", "float"):
        assert param.min is not None and param.max is not None, \
            f"{param.name}: give min and max (or limit=, from web/core/limits.py)"
        assert param.min <= param.max < 10 ** limits.INT_DIGITS
    else:
        assert param.max_chars is not None and param.max_chars <= max(limits.LIMITS["text_chars"],
                                                                      limits.LIMITS["prompt_chars"])


@pytest.mark.parametrize("name", sorted(limits.LIMITED))
def test_every_limited_parameter_is_registered_and_capped(name):
    params = {p.name: p for p in all_params()}
    assert name in params, f"web.core.limits.LIMITED names {name!r}, which no section registers"
    p = params[name]
    assert p.limit == limits.LIMITED[name] and p.max <= limits.LIMITS[p.limit]
    state = parse_state(f"{name}={limits.LIMITS[p.limit] + 1}".encode(), all_params())
    assert state.statuses[name] == 422 and name in state.errors


def test_a_limit_from_the_table_caps_a_parameter():
    p = Param("gen_new", "New tokens", kind="int", default=8, min=1, limit="new_tokens")
    assert p.max == limits.LIMITS["new_tokens"]
    q = Param("gen_new", "New tokens", kind="int", default=8, min=1, max=10 ** 6,
              limit="new_tokens")
    assert q.max == limits.LIMITS["new_tokens"]
    state = parse_state(f"gen_new={p.max + 1}".encode(), [p])
    assert state.statuses["gen_new"] == 422
    assert "server's limit" in state.errors["gen_new"] and str(p.max) in state.errors["gen_new"]
    assert parse_state(f"gen_new={p.max}".encode(), [p])["gen_new"] == p.max
    with pytest.raises(KeyError):
        Param("x", "X", kind="int", min=0, limit="no_such_limit")


def test_text_without_a_length_gets_the_table_cap():
    p = Param("free", "Free text")
    assert p.max_chars == limits.LIMITS["text_chars"]
    state = parse_state(urllib.parse.urlencode({"free": "é" * (p.max_chars + 1)}).encode(), [p])
    assert f"{p.max_chars + 1:,} characters" in state.errors["free"]


def _over(p: Param) -> list:
    """Values of p that must be refused, each for a different reason."""
    # (the fuzz tests try many more malformed values; these are one of each kind of reason)
    if p.kind in ("int", "float"):
        out = ["nan", "9" * 40] + (["2.5"] if p.kind == "int" else ["1e3"])
        if p.max is not None:
            out.append(str(p.max + 1))
        if p.min is not None:
            out.append(str(p.min - 1))
        return out
    return ["x" * (p.max_chars + 1), "nul\x00", "bell\x07"] + ([""] if p.required else [])


@pytest.mark.parametrize("section,param", OWNED, ids=OWNED_IDS)
def test_every_bad_value_of_every_parameter_is_a_4xx_with_its_message(client, section, param):
    for value in _over(param):
        r = client.get(url(f"/section/{section.id}", **{param.name: value}), headers=HX)
        assert 400 <= r.status_code < 500, (param.name, value, r.status_code)
        assert error_message(text_of(r), param.name), \
            f"{section.id}: no message next to {param.name} for {value!r}"


@pytest.mark.parametrize("section,param", INTS, ids=[f"{s.id}-{p.name}" for s, p in INTS])
def test_the_ends_of_every_range_are_accepted(client, section, param):
    for value in (param.min, param.max):
        r = client.get(url(f"/section/{section.id}", **{param.name: str(value)}), headers=HX)
        # the end may still be refused by the section for this prompt (an index past its last
        # word, say): then with its message; never as malformed, never as a server error
        assert r.status_code in (200, 422), (param.name, value, r.status_code)
        if r.status_code == 422:
            assert error_message(text_of(r), param.name) or error_message(text_of(r), "prompt")


def test_huge_query_is_refused_with_a_message(client):
    r = client.get("/?prompt=" + "a" * (limits.MAX_QUERY_BYTES + 1))
    assert r.status_code == 400
    assert "too long" in error_message(text_of(r), "prompt")


def test_a_request_body_is_capped(client, app):
    assert app.config["MAX_CONTENT_LENGTH"] == limits.MAX_CONTENT_LENGTH
    r = client.post("/", data=b"x" * (limits.MAX_CONTENT_LENGTH + 1))
    assert 400 <= r.status_code < 500          # 405: nothing takes a body; never read


# --- the time budget -----------------------------------------------------------------------

class SlowSection:
    """A section whose loop takes as long as its `n` asks (a stand-in for generation)."""
    id, title, template, params = "slow", "Slow", None, ()
    reads = ()

    def __init__(self):
        self.built_with = []

    def build(self, lm, state):
        self.built_with.append(state["merges"])
        for _ in range(state["merges"]):
            state.check_time("merges")
            state.deadline.end -= limits.REQUEST_SECONDS / 10    # each step: 1/10 of it
        return {"n": state["merges"]}


def test_over_the_time_budget_the_control_says_so_and_the_default_is_shown(app):
    from web.core.views import build_in_budget
    with app.test_request_context("/?merges=40"):
        state = parse_state(b"merges=40", all_params())
        section = SlowSection()
        ctx = build_in_budget(app.extensions["explainer"].default_model, state, section)
    default = state.params["merges"].default
    assert section.built_with == [40, default]
    assert ctx == {"n": default}
    assert state.status == 422
    assert f"{limits.REQUEST_SECONDS:g} s" in state.errors["merges"]


def test_the_deadline_starts_with_the_request_and_is_not_the_states(app):
    from web.core.params import Query
    from web.core.request_state import current_state, deadline
    with app.test_request_context("/?merges=3"):
        _, state = current_state()
        budget = deadline()
        assert 0 < budget.left() <= limits.REQUEST_SECONDS
        assert deadline() is budget                # one budget per request
        assert not hasattr(state, "deadline")      # the State is the values alone
        query = Query(state, budget)
        query.check_time("merges")                 # within budget: no exception
        budget.end -= limits.REQUEST_SECONDS + 1
        with pytest.raises(limits.OverBudget):
            query.check_time("merges")
    with app.test_request_context("/"):
        assert deadline() is not budget            # the next request starts its own


# --- the overload gate ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def tight_app(model):
    """An app whose gate has one slot and no waiting room. One for the module: each test takes
    and gives back the gate's slot itself, and a section's caches (its timings) are made once,
    not again for each path."""
    from app import create_app
    return create_app({"MODEL": model, "TESTING": True, "PROBE_ENCODINGS": False,
                       "WARM_CACHES": False,
                       "GATE_SLOTS": 1, "GATE_WAITING": 0, "GATE_WAIT_SECONDS": 5.0})


@pytest.mark.parametrize("path", ["/"] + [f"/section/{i}" for i in SECTION_IDS])
def test_overload_is_a_fast_503_with_a_message(tight_app, path):
    gate = tight_app.extensions["explainer_gate"]
    client = tight_app.test_client()
    gate.acquire()                               # another request is computing
    try:
        start = time.monotonic()
        r = client.get(path, headers=HX)
        elapsed = time.monotonic() - start
        assert r.status_code == 503 and elapsed < 1.0   # no wait: the waiting room is full
        assert r.mimetype == "text/plain" and text_of(r) == limits.BUSY_MESSAGE
        assert r.headers["Retry-After"] == str(limits.RETRY_AFTER_SECONDS)
        page = client.get(path)
        assert page.status_code == 503 and limits.BUSY_MESSAGE in html.unescape(text_of(page))
        assert page.headers["Content-Security-Policy"]
        # files are not gated
        for asset in ("/static/figures.js", "/vendor/htmx.min.js"):
            a = client.get(asset)
            assert a.status_code == 200
            a.close()
    finally:
        gate.release()
    assert client.get(path, headers=HX).status_code == 200


def test_a_slot_is_given_back_after_errors(tight_app):
    client = tight_app.test_client()
    for _ in range(3):
        assert client.get("/section/nope").status_code == 404
        assert client.get("/section/tokenization?merges=abc", headers=HX).status_code == 400
    assert client.get("/section/tokenization", headers=HX).status_code == 200


def test_gate_waits_briefly_then_refuses():
    gate = limits.Gate(slots=1, waiting=1, wait=0.05)
    gate.acquire()
    start = time.monotonic()
    with pytest.raises(limits.Busy):
        gate.acquire()
    assert 0.04 <= time.monotonic() - start < 1.0
    gate.release()
    with gate:
        pass


# --- security headers and inert text --------------------------------------------------------

def _csp(header: str) -> dict:
    out = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


HEADER_PATHS = (["/", "/?prompt=", "/?merges=abc", "/section/nope", "/static/figures.js",
                 "/vendor/plotly.min.js", "/static/style.css"]
                + [f"/section/{i}" for i in SECTION_IDS])


@pytest.mark.parametrize("path", HEADER_PATHS)
def test_security_headers_on_every_response(client, path):
    r = client.get(path)
    r.close()
    csp = _csp(r.headers["Content-Security-Policy"])
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"]                 # no inline script, no eval
    assert csp["style-src"] == ["'self'", "'unsafe-inline'"]   # Plotly's <style> (app.py)
    assert csp["img-src"] == ["'self'", "data:"]           # Plotly's heatmap images (app.py)
    assert csp["connect-src"] == ["'self'"]
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert csp["base-uri"] == ["'none'"]
    assert not re.search(r"https?:|\*|blob:", r.headers["Content-Security-Policy"])
    assert [k for k, v in csp.items() if "data:" in v] == ["img-src"]
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Referrer-Policy"] == "no-referrer"


HOSTILE = ['<img src=x onerror=alert(1)>', '<script>alert(1)</script>',
           '"><svg onload=alert(1)>', "javascript:alert(1)", "'><a href=javascript:alert(1)>x",
           "</textarea><script>alert(1)</script>", "{{ 7*7 }} {% raw %}", "\u202e<b>rtl</b>"]


def assert_inert(markup: str):
    """Nothing in the markup can run: no element or attribute the server did not write."""
    dom = DOM(markup)
    for n in dom.nodes:
        assert not any(k.startswith("on") for k in n.attrs), describe(n)
        assert not (n.tag == "b" and "rtl" in n.text()), "an injected <b> element"
        if n.tag == "script":
            assert n.attrs.get("src", "").startswith("/") and not n.text().strip()
        for k in ("href", "src", "action", "hx-get", "formaction"):
            assert not (n.attrs.get(k) or "").strip().lower().startswith("javascript:"), \
                describe(n)
    return dom


@pytest.mark.parametrize("path,text", [("/", t) for t in HOSTILE]
                         + [(f"/section/{i}", t) for i in SECTION_IDS for t in HOSTILE[1:3]])
def test_hostile_prompt_is_inert_text(client, path, text):
    prompt = f"Mr. Darcy said {text} and left."
    r = client.get(url(path, prompt=prompt), headers=HX if path != "/" else {})
    assert r.status_code == 200
    dom = assert_inert(text_of(r))
    if path == "/":                            # the prompt box holds the text, as text
        assert dom.by_id["prompt-input"].text() == prompt
    push = r.headers.get("HX-Push-Url")
    if push is not None:
        assert push.startswith("/?") and push.isascii() and not re.search(r"[<>\"'\s]", push)
        assert urllib.parse.parse_qs(push[2:])["prompt"] == [prompt]


@pytest.mark.parametrize("section,param", TEXTS, ids=[f"{s.id}-{p.name}" for s, p in TEXTS])
def test_hostile_text_in_every_text_parameter_is_inert(client, section, param):
    for text in HOSTILE:
        r = client.get(url(f"/section/{section.id}", **{param.name: text}), headers=HX)
        assert r.status_code < 500
        assert_inert(text_of(r))


# --- start-up: a bad model directory is one clear line, no traceback ----------------------

def _run_app(*args, env=None):
    return subprocess.run([sys.executable, "app.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def _copy_model(tmp_path, skip=()):
    import shutil

    from pipeline import DEFAULT_MODEL_DIR
    d = tmp_path / "model"
    d.mkdir()
    for name in os.listdir(DEFAULT_MODEL_DIR):
        if name not in skip and os.path.isfile(os.path.join(DEFAULT_MODEL_DIR, name)):
            shutil.copy(os.path.join(DEFAULT_MODEL_DIR, name), d / name)
    return d


def _bad_models(tmp_path):
    """(directory, the file the message must name) for each way a model directory breaks."""
    yield tmp_path / "nowhere", "nowhere"
    empty = tmp_path / "empty"
    empty.mkdir()
    yield empty, "config.json"
    d = _copy_model(tmp_path, skip=("model.safetensors",))
    yield d, "model.safetensors"
    weights = d / "model.safetensors"
    from pipeline import DEFAULT_MODEL_DIR
    weights.write_bytes(open(os.path.join(DEFAULT_MODEL_DIR, "model.safetensors"), "rb")
                        .read()[:5000])            # truncated
    yield d, "model.safetensors"
    (d / "config.json").write_text("{not json")
    yield d, "config.json"


def test_a_bad_model_directory_stops_start_up_with_one_clear_message(tmp_path):
    from web_support import has_default_model
    if not has_default_model():
        pytest.skip("no default model to copy")
    for directory, named in _bad_models(tmp_path):
        run = _run_app("--model", str(directory), "--port", "1")
        assert run.returncode == 2, run.stderr
        assert "Traceback" not in run.stderr and named in run.stderr, run.stderr
        assert run.stderr.startswith("app.py: cannot load the model: ")
        assert run.stdout == ""                   # it never claims to be serving
    run = _run_app("--port", "1", env={"LLM_EXPLAINER_MODEL": str(tmp_path / "nowhere")})
    assert run.returncode == 2 and "nowhere" in run.stderr and "Traceback" not in run.stderr


def test_app_py_sets_one_blas_thread_before_numpy_is_imported():
    spy = ("import os, sys\n"
           "seen = []\n"
           "class Spy:\n"
           "    def find_spec(self, name, path=None, target=None):\n"
           "        if name == 'numpy': seen.append(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
           "sys.meta_path.insert(0, Spy())\n"
           "import app\n"
           "print(seen[0], os.environ['OMP_NUM_THREADS'])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",
                                                             "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", spy], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.stdout.split() == ["1", "1"], out.stderr
    env["OPENBLAS_NUM_THREADS"] = "2"              # an explicit choice wins
    out = subprocess.run([sys.executable, "-c", spy], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.stdout.split()[0] == "2", out.stderr


# --- accessibility of the rendered page -------------------------------------------------------

PAGE_STATES = [{}, {"prompt": "Emma <b>Woodhouse</b>, handsome, clever, and rich"},
               {"merges": "abc"}, {"prompt": ""}]


@pytest.fixture(params=PAGE_STATES, ids=["default", "html-prompt", "bad-value", "no-prompt"])
def page_dom(client, request):
    return DOM(text_of(client.get(url("/", **request.param))))


def test_ids_are_unique_with_every_section_computed(client):
    """The first screen computes two sections; every section's ids, computed together, are
    unique too (a note once took its control's id, q-bits, and a locator found two)."""
    for query in PAGE_STATES[:3]:
        dom = DOM(text_of(client.get(url("/", **query), headers=every_section())))
        # an out-of-band element replaces its namesake in the page: not a second id there
        ids = [n.attrs["id"] for n in dom.nodes if n.attrs.get("id")
               and "hx-swap-oob" not in n.attrs]
        assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_control_has_an_accessible_name(page_dom):
    unnamed = [describe(el) for el in controls(page_dom) if not accessible_name(page_dom, el)]
    assert controls(page_dom) and unnamed == []


def test_every_reference_to_an_id_exists_and_ids_are_unique(page_dom):
    ids = [n.attrs["id"] for n in page_dom.nodes if n.attrs.get("id")]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for n in page_dom.nodes:
        for attr in ("aria-labelledby", "aria-describedby", "aria-controls", "for"):
            for ref in (n.attrs.get(attr) or "").split():
                assert ref in page_dom.by_id, f"{describe(n)} {attr}={ref!r}: no such id"


def test_headings_go_down_one_level_at_a_time(page_dom):
    levels = [int(n.tag[1]) for n in page_dom.nodes if re.fullmatch(r"h[1-6]", n.tag)]
    assert levels[0] == 1 and levels.count(1) == 1
    for before, after in zip(levels, levels[1:], strict=False):
        assert after <= before + 1, f"h{before} followed by h{after}"


def test_every_section_is_a_labelled_region_with_live_updates(client):
    dom = DOM(text_of(client.get("/", headers=every_section())))
    for s in SECTIONS:
        node = dom.by_id.get(s.id)
        assert node is not None and node.tag == "section", s.id
        heading = dom.by_id.get(node.attrs.get("aria-labelledby"))
        assert heading is not None and heading.tag == "h2" and s.title in heading.text()
        live = [n for n in node.walk() if n.attrs.get("aria-live") == "polite"
                and "error" not in (n.attrs.get("class") or "")]
        assert live, f"{s.id}: no aria-live region for its updating results"


def test_a_control_that_redraws_a_part_fills_a_live_region_that_stays(client):
    """A control that updates one part of its section swaps the part's content (innerHTML),
    and the part is a polite live region (the `part` macro makes it so): the region stays in
    the page, so a screen reader says what the control changed. Inside a part, only a part
    nested in it, a status line, a message or a prediction's reveal (which the page's script
    fills) is a live region too: a swap says nothing twice."""
    dom = DOM(text_of(client.get("/", headers=every_section())))
    targets = 0
    for n in dom.nodes:
        target = (n.attrs.get("hx-target") or "").lstrip("#")
        section = n.attrs.get("hx-get", "").split("/section/")[-1].split("?")[0]
        if "/section/" not in n.attrs.get("hx-get", "") or target in ("", "this", section):
            continue
        part = dom.by_id.get(target)
        assert part is not None, f"{describe(n)}: hx-target #{target} is not on the page"
        assert n.attrs.get("hx-swap") == "innerHTML", describe(n)
        assert part.attrs.get("aria-live") == "polite", f"part #{target} is not a live region"
        nested = [m for m in part.walk() if m is not part and m.attrs.get("aria-live") == "polite"
                  and m.attrs.get("role") != "status"
                  and not {"error", "part", "predict-reveal"}
                  & set((m.attrs.get("class") or "").split())]
        assert not nested, f"#{target} holds another live region: {describe(nested[0])}"
        targets += 1
    assert targets >= 20


def test_every_figure_has_a_text_alternative(client):
    dom = DOM(text_of(client.get("/")))
    plots = [n for n in dom.nodes if "data-figure" in n.attrs]
    assert plots
    for n in plots:
        assert n.attrs.get("role") == "img" and (n.attrs.get("aria-label") or "").strip(), \
            describe(n)


@pytest.mark.parametrize("section", SECTIONS, ids=SECTION_IDS)
def test_a_section_answer_is_not_refused_for_another_sections_value(client, section):
    """The whole form goes with every section request: a bad value elsewhere is not this
    section's error (its message would have nowhere to go here)."""
    others = [p for s, p in INTS if s is not section]
    if not others:
        pytest.skip("only one section with a number parameter")
    r = client.get(url(f"/section/{section.id}", **{others[0].name: "not-a-number"}), headers=HX)
    assert r.status_code == 200 and "HX-Push-Url" in r.headers
    own = [p for p in section.params if p.kind in ("int", "float")]
    if own:
        r = client.get(url(f"/section/{section.id}", **{own[0].name: "not-a-number"}),
                       headers=HX)
        assert r.status_code == 400 and error_message(text_of(r), own[0].name)
