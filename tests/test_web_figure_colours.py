"""One colour, one meaning, on the whole page: every trace of every section's figures (every
"Go deeper" disclosure open, and the classroom poll's chart) says which roles it draws
(web.figures.ROLES, through its `meta`), draws each in that role's colour, and a colour means
one role across the page's figures; series that are only "the i-th of a list" take the
categorical sequence (SERIES), which shares no colour with a role."""
import html
import json
import re

import pytest

from web.core.registry import SECTIONS
from web.figures import ROLES, SERIES
from web_support import HX, every_disclosure, text_of, url

SECTION_IDS = [s.id for s in SECTIONS]
SCALED = {"heatmap", "contour", "histogram2d", "histogram2dcontour", "image", "surface"}
# Neutral paints: white outlines and halos, transparent fills, not a meaning
NEUTRAL = {"white", "#ffffff", "rgba(0,0,0,0)", "transparent"}
# Names the page's text and legends give a role, wherever they appear: a trace named so draws
# that role (this is what old figures got wrong: the sampler's p orange in one chart and navy
# in the next, "attention" orange like every highlight).
NAMED = [
    (r"^the model's own|^T = 1(?![.\d])|: probability$", "MODEL_P"),
    (r"after the controls|^predicted probability|^T = (?!1\b)", "SAMPLER_P"),
    (r"seeded draws|^the class", "DRAWS"),
    (r"^embeddings$", "EMBEDDING"),
    (r"^attention \(", "ATTENTION"),
    (r"^feed-forward$", "FEED_FORWARD"),
    (r"^norms$", "NORMS"),
    (r"^target alone|^decode:", "DECODE"),
    (r"^target verifies", "TARGET"),
    (r"^prefill:|read the prompt|reads the prompt", "PREFILL"),
    (r"^greedy path$", "CHOICE"),
    (r"^best beam$", "HIGHLIGHT"),
]


def figures_of(page: str) -> list:
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]


def _colours(value) -> list:
    if value is None or isinstance(value, dict):        # a typed array: a colour scale's values
        return []
    if isinstance(value, str):
        return [value.lower()]
    return [c.lower() for c in value if isinstance(c, str)]


def trace_colours(trace: dict) -> set:
    """The colours a trace paints with (not a colour scale's, not white outlines)."""
    if trace.get("type") in SCALED:
        return set()
    marker, line = trace.get("marker") or {}, trace.get("line") or {}
    found = _colours(marker.get("color")) + _colours(line.get("color")) \
        + _colours(trace.get("fillcolor"))
    if "colorscale" in marker:                          # a marker coloured by value
        found = _colours(line.get("color"))
    return {c for c in found if c not in NEUTRAL}


def problems(figures: list) -> list:
    """What breaks "one colour, one meaning" in these figures ((where, figure title) first)."""
    role_of = {c.lower(): r for r, c in ROLES.items()}
    series = {c.lower() for c in SERIES}
    meanings, out = {}, []
    for where, fig in figures:
        title = (fig["layout"].get("title") or {}).get("text", "")
        for trace in fig["data"]:
            colours = trace_colours(trace)
            if not colours:
                continue
            name = trace.get("name") or ""
            declared = ((trace.get("meta") or {}).get("roles")) or []
            at = f"{where}: {title[:40]!r} trace {name!r}"
            if declared == ["SERIES"]:
                if not colours <= series:
                    out.append(f"{at}: a series drawn in {colours - series}")
                continue
            if not declared:
                out.append(f"{at}: no role declared for {sorted(colours)}")
            for r in declared:
                if r not in ROLES:
                    out.append(f"{at}: unknown role {r}")
            own = {ROLES[r].lower() for r in declared if r in ROLES}
            if declared and not colours <= own:
                out.append(f"{at}: {sorted(colours - own)} is not the colour of {declared}")
            for pattern, role in NAMED:
                if re.search(pattern, name) and ROLES[role].lower() not in colours:
                    out.append(f"{at}: named as {role}, drawn in {sorted(colours)}")
            for c in colours:
                if c not in role_of and c not in series:
                    out.append(f"{at}: {c} is no role's colour and not in SERIES")
                # what the colour means here: the declared role drawn in it (or, undeclared,
                # the trace's name)
                here = [r for r in declared if r in ROLES and ROLES[r].lower() == c]
                meanings.setdefault(c, set()).update(here or [f"{name!r}"])
    for c, m in meanings.items():
        if len(m) > 1:
            out.append(f"{c} carries {len(m)} meanings: {sorted(m)}")
    return out


def test_roles_and_series_are_all_different_colours():
    colours = [c.lower() for c in ROLES.values()] + [c.lower() for c in SERIES]
    assert len(colours) == len(set(colours))


def test_the_checker_catches_one_colour_with_two_meanings_and_a_role_off_colour():
    """The old Sampling section: after the controls in orange beside draws in orange."""
    bar = lambda name, colour, *r: dict(type="bar", name=name, marker=dict(color=colour),  # noqa
                                        meta=dict(roles=list(r)) if r else {})
    lay = dict(title=dict(text="t"))
    old = [("a", dict(data=[bar("after the controls: drawn from", ROLES["HIGHLIGHT"],
                                "HIGHLIGHT")], layout=lay)),
           ("b", dict(data=[bar("share of 1,000 seeded draws", ROLES["HIGHLIGHT"], "DRAWS")],
                          layout=lay))]
    found = "\n".join(problems(old))
    assert "named as SAMPLER_P" in found and "not the colour of ['DRAWS']" in found
    good = [("a", dict(data=[bar("after the controls: drawn from", ROLES["SAMPLER_P"],
                                 "SAMPLER_P"),
                             bar("share of 1,000 seeded draws", ROLES["DRAWS"], "DRAWS")],
                       layout=lay))]
    assert problems(good) == []
    two = [("a", dict(data=[bar("x", ROLES["DRAWS"], "DRAWS"), bar("y", ROLES["DRAWS"])],
                      layout=lay))]
    assert any("2 meanings" in p for p in problems(two))


def _open_everything(client, section: str, **params) -> str:
    """The section with every "Go deeper" disclosure of it open (`open=` the ids the templates
    write), so that figures drawn only while one is open are checked too."""
    page = text_of(client.get(url(f"/section/{section}", open=every_disclosure(), **params),
                              headers=HX))
    assert set(re.findall(r'data-deeper="[^"]+"( open)?>', page)) <= {" open"}, section
    return page


@pytest.fixture(scope="module")
def austen_figures(app):
    c = app.test_client()
    return {s: [(s, f) for f in figures_of(_open_everything(c, s))] for s in SECTION_IDS}


@pytest.mark.parametrize("section", SECTION_IDS)
def test_every_trace_draws_its_roles_in_their_colours(austen_figures, section):
    assert problems(austen_figures[section]) == []


def test_no_colour_carries_two_meanings_across_the_page(austen_figures):
    every = [f for figs in austen_figures.values() for f in figs]
    assert len(every) > 20
    assert problems(every) == []


def test_the_poll_chart_has_the_class_in_draws_and_the_model_in_model_p():
    from web.classroom.polls import ROLE_OF_BAR
    assert ROLE_OF_BAR == {"class": "DRAWS", "model": "MODEL_P"}


def test_the_overview_bars_are_the_sampler_and_model_colours(app):
    """static/style.css draws the overview's top-5 bars: thick the sampler's p, thin the model's
    softmax at T = 1, in those roles' colours (CSS custom properties named after the roles)."""
    import os
    css = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "static", "style.css"), encoding="utf-8").read()
    assert re.search(r"--sampler-p: " + ROLES["SAMPLER_P"] + ";", css)
    assert re.search(r"--model-p: " + ROLES["MODEL_P"] + ";", css)
    assert re.search(r"\.ov-cfill \{[^}]*background: var\(--sampler-p\)", css)
    assert re.search(r"\.ov-cbase \{[^}]*background: var\(--model-p\)", css)


def test_the_sampling_stage_bars_are_role_colours():
    from web.sections import sampling
    assert sampling.BAR_FINAL == ROLES["SAMPLER_P"]
    assert sampling.BAR_KEPT == ROLES["STAGE_P"]
    assert sampling.BAR_GONE == ROLES["REMOVED"]


@pytest.fixture()
def smol_client(smol_app):
    return smol_app.test_client()


def test_the_whole_page_draws_every_role_in_its_colour(app):
    """The page as it first loads: the overview's figures and every section's, together."""
    figs = [("page", f) for f in figures_of(text_of(app.test_client().get("/")))]
    assert len(figs) >= 5
    assert problems(figs) == []


@pytest.mark.parametrize("section", ["logits", "sampling", "block", "attention", "quantization"])
def test_smollm2_traces_draw_their_roles_in_their_colours(smol_client, section):
    figs = [(section, f) for f in figures_of(_open_everything(smol_client, section,
                                                              model="smollm2"))]
    assert figs
    assert problems(figs) == []
