"""Shared by tests/test_web_*.py: small readers of the rendered HTML. The fixtures `model`,
`app`, `client` and `server` are in tests/conftest.py (defined once, built once per run)."""
import html
import os
import re
import urllib.parse

from pipeline import DEFAULT_MODEL_DIR

HX = {"HX-Request": "true"}


def every_section() -> dict:
    """Headers of the request a prompt change makes when every section is loaded and near the
    screen: the answer holds every section computed (a first page computes only the first)."""
    from web.core.registry import sections
    return {**HX, "X-Sections": ",".join(s.id for s in sections())}


TEMPLATES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "templates")
# a "Go deeper" disclosure as a template writes it: the `deeper` macro called with its id
DEEPER_CALL = re.compile(r'\bdeeper\(state, "([a-z0-9-]+)"')


def every_disclosure() -> str:
    """The ids of every "Go deeper" disclosure the templates write (the `deeper` macro's calls,
    templates/macros.html), as the URL's `open` lists them: a page asked with them has each of
    its disclosures open, without a first load of the whole page to list them (an id the page
    lacks, a section's of another model, opens nothing). Asserted: every disclosure is the
    macro's (its <details class="deeper"> is written nowhere else) called with a written id, so
    none is missed; a test that relies on the list also checks that its page has none closed."""
    ids, calls, written = set(), 0, 0
    for folder, _, files in os.walk(TEMPLATES_DIR):
        for name in files:
            if name.endswith(".html"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    text = f.read()
                found = DEEPER_CALL.findall(text)
                ids.update(found)
                calls += len(re.findall(r"\bcall\b[^%]*?\bdeeper\(", text)) - len(found)
                written += len(re.findall(r"<details\b[^>]*\bclass=\"deeper\"", text))
    assert calls == 0, f"{calls} calls of the deeper macro without a written id in templates/"
    assert written == 1, f"<details class=\"deeper\"> written {written} times in templates/"
    assert len(ids) >= 30, f"only {len(ids)} disclosures found in {TEMPLATES_DIR}"
    return ",".join(sorted(ids))


MARKS = {"·": " ", "↵": "\n", "→": "\t", "␍": "\r"}


def has_default_model() -> bool:
    return os.path.exists(os.path.join(DEFAULT_MODEL_DIR, "model.safetensors"))


def url(path="/", **params) -> str:
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def text_of(response) -> str:
    return response.get_data(as_text=True)


def ordered_list(page: str, label: str) -> str:
    """The inner HTML of the <ol aria-label=label>."""
    m = re.search(r'<ol[^>]*aria-label="%s"[^>]*>(.*?)</ol>' % re.escape(label), page, re.S)
    assert m, f"no list labelled {label!r}"
    return m.group(1)


def chip_ids(page: str, label: str) -> list:
    return [int(i) for i in re.findall(r'<span class="tid">(\d+)</span>',
                                       ordered_list(page, label))]


def chip_texts(page: str, label: str) -> list:
    """Each chip's text as the reader sees it: marks turned back into the characters."""
    out = []
    for inner in re.findall(r'<span class="tok">(.*?)</span><span class="tid">',
                            ordered_list(page, label), re.S):
        inner = re.sub(r'<span class="mark (?:space|newline|tab|cr)"[^>]*>(.)</span>',
                       lambda m: MARKS[m.group(1)], inner)
        out.append(html.unescape(re.sub(r"<[^>]+>", "", inner)))
    return out


def error_message(page: str, name: str) -> str:
    m = re.search(r'<p class="error" id="error-%s"[^>]*>(.*?)</p>' % name, page, re.S)
    return html.unescape(m.group(1)).strip() if m else ""


def table_rows(page: str, label: str, headers: bool = False) -> list:
    """The body rows of the table labelled `label`, each a list of its cells' text: the <td>
    cells, or with headers=True the <th> cells too (a row's own header)."""
    m = re.search(r'<table[^>]*aria-label="%s"[^>]*>(.*?)</table>' % re.escape(label),
                  without_definitions(page), re.S)      # a glossary term's words, as they read

    assert m, f"no table labelled {label!r}"
    body = m.group(1).split("<tbody>", 1)[1]
    cell = r"<t[hd][^>]*>(.*?)</t[hd]>" if headers else r"<td[^>]*>(.*?)</td>"
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(cell, tr, re.S)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


TERM_DEFINITION = re.compile(r'<span class="term-def"[^>]*>.*?</span></span>', re.S)


def without_definitions(page: str) -> str:
    """The page without the glossary definitions the `term` macro puts beside a term's first
    use (templates/macros.html), so that a sentence reads as it is written."""
    return TERM_DEFINITION.sub("", page)


def reading_text(page: str) -> str:
    """The page's text as a sentence reads, without its markup or glossary definitions."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", without_definitions(page))))


def __getattr__(name):
    """`from web_support import app` (as the modules once did) fails with the reason."""
    if name in ("model", "app", "client", "server"):
        raise ImportError(f"{name} is a fixture of tests/conftest.py: take it as a test's "
                          "argument, do not import it (an imported fixture is built again for "
                          "each module)")
    raise AttributeError(f"module 'web_support' has no attribute {name!r}")
