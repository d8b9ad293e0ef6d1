"""The guided tour, presentation mode and theme: page-level state, kept in the URL like the rest.

The tour is the data path as numbered steps: the prompt, then every registered section in page
order. The prompt's text is written here; each section's text is its registry entry's `tour`
(web/core/registry.py), so the tour grows with the page.

    ?tour=3        the tour is open at step 3 (1-based); 0 or absent: closed
    ?present=1     presentation mode: large type, high contrast, one step on screen at a time
    ?theme=dark    light, dark, or auto (follow the system setting)
    ?model=smollm2 the model the page runs (web/model_state/explainer.py lists them); absent: the
    default
    ?open=a,b      the "Go deeper" disclosures that are open (their ids), so a shared link
                   shows the same depth
"""
import re
from dataclasses import dataclass

from web.core.params import Param
from web.presentation.glossary import mark_first_uses

THEMES = ("auto", "light", "dark")
PAGE_PARAMS = (
    Param("model", "Model", default=None, max_chars=100),
    Param("tour", "Tour step", kind="int", default=0, min=0, max=99),
    Param("present", "Presentation mode", kind="int", default=0, min=0, max=1),
    Param("theme", "Theme", default="auto", max_chars=10, choices=THEMES),
    Param("open", "Open disclosures", default="", max_chars=1000),
)
DISCLOSURE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")

PROMPT_STEP = ("prompt", "The prompt", (
    "Everything starts with text. A language model does one thing: given some text, it scores "
    "every possible next piece. Type a prompt (or keep the opening of Pride and Prejudice) and "
    "follow it through the model that is running on this server, one step at a time. Every "
    "number on the way is computed for your prompt, now."))


@dataclass(frozen=True)
class Step:
    number: int      # 1-based
    target: str      # the element id the step shows
    title: str
    text: str
    pieces: tuple = ()   # the text cut at glossary terms: ("text", s) or ("term", s, key), a
                         #   term at its first use in the tour
                         # (web.presentation.glossary.mark_first_uses)


def tour_steps(sections) -> list:
    """The prompt, then every section in page order, each with its text; the first use of a
    glossary term in the tour (the tour's slides in presentation mode too) shows its definition
    from web/presentation/glossary.py."""
    steps = [PROMPT_STEP] + [(s.id, s.title, s.tour) for s in sections]
    pieces = mark_first_uses(text for _, _, text in steps)
    return [Step(i + 1, target, title, text, tuple(p))
            for i, ((target, title, text), p) in enumerate(zip(steps, pieces, strict=True))]


def page_context(state, sections) -> dict:
    """The tour's steps and the page-level state; a step past the end is a clear 422 (the
    theme is one of its Param's choices, checked with the query)."""
    steps = tour_steps(sections)
    if state["tour"] > len(steps):
        state.reject("tour", f"The tour has {len(steps)} steps; there is no step "
                     f"{state['tour']}.")
    bad = [d for d in open_disclosures(state) if not DISCLOSURE_ID.fullmatch(d)]
    if bad:
        state.reject("open", f"Open disclosures must be ids of lower-case letters, digits and "
                     f"hyphens, separated by commas; {bad[0][:40]!r} is not.")
    return dict(tour_steps=steps, tour_step=state["tour"], present=state["present"],
                theme=state["theme"])


def open_disclosures(state) -> list:
    """The ids of the "Go deeper" disclosures the URL asks to be open."""
    if "open" in state.errors:
        return []
    return [d for d in (state["open"] or "").split(",") if d]
