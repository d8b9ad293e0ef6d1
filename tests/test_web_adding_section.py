"""A section is its own files plus one line in the registry (README "Adding a section"): a
section written here, in a temporary directory (its module sections/tiny.py, which declares its
SECTION, and its template sections/tiny.html), with its name added to web.core.registry.MODULES and
nothing else, is on the page, in the nav, at /section/<id>, in the tour and in the URL's validated
state. Without that line there is no such section."""
import importlib
import os
import re
import sys
import urllib.parse

import pytest
from jinja2 import ChoiceLoader, FileSystemLoader

import web.sections
from web.core import registry
from web.sections import Section
from web_support import HX, error_message, every_section, text_of, url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOUR = ("A section written by a test: its tour text lives in the SECTION of its module, next to "
        "its id, title, parameters and build function, and nowhere else in the app.")

MODULE = '''
from web.core.params import Param
from web.sections import Section

PARAMS = (Param("tiny_n", "Repeats", kind="int", default=2, min=1, max=5),)


def build(lm, state):
    ids = lm.tokenizer.encode_ordinary(state["prompt"])
    return dict(n_tokens=len(ids), repeats=state["tiny_n"], temperature=state["s_temp"])


SECTION = Section("tiny", "A tiny section", PARAMS, build, tour=%r%s)
'''

TEMPLATE = '''{% from "macros.html" import control %}
<section id="{{ section.id }}" class="section" aria-labelledby="{{ section.id }}-h">
  <h2 id="{{ section.id }}-h"><span class="num">{{ num }}</span> {{ section.title }}</h2>
{% if "prompt" not in state.errors %}
  <div class="controls">{{ control(state, section.id, "tiny_n", None, kind="number") }}</div>
  <p id="tiny-count">{{ n_tokens }} tokens, shown {{ repeats }} times at T={{ temperature }}</p>
{% endif %}
</section>
'''


def write_tiny(tmp_path, monkeypatch, app, declared: str = ""):
    """The files of the section `tiny`, in tmp_path only: its module, which the package
    web.sections finds there as web.sections.tiny, and its template, which the app finds there
    as sections/tiny.html. `declared`: more arguments of its Section."""
    (tmp_path / "sections").mkdir()
    (tmp_path / "sections" / "tiny.py").write_text(MODULE % (TOUR, declared))
    (tmp_path / "templates" / "sections").mkdir(parents=True)
    (tmp_path / "templates" / "sections" / "tiny.html").write_text(TEMPLATE)
    monkeypatch.setattr(web.sections, "__path__",
                        [*web.sections.__path__, str(tmp_path / "sections")])
    monkeypatch.setattr(app, "jinja_loader",
                        ChoiceLoader([FileSystemLoader(str(tmp_path / "templates")),
                                      app.jinja_loader]))
    importlib.invalidate_caches()


def register_tiny(monkeypatch):
    """The one line of the registry: its name, last in MODULES."""
    monkeypatch.setattr(registry, "MODULES", (*registry.MODULES, "tiny"))
    return registry.section("tiny")


@pytest.fixture(autouse=True)
def forget_tiny():
    yield
    sys.modules.pop("web.sections.tiny", None)
    if hasattr(web.sections, "tiny"):
        delattr(web.sections, "tiny")


@pytest.fixture()
def tiny(tmp_path, monkeypatch, app):
    """The section `tiny`: its own files, and its line in the registry."""
    write_tiny(tmp_path, monkeypatch, app)
    return register_tiny(monkeypatch)


def test_a_section_needs_its_tour_text():
    with pytest.raises(TypeError, match="tour"):
        Section("x", "X", (), lambda lm, state: {})


def test_its_template_follows_from_its_id(tiny):
    assert tiny.template == "sections/tiny.html"
    assert tiny.tour == TOUR and tiny.reads == ()
    assert registry.sections()[-1] is tiny


def test_every_section_module_declares_its_section():
    for name, s in zip(registry.MODULES, registry.sections(), strict=True):
        assert s is importlib.import_module(f"web.sections.{name}").SECTION
        assert s.id == name and s.template == f"sections/{name}.html"


def test_the_sampler_is_declared_by_the_sampling_section_only():
    from web.sections import sampling
    owners = {p.name: s.id for s in registry.sections() for p in s.params}
    assert {owners[name] for name in sampling.SAMPLER} == {"sampling"}
    readers = {s.id: s.reads for s in registry.sections() if s.reads}
    assert readers == {"decoding": sampling.SAMPLER, "generation": sampling.SAMPLER,
                       "chat": sampling.SAMPLER}


def test_a_registered_section_is_in_the_page_the_nav_and_the_tour(client, tiny, model):
    n = len(registry.sections())                   # the tiny section's place: last
    page = text_of(client.get("/"))
    assert '<li><a href="#tiny">A tiny section</a></li>' in page
    placeholder = re.search(r'<section id="tiny" class="section lazy"[^>]*>', page)
    assert placeholder and 'hx-get="/section/tiny"' in placeholder.group(0)
    assert re.search(r'<li class="tour-step" data-step="%d" data-target="tiny"' % (n + 1), page)
    assert TOUR in page
    assert page.count('class="tour-step"') == n + 1

    # the tour opens at its step (one past the registered sections: a 422 without it)
    r = client.get(url("/", tour=n + 1))
    assert r.status_code == 200
    assert re.search(r'<li class="tour-step" data-step="%d" data-target="tiny">' % (n + 1),
                     text_of(r))

    # a prompt change with every section on screen computes it, numbered in page order
    prompt = "It is a truth universally acknowledged"
    r = client.get(url("/", prompt=prompt), headers=every_section())
    body = text_of(r)
    assert r.status_code == 200
    n_tokens = len(model.tokenizer.encode_ordinary(prompt))
    assert f'<p id="tiny-count">{n_tokens} tokens, shown 2 times at T=0.8</p>' in body
    assert f'<span class="num">{n + 1}</span> A tiny section' in body


def test_a_registered_section_has_its_route_and_its_values_are_validated(client, tiny):
    r = client.get(url("/section/tiny", tiny_n=4), headers=HX)
    assert r.status_code == 200
    body = text_of(r)
    assert "shown 4 times at T=0.8</p>" in body and 'id="tiny-n"' in body
    pushed = urllib.parse.parse_qs(r.headers["HX-Push-Url"][2:])
    assert pushed["tiny_n"] == ["4"]                   # its value is part of the page's URL

    r = client.get(url("/section/tiny", tiny_n=9), headers=HX)
    assert r.status_code == 422
    assert error_message(text_of(r), "tiny_n") == "Repeats must be between 1 and 5; got 9."
    assert "shown 9 times" not in text_of(r)

    r = client.get(url("/section/tiny", tiny_n="many"), headers=HX)
    assert r.status_code == 400
    assert "Repeats must be a whole number" in error_message(text_of(r), "tiny_n")

    # the whole page shows its message too, and computes it so the message is next to it
    r = client.get(url("/", tiny_n=0))
    assert r.status_code == 422
    assert error_message(text_of(r), "tiny_n") == "Repeats must be between 1 and 5; got 0."


def test_without_its_line_in_the_registry_there_is_no_such_section(client, tmp_path,
                                                                  monkeypatch, app):
    write_tiny(tmp_path, monkeypatch, app)             # its files, but not its line
    assert registry.section("tiny") is None
    assert client.get("/section/tiny").status_code == 404
    assert 'href="#tiny"' not in text_of(client.get("/"))


def test_a_section_that_reads_another_sections_parameters_says_so(client, tmp_path,
                                                                  monkeypatch, app):
    """reads=: the value keys its cached result and it can follow its owner's changes; the
    owner's messages are the owner's to show (its answer's status is its own)."""
    write_tiny(tmp_path, monkeypatch, app, declared=', reads=("s_temp",)')
    tiny = register_tiny(monkeypatch)
    for t in ("0.5", "0.7"):                           # not the first value's cached result
        r = client.get(url("/section/tiny", s_temp=t), headers=HX)
        assert r.status_code == 200 and f"shown 2 times at T={t}</p>" in text_of(r)
    assert client.get(url("/section/tiny", s_temp=-1), headers=HX).status_code == 200
    assert tiny in registry.readers(registry.section("sampling"))
    # the sampler's parameters are also set by the overview's controls (sampler-moved)
    assert registry.refresh_trigger(tiny) == "sampling-changed from:body, sampler-moved from:body"


def test_a_section_can_show_the_messages_of_what_it_reads(client, tmp_path, monkeypatch, app):
    write_tiny(tmp_path, monkeypatch, app, declared=', reads=("s_temp",), shows_read_messages=True')
    register_tiny(monkeypatch)
    assert client.get(url("/section/tiny", s_temp=-1), headers=HX).status_code == 422


def slim_map(page: str) -> str:
    return re.search(r'<nav id="ov-map".*?</nav>', page, re.S).group(0)


def test_a_section_names_itself_in_the_slim_map(client, tiny):
    """The overview's slim map takes a section's names from its Section: its title, or
    `short=`, and on a narrow screen `shorter=` (next test); nothing else lists them."""
    assert slim_map(text_of(client.get("/"))).endswith(
        '<li><a href="#tiny">A tiny section</a></li></ol>\n    </nav>')


def test_a_section_can_declare_short_names_for_the_slim_map(client, tmp_path, monkeypatch, app):
    write_tiny(tmp_path, monkeypatch, app, declared=', short="Tiny", shorter="T"')
    assert register_tiny(monkeypatch).map_names() == ("Tiny", "T")
    assert slim_map(text_of(client.get("/"))).endswith(
        '<li><a href="#tiny" aria-label="Tiny"><span class="ov-map-long">Tiny</span>'
        '<span class="ov-map-short" aria-hidden="true">T</span></a></li></ol>\n    </nav>')


def test_the_slim_map_shows_each_sections_declared_names(client):
    entries = re.findall(r'<li><a href="#([\w-]+)"(?: aria-label="([^"]*)")?>(.*?)</a></li>',
                         slim_map(text_of(client.get("/"))))
    names = {sid: (label, re.sub(r"<[^>]+>", "|", inner)) for sid, label, inner in entries}
    assert list(names) == ["prompt"] + [s.id for s in registry.sections()]
    assert names["prompt"] == ("", "Prompt")
    assert names["block"] == ("", "Block")                   # short=, no narrow form
    assert names["decoding"] == ("Beam search", "|Beam search||Beams|")
    assert names["kvcache"] == ("KV cache", "|KV cache||KV|")    # the title, and shorter=
    assert names["sampling"] == ("", "Sampling")               # the title alone


def test_no_style_rule_lists_sections_by_id():
    """A section's look comes from classes its box sets (section_box: "section", and the
    `class` its template passes), so a new section needs no line in static/style.css."""
    ids = {s.id for s in registry.sections()}
    with open(os.path.join(ROOT, "static", "style.css"), encoding="utf-8") as f:
        css = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    selectors = [sel for sel in re.findall(r"([^{}]+)\{", css) if not sel.strip().startswith("@")]
    named = [set(re.findall(r"#([\w-]+)", sel)) & ids for sel in selectors]
    assert any(n == {"decoding"} for n in named)          # a section's own detail stays
    assert [sorted(n) for n in named if len(n) > 1] == []
