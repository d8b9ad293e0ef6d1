"""One decode step, one value on the whole page: every section that quotes a time reads it from
the model's one cost table (web.model_state.measured.cost_table), for both models. Renders every
timing
section with its disclosures open, collects every time quoted from the table (span.cost: what,
at how many tokens, the value shown) and fails if two places print different values for the
same thing at the same length, or a value other than the table's."""
import collections
import html
import re

import pytest

from web.model_state.measured import cost_table
from web_support import HX, text_of, url

PROMPTS = ("It is a truth universally acknowledged, that a single man in possession",
           "Emma Woodhouse, handsome, clever, and rich")
# each timing section, with the disclosures that hold its times open
SECTIONS = {"generation": dict(gen_step="1", open="gen-prefill"),
            "kvcache": dict(open="kv-how"),
            "roofline": dict(open="rf-chips"),
            "batching": dict(open="bat-requests"),
            "speculative": dict(open="spec-rule")}
COST = re.compile(r'<span class="cost"[^>]*data-what="([^"]+)" data-at="(\d+)" '
                  r'data-ms="([^"]+)">(.*?)</span>', re.S)


# SmolLM2's half runs in the "smollm2" group (tests/conftest.py): on the worker that has loaded
# it and measured its cost table already
IN_SMOLLM2_GROUP = pytest.mark.xdist_group("smollm2")


@pytest.fixture(scope="module",
                params=["austen", pytest.param("smollm2", marks=IN_SMOLLM2_GROUP)])
def loaded(request):
    """(test client, LoadedModel, the query naming it) for each model the page offers: the
    session's apps (tests/conftest.py), SmolLM2 loaded once for every test that reads it."""
    if request.param == "austen":
        app = request.getfixturevalue("app")
        lm, query = app.extensions["explainer"].default_model, {}
    else:
        app = request.getfixturevalue("smol_app")
        lm, query = app.extensions["explainer"].models["smollm2"], {"model": "smollm2"}
    with app.app_context():
        yield app.test_client(), lm, query


@pytest.fixture(scope="module")
def rendered(loaded):
    """{(prompt, section id): its HTML}, every timing section for every prompt."""
    client, lm, query = loaded
    pages = {}
    for prompt in PROMPTS:
        for sid, extra in SECTIONS.items():
            r = client.get(url(f"/section/{sid}", prompt=prompt, **query, **extra),
                           headers={**HX, "HX-Target": sid})
            assert r.status_code == 200, (sid, r.status_code)
            pages[prompt, sid] = text_of(r)
    return pages


def quotes(page: str) -> list:
    """[(what, at, value shown in data-ms, the visible text)] of every time quoted from the
    cost table."""
    return [(what, int(at), ms, " ".join(html.unescape(re.sub(r"<[^>]+>", "", inner)).split()))
            for what, at, ms, inner in COST.findall(page)]


def test_one_decode_step_has_one_value_on_the_whole_page(loaded, rendered):
    client, lm, _ = loaded
    seen = collections.defaultdict(set)             # (what, at) -> {value}
    where = collections.defaultdict(set)            # (what, at) -> {section}
    for (_prompt, sid), page in rendered.items():
        for what, at, ms, text in quotes(page):
            seen[what, at].add(ms)
            where[what, at].add(sid)
            assert f"{ms} ms" in text                # what is read is what data-ms says
    clashes = {k: (v, where[k]) for k, v in seen.items() if len(v) > 1}
    assert not clashes, clashes
    table = cost_table(lm)
    # not vacuous: the decode step after each prompt is quoted by the generation loop, the KV
    # cache and the roofline; the one at the table's pass length by batching and speculative
    for prompt in PROMPTS:
        n = len(lm.tokenizer.encode_ordinary(prompt))
        assert {"generation", "kvcache", "roofline"} <= where["one decode step", n], n
    assert {"batching", "speculative"} <= where["one decode step", table.pass_context]


def test_every_quoted_time_is_the_tables(loaded, rendered):
    client, lm, _ = loaded
    table = cost_table(lm)
    read = {"one decode step": table.decode_at, "a prefill": table.prefill_at}
    for (_prompt, sid), page in rendered.items():
        found = quotes(page)
        assert found, sid
        for what, at, ms, text in found:
            e = read[what](at)
            assert ms == e.shown, (sid, what, at)
            if text.startswith(what):               # the long form says how it was read
                assert text == (f"{what} at {at} tokens, from the cost table: {e.shown} ms "
                                f"({e.how()})"), (sid, text)


def cell(page: str, cell_id: str) -> str:
    m = re.search(r'<td id="%s"[^>]*>(.*?)</td>' % cell_id, page, re.S)
    assert m, cell_id
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).split())


def test_the_decode_steps_printed_in_cells_are_the_tables_too(loaded, rendered):
    """Where a decode step stands in a table cell of its own (the generation table, the
    speculative table, batching's step costs), it is the same value, printed the same way."""
    client, lm, _ = loaded
    table = cost_table(lm)
    step = table.decode_at(table.pass_context)
    for prompt in PROMPTS:
        n = len(lm.tokenizer.encode_ordinary(prompt))
        gen = rendered[prompt, "generation"]
        assert cell(gen, "decode-ms").startswith(f"{table.decode_at(n).shown} ms (")
        assert cell(gen, "prefill-ms").startswith(f"{table.prefill_at(n).shown} ms (")
        assert cell(rendered[prompt, "speculative"], "sp-step") == f"{step.shown} ms"
        bat = rendered[prompt, "batching"]
        first = re.search(r'aria-label="Measured step costs">.*?<tbody>\s*<tr><td>1</td><td>'
                          r'([^<]+)</td>', bat, re.S).group(1)
        assert first == step.shown == table.batch[1].shown


def test_every_template_that_quotes_the_table_is_rendered_here():
    """A section whose template quotes the cost table is one this module renders and checks."""
    import os
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "templates", "sections")
    quoting = set()
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            if 'from "cost.html" import' in f.read():
                quoting.add(name.removesuffix(".html"))
    assert quoting == set(SECTIONS)
