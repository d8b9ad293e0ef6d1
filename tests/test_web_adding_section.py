"""A section is its own files plus one registry entry (README "Adding a section"): a section
written here, in a temporary directory (a module with PARAMS and build, and its template
sections/<id>.html), and registered into a copy of SECTIONS, is on the page, in the nav, at
/section/<id>, in the tour and in the URL's validated state, with nothing else changed."""
import importlib.util
import re
import urllib.parse

import pytest
from jinja2 import ChoiceLoader, FileSystemLoader

from web import registry
from web.registry import Section
from web_support import HX, app, client, error_message, every_section, model, text_of, url  # noqa: F401,E501

MODULE = '''
from web.params import Param

PARAMS = (Param("tiny_n", "Repeats", kind="int", default=2, min=1, max=5),)


def build(lm, state):
    ids = lm.tokenizer.encode_ordinary(state["prompt"])
    return dict(n_tokens=len(ids), repeats=state["tiny_n"])
'''

TEMPLATE = '''{% from "macros.html" import control %}
<section id="{{ section.id }}" class="section" aria-labelledby="{{ section.id }}-h">
  <h2 id="{{ section.id }}-h"><span class="num">{{ num }}</span> {{ section.title }}</h2>
{% if "prompt" not in state.errors %}
  <div class="controls">{{ control(state, section.id, "tiny_n", None, kind="number") }}</div>
  <p id="tiny-count">{{ n_tokens }} tokens, shown {{ repeats }} times</p>
{% endif %}
</section>
'''

TOUR = ("A section written by a test: its tour text lives in its registry entry, next to its "
        "id, title, template, parameters and build function, and nowhere else in the app.")


@pytest.fixture()
def tiny(tmp_path, monkeypatch, app):
    """The section `tiny`, registered last; its module and template exist only in tmp_path."""
    (tmp_path / "tiny_section.py").write_text(MODULE)
    (tmp_path / "templates" / "sections").mkdir(parents=True)
    (tmp_path / "templates" / "sections" / "tiny.html").write_text(TEMPLATE)
    spec = importlib.util.spec_from_file_location("tiny_section", tmp_path / "tiny_section.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    section = Section("tiny", "A tiny section", "sections/tiny.html", module.PARAMS,
                      module.build, tour=TOUR)
    monkeypatch.setattr(registry, "SECTIONS", registry.SECTIONS + (section,))
    monkeypatch.setattr(app, "jinja_loader",
                        ChoiceLoader([FileSystemLoader(str(tmp_path / "templates")),
                                      app.jinja_loader]))
    return section


def test_a_section_needs_its_tour_text():
    with pytest.raises(TypeError, match="tour"):
        Section("x", "X", "sections/x.html", (), lambda lm, state: {})


def test_a_registered_section_is_in_the_page_the_nav_and_the_tour(client, tiny, model):
    n = len(registry.SECTIONS)                     # the tiny section's place: last
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
    assert f'<p id="tiny-count">{n_tokens} tokens, shown 2 times</p>' in body
    assert f'<span class="num">{n + 1}</span> A tiny section' in body


def test_a_registered_section_has_its_route_and_its_values_are_validated(client, tiny):
    r = client.get(url("/section/tiny", tiny_n=4), headers=HX)
    assert r.status_code == 200
    body = text_of(r)
    assert "shown 4 times</p>" in body and 'id="tiny-n"' in body
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


def test_without_the_entry_there_is_no_such_section(client):
    assert client.get("/section/tiny").status_code == 404
    assert 'href="#tiny"' not in text_of(client.get("/"))
