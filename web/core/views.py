"""Views: parse and validate the query, build the sections, render. Nothing else.

    GET /                  the page: the prompt and the first sections computed; every other
                           section is a placeholder that asks for itself when it nears the screen
    GET / (htmx)           after a prompt change: the sections named in the X-Sections header
                           (those loaded and near the screen) computed, the rest placeholders
    GET /section/<id>      one section's partial (a placeholder's own load, or one of its
                           controls); when HX-Target names a part of the section, that part alone

htmx requests get `HX-Push-Url` set to the canonical page URL of the validated state, so the
address bar always reproduces what is on screen. Bad values come back as the same partials with
the message next to the control and a 4xx status (htmx is configured to swap those).
"""
import re

from flask import Blueprint, abort, current_app, g, render_template, request
from markupsafe import Markup

from web.classroom.withheld import withheld
from web.core.cache import cached_build
from web.core.limits import BUSY_MESSAGE, Busy, Deadline, OverBudget
from web.core.registry import (
    OVERVIEW,
    SAMPLER_MOVED,
    changed_event,
    followers_of,
    sampler_followers,
    sections,
)
from web.core.registry import section as find_section
from web.core.request_state import current_state, explainer
from web.core.request_state import deadline as request_deadline
from web.model_state.explainer import choices as model_choices
from web.presentation import answers, glossary, precision
from web.presentation import overview as overview_pass
from web.presentation.tour import page_context

bp = Blueprint("explainer", __name__)
# the answers of the predict-first questions, for the places that show them (answer_gate)
bp.add_app_template_global(answers.next_token_answer)
bp.add_app_template_global(answers.kv_bytes_answer)
bp.add_app_template_global(precision.storage_of)

# The page computes what the reader can see: the first sections at once, every other one when
# it is about to scroll into view (static/lazy.js asks for it then).
EAGER_SECTIONS = 2


def builds():
    """How many times each section was built by this app (tests read it: a placeholder costs
    nothing)."""
    return current_app.extensions["explainer"].builds


def build_in_budget(lm, state, s) -> dict:
    """The section's context. A build that runs past the request's time budget (it called
    `query.check_time(name)` too late) is rebuilt once with that control's default, and the
    control shows why (web/core/limits.py). Results are cached per model, prompt and the section's
    own values (web.core.cache.cached_build): a control that changes one part, or a reload, does
    not compute the section again. A rebuild over its own budget too (the defaults take that
    long only on a server too busy to compute them now) is a 503 busy answer
    (web/serving/server.py),
    not a 500."""
    builds()[s.id] += 1
    try:
        return cached_build(s, lm, state, request_deadline())
    except OverBudget as e:
        state.reject(e.name, e.message)
    try:
        return cached_build(s, lm, state, Deadline())      # the rebuild gets a budget of its own
    except OverBudget:
        raise Busy(BUSY_MESSAGE) from None


def render_section(lm, state, s, lazy: bool = False):
    """A section's partial (Markup); only a note pointing at the prompt while it is invalid.
    lazy: the placeholder that loads the section when it nears the screen (nothing computed).
    A section that shows the answer of a class poll open for this member is withheld
    (web/classroom/withheld.py): its heading and why, nothing computed."""
    num = sections().index(s) + 2
    if lazy:
        # the overview's form holds some of its values (the page's sampler): not sent again
        return Markup(render_template("lazy_section.html", state=state, section=s, num=num,
                                      form_held=overview_pass.SHOWN_SAMPLER))
    if withheld().covers(s.id):
        return Markup(render_template("classroom/withheld_section.html", section=s, num=num,
                                      withheld=withheld()))
    ctx = {} if "prompt" in state.errors else build_in_budget(lm, state, s)
    g.term_scope = s.id + "-"            # its glossary terms' ids are its own (term_anchor)
    try:
        return Markup(render_template(s.template, lm=lm, state=state, section=s, num=num, **ctx))
    finally:
        g.term_scope = ""


def term_anchor(key: str) -> str:
    """The id of a glossary definition on the page (the `term` macro; a Jinja global): each
    section marks a term at its own first use, so its ids start with the section's id; the
    overview's and the tour's (prefix "tour-") have none."""
    return g.get("term_scope", "") + glossary.anchor(key)


def built(lm, state, sections, wanted):
    """[(section, rendered partial)] in page order, the sections in `wanted` computed and the
    others as placeholders; none while the prompt is invalid."""
    if "prompt" in state.errors:
        return []
    return [(s, render_section(lm, state, s, lazy=s.id not in wanted)) for s in sections]


def wanted_sections(state) -> set:
    """The sections to compute for this page: after a prompt change, the ones the browser has
    loaded and near the screen (X-Sections: id,id,...); on a first load, the first few. A
    section with a message for one of its values is computed too, so the message is on the page
    with the answer's 4xx status."""
    if is_partial_request() and "X-Sections" in request.headers:
        wanted = {i.strip() for i in request.headers["X-Sections"].split(",")}
    else:
        wanted = {s.id for s in sections()[:EAGER_SECTIONS]}
    wanted |= {s.id for s in sections()
               if state.status_of(s.shown()) != 200}
    return wanted & {s.id for s in sections()}


def keep_part(part_id: str, html):
    """The `part` macro's record of a part's content as its section renders (a Jinja global):
    a control that changes one part is answered with that part alone (section())."""
    g.setdefault("rendered_parts", {})[part_id] = html
    stack = g.get("part_stack")
    if stack and stack[-1] == part_id:
        stack.pop()
    return html


# part id -> the ids of the parts it was seen inside (learned from whole renders, per process)
PART_ANCESTORS = {}


def part_wanted(part_id: str) -> bool:
    """Whether the `part` macro renders this part's content (a Jinja global, asked as the part
    opens): every part when the whole section is asked for; when one part alone is
    (g.only_part), that part, the parts inside it and the parts seen around it, so that the
    others' content (their
    figures, tables, the model runs their templates ask for) is neither computed nor rendered
    for an answer that would leave it out. A whole render records which parts hold which."""
    only = g.get("only_part")
    if only is None:
        stack = g.setdefault("part_stack", [])
        if stack:
            PART_ANCESTORS.setdefault(part_id, set()).update(stack)
        stack.append(part_id)
        return True
    stack = g.setdefault("part_stack", [])
    wanted = part_id == only or only in stack or part_id in PART_ANCESTORS.get(only, ())
    if wanted:
        stack.append(part_id)
    return wanted


bp.add_app_template_global(part_wanted)


def out_of_sight(part_id: str) -> bool:
    """Whether the page named part `part_id` far from the screen (X-Follows-Later) in a request
    for something around it (a Jinja global): its template may then leave out what costs to
    compute (decoding's samples: a few decode steps) and show that it is coming; the answer
    names the part in X-Stale, and the page asks for it as it nears the screen
    (static/requests.js), as for a follower out of sight. An answer for the part itself (its own
    request, or out of band as a follower) is never out of sight."""
    if not is_partial_request() or g.get("answered_part") == part_id \
            or part_id not in named_followers("X-Follows-Later"):
        return False
    g.setdefault("stale_parts", []).append(part_id)
    return True


bp.add_app_template_global(out_of_sight)


def name_stale(response, part_ids) -> None:
    """Add these parts to the answer's X-Stale (the parts it leaves out of date, each once)."""
    have = [t for t in response.headers.get("X-Stale", "").split(",") if t]
    ids = list(dict.fromkeys(have + list(part_ids)))
    if ids:
        response.headers["X-Stale"] = ",".join(ids)


def render_part(lm, state, s, target: str):
    """(the section's partial, the content of part `target` or None when it has no such
    part): the section rendered with that part's content alone (part_wanted), or whole when
    the part was not among what that render reached (a part never seen, or inside another
    one not known yet to hold it)."""
    g.rendered_parts, g.part_stack, g.only_part = {}, [], target
    g.answered_part = target             # what this render is for (out_of_sight)
    try:
        try:
            body = render_section(lm, state, s)
        finally:
            g.only_part = None
        if target in g.rendered_parts:
            return body, g.rendered_parts[target]
        g.rendered_parts, g.part_stack = {}, []
        body = render_section(lm, state, s)
        return body, g.rendered_parts.get(target)
    finally:
        g.answered_part = None


# The request headers an answer's body depends on (its answers carry Vary for them); HX-Trigger
# changes only whether the answer writes an address (respond), not what it holds.
VARY = ("HX-Request", "HX-History-Restore-Request", "HX-Target", "X-Sections", "X-Follows",
        "X-Follows-Later")


def is_partial_request() -> bool:
    # A history-restore request wants the whole page even though it comes from htmx.
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def respond(body, state, status=None):
    status = state.status if status is None else status
    response = current_app.make_response((body, status))
    response.headers["Vary"] = ", ".join(VARY)
    # A section that loads itself as it nears the screen (HX-Trigger is then the section's own
    # id) changes nothing the address bar shows: no new history entry.
    loading_itself = request.headers.get("HX-Trigger") == (request.view_args or {}).get(
        "section_id")
    if is_partial_request() and status == 200 and not loading_itself:
        response.headers["HX-Push-Url"] = state.url("/")
    return response


@bp.get("/")
def page():
    """The explainer: the prompt and every section, all from the query string."""
    lm, state = current_state()
    # Words and steps of one prompt mean nothing for another: a prompt change drops them.
    page_sections = sections()
    resets = [p.name for s in page_sections for p in s.params if p.resets_with_prompt]
    ctx = dict(lm=lm, state=state, built=built(lm, state, page_sections, wanted_sections(state)),
               models=model_choices(explainer(), state, lm), absent_models=explainer().absent,
               resets=resets, overview=render_overview(lm, state, oob=is_partial_request()),
               overview_map=overview_pass.stage_map(page_sections),
               oob=is_partial_request(), withheld_key=withheld().key(),
               **page_context(state, page_sections))
    template = "sections.html" if is_partial_request() else "page.html"
    return respond(render_template(template, **ctx), state)


@bp.get("/section/<section_id>")
def section(section_id):
    """One section's partial: the htmx swap target of that section's own controls."""
    s = find_section(section_id)
    if s is None:
        abort(404)
    lm, state = current_state()
    target = request.headers.get("HX-Target", "") if is_partial_request() else ""
    g.stale_parts = []                   # the parts this answer leaves out of sight
    if target.startswith(s.id + "-"):
        body, part = render_part(lm, state, s, target)
    else:
        g.rendered_parts = {}
        body, part = render_section(lm, state, s), None
    if part is not None:
        # A control that changes one part gets that part, and every message of the section out
        # of band (its own message sits next to it, outside the part).
        names = s.shown()
        body = part + Markup(render_template("section_errors.html", state=state, names=names))
    if "prompt" in state.errors:              # the message belongs next to the prompt box
        body += Markup(render_template("prompt_error.html", state=state))
    # Only the values this answer shows a message for decide its status: a bad value of another
    # section (sent along with the whole form) is that section's to show, not this one's.
    response = respond(body, state,
                       state.status_of(["prompt", *s.shown()]))
    # One of its own controls changed (not its first load): the sections that read its
    # parameters follow (web.core.registry.refresh_trigger listens for this event). HX-Trigger fires
    # it as the answer arrives, before the swap: the reader's request (it sends the form, which
    # already holds the new value) is computed while this answer is swapped and drawn, not after.
    loading_itself = request.headers.get("HX-Trigger") == s.id
    # following another place's change (its refresh element, "<id>-follow"): the readers were
    # told by that place's answer already
    following = request.headers.get("HX-Trigger") == f"{s.id}-follow"
    if is_partial_request() and response.status_code == 200 and not loading_itself \
            and not following and followers_of(s):
        follow(response, lm, state, followers_of(s), changed_event(s.id))
    if response.status_code == 200:
        name_stale(response, g.get("stale_parts", ()))     # left out of sight (out_of_sight)
    return response


FOLLOWER_ID = re.compile(r"[a-z][a-z0-9_-]{0,60}")
MAX_FOLLOWERS = 8          # the page has 5 places that follow (X-Follows names at most these)


def named_followers(header: str) -> list:
    """The part ids a header names (X-Follows, X-Follows-Later), each once, well-formed ones
    only, at most MAX_FOLLOWERS."""
    asked = [t.strip() for t in request.headers.get(header, "").split(",")]
    return list(dict.fromkeys(t for t in asked if FOLLOWER_ID.fullmatch(t)))[:MAX_FOLLOWERS]


def following_owner(target: str, followers):
    """What renders part `target` when it follows this change: OVERVIEW for the overview's live
    part, else the following section whose part it is; None when it does not follow."""
    if target == "overview-live":
        return OVERVIEW if OVERVIEW in followers and not withheld().covers("overview") else None
    ids = {t.id for t in followers if t != OVERVIEW}
    return next((t for t in sections() if t.id in ids and target.startswith(t.id + "-")), None)


def follow(response, lm, state, followers, event: str):
    """The places that read what this answer changed follow it. The page names the parts that
    follow on it (X-Follows: the targets of its elements that listen for such an event,
    static/requests.js): each one of a following section (`followers`) is rendered here and
    sent out of band in this answer, so one request and one swap bring the control's part and
    every reader's. The ones far from the screen are named apart (X-Follows-Later): nothing is
    computed for them now; the answer names those that follow this change (X-Stale), and the
    page marks them out of date and asks for each one when it nears the screen. Without
    X-Follows (another client), the answer names `event` (HX-Trigger, fired as it arrives) and
    each reader asks for itself (web.core.registry.refresh_trigger)."""
    if "X-Follows" not in request.headers:
        response.headers["HX-Trigger"] = event
        return
    extra = []
    for target in named_followers("X-Follows"):
        owner = following_owner(target, followers)
        if owner is None:
            continue
        if owner == OVERVIEW:
            extra.append(render_overview(lm, state, live_only=True, live_oob=True))
            continue
        part = render_part(lm, state, owner, target)[1]
        if part is not None:
            extra.append(Markup('<div hx-swap-oob="innerHTML:#%s">') % target + part
                         + Markup("</div>"))
    if extra:
        response.set_data(response.get_data(as_text=True) + "".join(extra))
    name_stale(response, [t for t in named_followers("X-Follows-Later")
                          if following_owner(t, followers)])


def render_overview(lm, state, oob: bool = False, live_only: bool = False,
                    live_oob: bool = False):
    """The overview of the pass (templates/overview.html): the whole section (oob: to be swapped
    in out of band, after a prompt change), or only its live part (live_only; live_oob: out of
    band, in another place's answer that it follows)."""
    held = withheld() if withheld().covers("overview") else None
    if "prompt" in state.errors:
        ctx = {}
    elif held:                          # the Text box alone: nothing the pass computed
        ctx = dict(ov_steps=0, generated_text="", withheld=held)
    else:
        ctx = overview_pass.build(lm, state)
    return Markup(render_template("overview.html", lm=lm, state=state, oob=oob,
                                  live_only=live_only, live_oob=live_oob,
                                  page_sampler=overview_pass.SAMPLER_NAMES, **ctx))


@bp.get("/overview")
def overview():
    """The overview of the pass: its live part when HX-Target is `overview-live` (the Next token
    button, Play and the overview's sampler ask for it), else the whole section."""
    lm, state = current_state()
    live_only = is_partial_request() and request.headers.get("HX-Target") == "overview-live"
    body = render_overview(lm, state, live_only=live_only)
    response = respond(body, state, state.status_of(["prompt", *overview_pass.NAMES]))
    # A step of the loop replaces the address: no history entry per generated token.
    if "HX-Push-Url" in response.headers:
        response.headers["HX-Replace-Url"] = response.headers.pop("HX-Push-Url")
    # One of the page's sampler controls moved here: the Sampling section (whose controls share
    # the names) and the loops that sample follow (web.core.registry.refresh_trigger).
    if (live_only and response.status_code == 200
            and request.headers.get("HX-Trigger") in SAMPLER_CONTROLS):
        follow(response, lm, state, sampler_followers(), SAMPLER_MOVED)
    return response


# the ids of the overview's sampler controls (templates/overview.html)
SAMPLER_CONTROLS = ("ov-temp", "ov-topk", "ov-topp")
