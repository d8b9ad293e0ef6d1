"""Views: parse and validate the query, build the sections, render. Nothing else.

    GET /                  the whole page, rendered from the query string (works without JS)
    GET / (htmx)           every section at once, when the prompt changes
    GET /section/<id>      one section's partial, when one of its own controls changes

htmx requests get `HX-Push-Url` set to the canonical page URL of the validated state, so the
address bar always reproduces what is on screen. Bad values come back as the same partials with
the message next to the control and a 4xx status (htmx is configured to swap those).
"""
from flask import Blueprint, abort, current_app, render_template, request
from markupsafe import Markup

from web.limits import Deadline, OverBudget
from web.params import parse_state
from web.registry import SECTIONS, all_params, section as find_section
from web.tour import page_context

bp = Blueprint("explainer", __name__)


def current_state():
    """The validated state of the request, with the prompt's length in tokens checked too."""
    lm = current_app.extensions["explainer_model"]
    state = parse_state(request.query_string, all_params())
    if "prompt" not in state.errors:
        n = len(lm.tokenizer.encode_ordinary(state["prompt"]))
        if n > lm.n_ctx:
            state.reject("prompt", f"The prompt is {n} tokens long; the model reads at most "
                         f"{lm.n_ctx} tokens (its context window).")
    return lm, state


def build_in_budget(lm, state, s) -> dict:
    """The section's context. A build that runs past the request's time budget (it called
    `state.check_time(name)` too late) is rebuilt once with that control's default, and the
    control shows why (web/limits.py)."""
    try:
        return s.build(lm, state)
    except OverBudget as e:
        state.reject(e.name, e.message)
        state.deadline = Deadline()
        return s.build(lm, state)


def render_section(lm, state, s):
    """A section's partial (Markup); only a note pointing at the prompt while it is invalid."""
    ctx = {} if "prompt" in state.errors else build_in_budget(lm, state, s)
    return Markup(render_template(s.template, lm=lm, state=state, section=s,
                                  num=SECTIONS.index(s) + 2, **ctx))


def built(lm, state, sections):
    """[(section, rendered partial)] in page order; none while the prompt is invalid."""
    if "prompt" in state.errors:
        return []
    return [(s, render_section(lm, state, s)) for s in sections]


def is_partial_request() -> bool:
    # A history-restore request wants the whole page even though it comes from htmx.
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def respond(body, state, status=None):
    status = state.status if status is None else status
    response = current_app.make_response((body, status))
    response.headers["Vary"] = "HX-Request, HX-History-Restore-Request"
    if is_partial_request() and status == 200:
        response.headers["HX-Push-Url"] = state.url("/")
    return response


@bp.get("/")
def page():
    """The explainer: the prompt and every section, all from the query string."""
    lm, state = current_state()
    # Words and steps of one prompt mean nothing for another: a prompt change drops them.
    resets = [p.name for s in SECTIONS for p in s.params if p.resets_with_prompt]
    ctx = dict(lm=lm, state=state, built=built(lm, state, SECTIONS), resets=resets,
               oob=is_partial_request(), **page_context(state, SECTIONS))
    template = "sections.html" if is_partial_request() else "page.html"
    return respond(render_template(template, **ctx), state)


@bp.get("/section/<section_id>")
def section(section_id):
    """One section's partial: the htmx swap target of that section's own controls."""
    s = find_section(section_id)
    if s is None:
        abort(404)
    lm, state = current_state()
    body = render_section(lm, state, s)
    if "prompt" in state.errors:              # the message belongs next to the prompt box
        body += Markup(render_template("prompt_error.html", state=state))
    # Only the values this answer shows a message for decide its status: a bad value of another
    # section (sent along with the whole form) is that section's to show, not this one's.
    return respond(body, state,
                   state.status_of(["prompt", *s.borrows] + [p.name for p in s.params]))
