"""A control that changes one part of a section is answered with that part rendered alone
(web/core/views.py part_wanted): the same HTML as the part cut from the whole section's render, for
every part of every section, with none of the other parts' content rendered (a part inside it
or around it aside)."""
from flask import g

from web.core import views
from web.core.registry import SECTIONS
from web.core.request_state import current_state
from web_support import HX, every_disclosure, url

PROMPT = "Mr. Bennet was among the earliest of those who waited on Mr. Bingley"


def whole_render_parts(app, section, query) -> dict:
    """part id -> its content, cut from the section rendered whole (no part asked for)."""
    with app.test_request_context(url(f"/section/{section.id}", **query), headers=HX):
        lm, state = current_state()
        g.rendered_parts, g.part_stack, g.only_part = {}, [], None
        views.render_section(lm, state, section)
        return dict(g.rendered_parts)


def part_alone(app, section, query, target) -> tuple:
    with app.test_request_context(url(f"/section/{section.id}", **query),
                                  headers={**HX, "HX-Target": target}):
        lm, state = current_state()
        return views.render_part(lm, state, section, target)


def test_a_part_alone_is_the_part_of_the_whole_render(app):
    query = {"prompt": PROMPT, "open": every_disclosure()}     # the parts inside them too
    seen = 0
    for section in SECTIONS:
        whole = whole_render_parts(app, section, query)
        seen += len(whole)
        for target, expected in whole.items():
            _, alone = part_alone(app, section, query, target)
            assert alone == expected, target
        # the structure learned, each part is reached by the first render that asks for it
        # alone, which renders no part's content but its own, its enclosing and enclosed ones
        for target, expected in whole.items():
            with app.test_request_context(url(f"/section/{section.id}", **query),
                                          headers={**HX, "HX-Target": target}):
                lm, state = current_state()
                g.rendered_parts, g.part_stack, g.only_part = {}, [], target
                views.render_section(lm, state, section)
                g.only_part = None
                assert g.rendered_parts.get(target) == expected, target
                inside = {p for p, around in views.PART_ANCESTORS.items() if target in around}
                assert set(g.rendered_parts) <= (
                    {target} | inside | views.PART_ANCESTORS.get(target, set()))
    assert seen >= 20            # the sections' parts (templates/macros.html `part`)


def test_an_unknown_target_gets_the_whole_section(client):
    r = client.get(url("/section/sampling", prompt=PROMPT),
                   headers={**HX, "HX-Target": "sampling-nothing-here"})
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    assert page.lstrip().startswith('<section id="sampling"')

