"""The glossary (web/presentation/glossary.py): every term the page, the tour and the slides define
comes from
it, and the page defines each term once, at its first use (the `term` macro)."""
import glob
import html
import re

import pytest
from markupsafe import escape

from web.core.registry import SECTIONS
from web.presentation.glossary import ALIASES, GLOSSARY, PATTERNS, mark_first_uses
from web.presentation.tour import tour_steps
from web_support import every_section, text_of, url

TERM_CALL = re.compile(r"\bterm\((.*?)\)\s*}}")


def first_argument(args: str) -> str:
    quoted = False
    for i, c in enumerate(args):
        quoted = quoted != (c == '"')
        if c == "," and not quoted:
            return args[:i]
    return args


def term_keys_in_templates():
    """(file, key) of every glossary key a term() call in the templates can name (both of a
    conditional's keys; not the values it compares with)."""
    out = []
    for path in glob.glob("templates/**/*.html", recursive=True):
        for m in TERM_CALL.finditer(open(path, encoding="utf-8").read()):
            arg = first_argument(m.group(1))
            if arg.startswith("piece["):            # page.html: the tour's pieces (below)
                continue
            keys = [k for eq, k in re.findall(r'(==\s*)?"([^"]*)"', arg) if not eq]
            assert keys, f"{path}: term({m.group(1)}): the key is not written out"
            out += [(path, k) for k in keys]
    return out


def test_every_term_used_is_in_the_glossary_and_defined_briefly():
    used = term_keys_in_templates()
    assert len(used) >= 20
    for path, key in used:
        assert key in GLOSSARY, f"{path}: term({key!r}) is not in web/presentation/glossary.py"
    for key, text in GLOSSARY.items():
        assert text.strip() and len(text) <= 300, key
    assert set(ALIASES) <= set(GLOSSARY)


def test_the_terms_a_learner_meets_first_are_defined():
    for key in ("residual stream", "RMSNorm", "LayerNorm", "SwiGLU", "GELU",
                "grouped-query attention", "KV cache", "logits", "softmax", "temperature",
                "perplexity", "FLOP per byte", "roofline", "ridge point", "prefill", "decode",
                "quantization", "BPE", "embedding", "RoPE", "causal mask"):
        assert key in GLOSSARY


def test_a_term_is_marked_at_its_first_use_over_all_texts():
    pieces = mark_first_uses(["The residual stream grows.", "Each residual stream, and RoPE."])
    assert pieces[0] == [("text", "The "), ("term", "residual stream", "residual stream"),
                         ("text", " grows.")]
    assert pieces[1] == [("text", "Each residual stream, and "), ("term", "RoPE", "RoPE"),
                         ("text", ".")]
    assert not PATTERNS["decode"].search("decoding")      # whole words only


def test_the_tour_reads_its_definitions_from_the_glossary(client):
    steps = tour_steps(SECTIONS)
    marked = [p for s in steps for p in s.pieces if p[0] == "term"]
    keys = [p[2] for p in marked]
    assert len(keys) == len(set(keys))
    assert {"residual stream", "KV cache", "prefill", "roofline"} <= set(keys)
    for s in steps:                                   # the pieces are the text, unchanged
        assert "".join(p[1] for p in s.pieces) == s.text
    page = text_of(client.get(url("/", tour=1)))
    tour = page[page.index('<aside id="tour"'):]
    for key in keys:
        assert str(escape(GLOSSARY[key])) in tour, key
        assert tour.count(f'<span class="term" data-term="{key}">') == 1, key


def main_text(client):
    """The page as the reader meets it: the overview, then every section in page order."""
    page = text_of(client.get("/"))
    sections = text_of(client.get("/", headers=every_section()))
    head = page[page.index("<main>"):page.index('<div id="sections">')]
    return head + sections[sections.index(f'<section id="{SECTIONS[0].id}"'):]


# Text that cannot hold a button, so a term there is not yet its first use: links, buttons,
# labels, headings, disclosure summaries, options; and the definitions themselves.
NOT_RUNNING_TEXT = [r"<script\b.*?</script>", r"<!--.*?-->", r"<a\b.*?</a>",
                    r"<option\b.*?</option>", r'<span class="term-def".*?</span></span>',
                    r"<label\b.*?</label>", r"<summary\b.*?</summary>", r"<h[1-6]\b.*?</h[1-6]>"]


@pytest.mark.parametrize("key", ["residual stream", "RMSNorm", "SwiGLU",
                                 "grouped-query attention", "perplexity", "roofline", "KV cache",
                                 "prefill", "decode", "ridge point", "FLOP per byte"])
def test_the_page_defines_a_term_at_its_first_use_once_per_part(client, key):
    """Once in the overview and once in each section at most (a section is read on its own:
    tests/test_web_glossary_terms.py checks each one's first uses), with ids of its own; the
    first use on the page is marked."""
    doc = main_text(client)
    parts = re.split(r'(?=<section id=")', doc)
    assert max(p.count(f'<span class="term" data-term="{key}">') for p in parts) == 1, key
    ids = re.findall(r'<span class="term-def" role="tooltip" id="([^"]+)"', doc)
    assert len(ids) == len(set(ids))

    doc = re.sub(r'<button type="button" class="term-btn"[^>]*>(.*?)</button>',
                 lambda m: "\x01" + m.group(1) + "\x02", doc, flags=re.S)
    for pattern in NOT_RUNNING_TEXT:
        doc = re.sub(pattern, " ", doc, flags=re.S)
    doc = re.sub(r"<button\b.*?</button>", " ", doc, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", doc))
    first = PATTERNS[key].search(text)
    assert first, key
    assert text[first.start() - 1] == "\x01", \
        f"{key!r} is used before its definition: …{text[max(0, first.start() - 80):first.end()]}"


def test_a_definition_is_in_the_page_and_named_by_its_term(client):
    doc = main_text(client)
    for m in re.finditer(r'<button type="button" class="term-btn" aria-describedby="([^"]+)"', doc):
        assert f'id="{m.group(1)}"' in doc
    assert str(escape(GLOSSARY["residual stream"])) in doc
