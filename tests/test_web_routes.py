"""Routes: the page and each section's fragment agree; every bad value is a 4xx with a message
shown next to its control; state round-trips through the URL; nothing third-party from a CDN."""
import re
import urllib.parse

import pytest

from web.core import views
from web.core.registry import SECTIONS
from web_support import HX, error_message, text_of, url

STATES = [
    {},
    {"prompt": "Hello world"},
    {"prompt": "Mr. Darcy\n\tbowed.", "word": "2", "step": "1", "merges": "7",
     "bpe_text": "low lower lowest newer newest"},
]


@pytest.mark.parametrize("query", STATES)
@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.id)
def test_section_fragment_is_the_same_as_its_part_of_the_page(client, section, query):
    # the page after a prompt change, with this section loaded and near the screen
    page = client.get(url("/", **query), headers={**HX, "X-Sections": section.id})
    fragment = client.get(url(f"/section/{section.id}", **query), headers=HX)
    assert page.status_code == fragment.status_code == 200
    body = text_of(fragment)
    assert body.lstrip().startswith(f'<section id="{section.id}"')
    assert body in text_of(page)


def lazy_ids(page: str) -> list:
    return re.findall(r'<section id="([\w-]+)" class="section lazy"', page)


def test_first_page_computes_only_the_first_sections(app, client):
    builds = app.extensions["explainer"].builds
    builds.clear()
    page = text_of(client.get(url("/", prompt="A prompt no other test uses, for counting")))
    eager = [s.id for s in SECTIONS[:views.EAGER_SECTIONS]]
    assert set(builds) == set(eager) and all(n == 1 for n in builds.values())
    assert lazy_ids(page) == [s.id for s in SECTIONS[views.EAGER_SECTIONS:]]
    # each placeholder asks for its own section, with the page's state, when it nears the screen
    for s in SECTIONS[views.EAGER_SECTIONS:]:
        tag = re.search(r'<section id="%s"[^>]*>' % s.id, page).group(0)
        assert f'hx-get="/section/{s.id}"' in tag and 'hx-trigger="near"' in tag
        assert 'hx-include="#state"' in tag
    # its load computes that section alone, and pushes no history entry
    builds.clear()
    r = client.get(url("/section/kvcache", prompt="A prompt no other test uses, for counting"),
                   headers={**HX, "HX-Trigger": "kvcache"})
    assert r.status_code == 200 and set(builds) == {"kvcache"}
    assert "HX-Push-Url" not in r.headers


def test_prompt_change_computes_the_sections_on_screen(app, client):
    builds = app.extensions["explainer"].builds
    builds.clear()
    body = text_of(client.get(url("/", prompt="Another prompt, for counting builds"),
                              headers={**HX, "X-Sections": "attention,logits,nope"}))
    assert set(builds) == {"attention", "logits"}
    assert set(lazy_ids(body)) == {s.id for s in SECTIONS} - {"attention", "logits"}


def test_a_section_with_a_message_is_computed_on_the_first_page(client):
    r = client.get(url("/", kv_new="-3"))
    assert r.status_code in (400, 422)
    assert "kvcache" not in lazy_ids(text_of(r))
    assert error_message(text_of(r), "kv_new")


@pytest.mark.parametrize("query", STATES)
def test_prompt_change_fragment_is_the_page_sections(client, query):
    page = text_of(client.get(url("/", **query)))
    fragment = client.get(url("/", **query), headers=HX)   # no X-Sections: the first ones
    assert fragment.status_code == 200
    body = text_of(fragment)
    assert "<html" not in body
    # the out-of-band element clears the prompt's error message; the rest is the page's part
    oob = re.search(r'<p [^>]*hx-swap-oob="true"[^>]*>\s*</p>', body)
    assert oob and 'id="error-prompt"' in oob.group(0)
    rest = body.replace(oob.group(0), "").strip()
    # the overview comes out of band too, as the page has it above the sections
    overview = re.search(r'<section id="overview"[^>]*hx-swap-oob="true"[^>]*>.*?</section>',
                         rest, re.S)
    assert overview
    assert overview.group(0).replace(' hx-swap-oob="true"', "") in page.split(
        '<div id="sections">', 1)[0]
    rest = rest.replace(overview.group(0), "").strip()
    inner = page.split('<div id="sections">', 1)[1]
    assert rest.split("<section", 1)[1] in inner


def test_history_restore_request_gets_the_whole_page(client):
    r = client.get("/", headers={**HX, "HX-History-Restore-Request": "true"})
    assert r.status_code == 200 and "<html" in text_of(r)


def test_htmx_answers_push_the_canonical_url_and_vary(client):
    q = {"prompt": "Emma  woodhouse", "merges": "4", "unknown": "dropped"}
    r = client.get(url("/section/tokenization", **q), headers=HX)
    assert r.headers["HX-Push-Url"] == "/?" + urllib.parse.urlencode(
        {"prompt": "Emma  woodhouse", "merges": "4"}, quote_via=urllib.parse.quote)
    assert "HX-Request" in r.headers["Vary"]
    page = client.get(r.headers["HX-Push-Url"])
    assert page.status_code == 200 and "Emma  woodhouse" in text_of(page)
    # defaults are left out: the canonical URL of the default state is the bare page
    assert client.get("/section/tokenization", headers=HX).headers["HX-Push-Url"] == "/"
    assert "Vary" in client.get("/").headers


def test_prompt_change_drops_word_and_step(client):
    page = text_of(client.get("/"))
    m = re.search(r'hx-params="not ([\w,]+)"', page)
    assert m and {"word", "step"} <= set(m.group(1).split(","))


def test_unknown_section_is_404(client):
    assert client.get("/section/nope", headers=HX).status_code == 404


BAD = [
    # (query, parameter whose control shows the message)
    ({"prompt": ""}, "prompt"),
    ({"prompt": "   \n "}, "prompt"),
    ({"prompt": "a" * 2001}, "prompt"),
    ({"prompt": " a" * 300}, "prompt"),                   # 300 tokens > the 256-token context
    ({"prompt": "nul\x00byte"}, "prompt"),
    ("prompt=%ED%A0%80", "prompt"),                       # a lone surrogate, UTF-8 encoded
    ("prompt=%FF%FEbinary", "prompt"),                    # not UTF-8 at all
    ("prompt=a&prompt=b", "prompt"),                      # given twice
    ({"merges": "abc"}, "merges"),
    ({"merges": "2.5"}, "merges"),
    ({"merges": "-1"}, "merges"),
    ({"merges": "61"}, "merges"),
    ({"merges": "9" * 40}, "merges"),
    ({"merges": ""}, "merges"),
    ({"word": "x"}, "word"),
    ({"word": "500"}, "word"),                            # past the prompt's last word
    ({"word": "0", "step": "99"}, "step"),                # past the word's last merge
    ({"step": "-3"}, "step"),
    ({"bpe_text": ""}, "bpe_text"),
    ({"bpe_text": "b" * 2001}, "bpe_text"),
    ({"bpe_text": "bell\x07"}, "bpe_text"),
    ("bpe_text=%ED%B0%80", "bpe_text"),
]


def _query(q):
    return q if isinstance(q, str) else urllib.parse.urlencode(q)


@pytest.mark.parametrize("query,name", BAD, ids=[f"{n}-{i}" for i, (_, n) in enumerate(BAD)])
@pytest.mark.parametrize("path", ["/", "/section/tokenization"])
@pytest.mark.parametrize("htmx", [False, True], ids=["plain", "htmx"])
def test_bad_value_is_4xx_with_a_message_at_its_control(client, query, name, path, htmx):
    r = client.get(path + "?" + _query(query), headers=HX if htmx else {})
    assert 400 <= r.status_code < 500
    assert "HX-Push-Url" not in r.headers
    assert error_message(text_of(r), name), f"no message next to {name}"


def test_bad_prompt_keeps_the_typed_text_and_shows_no_sections(client):
    r = client.get("/?" + urllib.parse.urlencode({"prompt": "x" * 2001}))
    page = text_of(r)
    assert r.status_code == 422
    assert "2,001 characters" in error_message(page, "prompt")
    assert "x" * 2001 + "</textarea>" in page
    assert '<section id="tokenization"' not in page


def test_bad_section_value_leaves_the_rest_of_the_section(client):
    page = text_of(client.get("/?merges=abc"))
    assert "Tokens of the prompt" in page                   # chips still there
    assert "Merges learned" not in page                     # the learn-BPE result is not


def test_huge_query_is_refused_quickly(client):
    r = client.get("/?prompt=" + "a" * 70000)
    assert r.status_code == 400


def test_page_uses_no_cdn_and_no_inline_script(client):
    page = text_of(client.get("/"))
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, re.S)
    assert scripts and all('src="/' in attrs and not body.strip() for attrs, body in scripts)
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "script-src 'self'" in client.get("/").headers["Content-Security-Policy"]


@pytest.mark.parametrize("asset", ["/vendor/plotly.min.js", "/vendor/htmx.min.js",
                                   "/static/figures.js", "/static/style.css"])
def test_assets_are_served_locally(client, asset):
    r = client.get(asset)
    assert r.status_code == 200 and len(r.data) > 1000
    r.close()


def test_htmx_is_version_2(client):
    r = client.get("/vendor/htmx.min.js")
    assert re.search(rb'version:\s*"2\.0\.\d+"', r.data)
    r.close()
