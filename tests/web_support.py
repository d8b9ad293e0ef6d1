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
