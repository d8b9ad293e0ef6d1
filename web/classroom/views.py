"""The class's routes (blueprint "classroom"). JSON in and out, except the join pages.

    GET  /class                         the join page: type the code (?code=... joins)
    GET  /class/<code>                  the join link (the QR code's address): joins, then opens
                                        the teacher's page (/?<teacher's state>#class=<code>)
    POST /class/new                     teacher: start a session from the page's state
    GET  /class/<code>/qr.svg           the join link as a QR code (segno, SVG, made here)
    GET  /class/<code>/state            everyone: the teacher's state, members, the poll (and
                                        its reveal); ETag = the session's version, 304 if same
    POST /class/<code>/state            teacher: the page state now on the projector
    POST /class/<code>/polls            teacher: open a poll of a kind (web/classroom/polls.py)
    POST /class/<code>/polls/<id>/answer    student: answer (or change the answer)
    POST /class/<code>/polls/<id>/reveal    teacher: close the poll, the class beside the model
    POST /class/<code>/end              teacher: end the session (everything deleted)

    GET  /class/mine                    teacher: the live sessions this browser teaches

Rights: the teacher is whoever holds the session's secret, set at /class/new in an HttpOnly,
SameSite=Strict cookie (`cls_t`, path /class: "code.secret" pairs, one per session this browser
started and still teaches, renewed by every teacher's request); the store keeps only its
SHA-256. A student is an anonymous random id in an HttpOnly, SameSite=Lax cookie (`cls_s`,
path /), given at the first join, with the codes joined (`cls_j`): the page's own routes read
them to withhold an open poll's answer from the class (web/classroom/withheld.py). A teacher's
route without the teacher's cookie is a 403. POSTs take JSON only (a form from another site
cannot send it) and a foreign Origin is refused.

Guessing: every route that names a code counts an unknown code as a wrong try of the client
(a code that ended in the last 10 minutes is not unknown), and a client past the limit gets 429
on every route whatever the code, so no answer tells it whether a code exists. A typed code
with characters codes never use (0, O, 1, I, L) is told so and is not a try.
"""
import io
import json
import time
import urllib.parse

from flask import (
    Blueprint,
    abort,
    current_app,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)

from web.classroom import codes, polls
from web.classroom.store import Gone, StoreError, Unavailable, open_store
from web.core.cache import cached_build
from web.core.limits import CLASSROOM, RETRY_AFTER_SECONDS
from web.core.registry import all_params
from web.core.registry import section as find_section
from web.core.request_state import current_state
from web.serving import server as serving

bp = Blueprint("classroom", __name__, url_prefix="/class")
TEACHER_COOKIE = "cls_t"
STUDENT_COOKIE = "cls_s"
JOINED_COOKIE = "cls_j"
# The page's own settings a follower keeps for itself.
NOT_FOLLOWED = ("theme",)
# Routes answered from the store alone (no model computing): outside the compute gate, so that
# 60 phones joining at once or polling every 500 ms never wait behind a section being computed.
serving.UNGATED.update({"classroom.follow", "classroom.teacher_state", "classroom.answer",
                        "classroom.join_form", "classroom.join_link"})


class Classroom:
    """What the app holds for classes: the store, opened on first use (so an app that never
    runs a class writes nothing) — or at start when app.py is given --store."""

    def __init__(self, spec, data_dir, limits=None):
        self.spec = spec
        self.data_dir = data_dir
        self.limits = dict(CLASSROOM, **(limits or {}))
        self._store = None

    @property
    def store(self):
        if self._store is None:
            self._store = open_store(self.spec, self.data_dir, self.limits["idle_seconds"],
                                     self.limits["unjoined_idle_seconds"],
                                     self.limits["join_window_seconds"])
        return self._store

    @store.setter
    def store(self, value):
        self._store = value


def classroom() -> Classroom:
    return current_app.extensions["classroom"]


def now() -> float:
    return current_app.config.get("CLASSROOM_CLOCK", time.time)()


def fail(status: int, message: str):
    response = jsonify(error=message)
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.errorhandler(StoreError)
def store_error(e):
    return fail(e.status, e.message)


@bp.errorhandler(polls.PollError)
def poll_error(e):
    return fail(422, e.message)


JOIN_PAGES = ("classroom.join_form", "classroom.join_link")


@bp.errorhandler(Unavailable)
def store_unavailable(e):
    """The store does not answer (Redis stopped or frozen, SQLite locked): a 503 saying so,
    the join page for the join routes, JSON for the others (classroom.js shows its error)."""
    if e.cause is not None:          # the call that failed, not the ones answered at once after it
        current_app.logger.warning("class store: %s", e)
    if request.endpoint in JOIN_PAGES:
        typed = (request.view_args or {}).get("code") or request.args.get("code") or ""
        return join_page(e.message, e.status, typed[:40])
    return fail(e.status, e.message)


@bp.after_request
def retry_after(response):
    """Every 503 of the class's routes says when to try again."""
    if response.status_code == 503 and "Retry-After" not in response.headers:
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


# --- who is asking ---------------------------------------------------------------------------

def teacher_pairs() -> dict:
    """code -> secret of every session this browser started (the teacher's cookie holds
    "code.secret" pairs joined by "~")."""
    out = {}
    for pair in request.cookies.get(TEACHER_COOKIE, "").split("~")[:8]:
        c, _, secret = pair.partition(".")
        if codes.normalize(c) == c and secret:
            out[c] = secret
    return out


def teacher_secret(code: str):
    return teacher_pairs().get(code, "")


def is_teacher(session) -> bool:
    if codes.secret_matches(teacher_secret(session["code"]), session["teacher"]):
        request.environ["explainer.teacher_of"] = session["code"]   # renewed with the answer
        return True
    return False


def set_teacher_cookie(response, pairs: dict):
    if pairs:
        cookie(response, TEACHER_COOKIE, "~".join(f"{c}.{s}" for c, s in pairs.items()),
               "Strict")
    else:
        response.delete_cookie(TEACHER_COOKIE, path="/class")


@bp.after_request
def renew_teacher_cookie(response):
    """The teacher's cookie lives as long as the session it opens: every request of the
    teacher's sets it again for another idle period (a long lesson never ends in 403s)."""
    if request.environ.get("explainer.teacher_of") and \
            TEACHER_COOKIE not in str(response.headers.getlist("Set-Cookie")):
        set_teacher_cookie(response, teacher_pairs())
    return response


def student_id():
    sid = request.cookies.get(STUDENT_COOKIE, "")
    return sid if codes.STUDENT_ID.fullmatch(sid) else None


def joined_codes() -> list:
    """The codes this browser joined as a student (the `cls_j` cookie), newest first."""
    raw = request.cookies.get(JOINED_COOKIE, "")
    return [c for c in raw.split(".")[:4] if codes.normalize(c) == c]


def json_body() -> dict:
    """The POST's JSON object; a form or another site's page cannot send one."""
    origin = request.headers.get("Origin")
    if origin and origin.rstrip("/") != request.host_url.rstrip("/"):
        abort(fail(403, "Requests from another site are refused."))
    if not request.is_json:
        abort(fail(415, "Send JSON (Content-Type: application/json)."))
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        abort(fail(400, "The body must be a JSON object."))
    return body


NO_CLASS = "There is no class with this code: it ended, expired or never existed."


def too_many_tries():
    window = classroom().limits["join_window_seconds"]
    return (f"Too many wrong codes from this address. Wait {window // 60} minutes, then try "
            "again."), window


def guard(code: str):
    """The normalized code of a route's URL, for a client not past its wrong-code limit (else
    a 429 whatever the code: no answer may tell a locked-out client which codes exist)."""
    c = classroom()
    if c.store.join_failures(client_key(), now(), c.limits["join_window_seconds"]) >= \
            c.limits["join_failures"]:
        message, window = too_many_tries()
        response = fail(429, message)
        response.headers["Retry-After"] = str(window)
        abort(response)
    norm = codes.normalize(code)
    if norm is None:
        abort(fail(404, codes.not_a_code(code)))
    return norm


def unknown(code: str):
    """A well-formed code that names no session: a wrong try, unless it ended lately."""
    c = classroom()
    if not c.store.known(code, now()):
        c.store.count_join_failure(client_key(), now(), c.limits["join_window_seconds"])


def live_session(code: str):
    norm = guard(code)
    session = classroom().store.session(norm, now())
    if session is None:
        unknown(norm)
        abort(fail(404, NO_CLASS))
    return session


def teacher_session(code: str):
    session = live_session(code)
    if not is_teacher(session):
        abort(fail(403, "Only the teacher who started this session can do this."))
    return session


def followed_query(raw) -> str:
    """The teacher's page state as followers will load it: only the page's own parameters,
    each once, re-encoded (and not the teacher's theme)."""
    if not isinstance(raw, str):
        abort(fail(400, "The state must be a query string."))
    raw = raw.lstrip("?")
    if len(raw.encode()) > classroom().limits["state_bytes"]:
        abort(fail(413, "The page state is too long to share."))
    names = {p.name for p in all_params()} - set(NOT_FOLLOWED)
    seen, pairs = set(), []
    for name, value in urllib.parse.parse_qsl(raw, keep_blank_values=True):
        if name in names and name not in seen:
            seen.add(name)
            pairs.append((name, value))
    return urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


def cookie(response, name, value, samesite):
    response.set_cookie(name, value, max_age=int(classroom().limits["idle_seconds"]),
                        path="/class", httponly=True, samesite=samesite,
                        secure=request.is_secure)


# --- joining ---------------------------------------------------------------------------------

def join_page(message="", status=200, code=""):
    response = make_response(render_template("classroom/join.html", message=message,
                                             code=code, code_length=codes.CODE_LENGTH,
                                             alphabet=codes.ALPHABET), status)
    response.headers["Cache-Control"] = "no-store"
    return response


def client_key() -> str:
    """The client's address: the peer's, or with app.py --proxy N the one N trusted proxies
    forwarded (ProxyFix sets remote_addr)."""
    return request.remote_addr or "unknown"


def join(typed: str):
    """Join the session `typed` names: the page the teacher shows, or a clear page saying why
    not (a wrong code counts against this client's join attempts)."""
    c = classroom()
    limits, store, t = c.limits, c.store, now()
    window = limits["join_window_seconds"]
    if store.join_failures(client_key(), t, window) >= limits["join_failures"]:
        message, window = too_many_tries()
        response = join_page(message, 429, typed)
        response.headers["Retry-After"] = str(window)
        return response
    code = codes.normalize(typed)
    if code is None:                       # not a code at all: a typo, not a guess
        return join_page(f"“{typed[:40]}”: " + codes.not_a_code(typed), 422, typed[:40])
    session = store.session(code, t)
    if session is None:
        unknown(code)
        return join_page(f"There is no class with the code “{typed[:40]}”: it may have ended "
                         "or expired, or a character was mistyped.", 404, typed[:40])
    sid = student_id() or codes.new_student_id()
    try:
        store.join(code, sid, t, limits["members"], codes.client_tag(client_key()),
                   limits["members_per_client"])
    except StoreError as e:
        return join_page(e.message, e.status, typed)
    target = "/" + (f"?{session['state']}" if session["state"] else "") + f"#class={code}"
    response = redirect(target, 303)
    student_cookies(response, sid, code)
    response.headers["Cache-Control"] = "no-store"
    return response


def student_cookies(response, sid: str, code: str):
    """The student's id and the codes joined, for every route of the site (path /): the page's
    own routes read them to withhold an open poll's answer."""
    joined = [code] + [c for c in joined_codes() if c != code]
    for name, value in ((STUDENT_COOKIE, sid), (JOINED_COOKIE, ".".join(joined[:4]))):
        response.set_cookie(name, value, max_age=int(classroom().limits["idle_seconds"]),
                            path="/", httponly=True, samesite="Lax", secure=request.is_secure)


@bp.get("")
def join_form():
    typed = request.args.get("code")
    if typed is None:
        return join_page()
    return join(typed)


@bp.get("/<code>")
def join_link(code):
    return join(code)


# --- the teacher starts, ends, and is followed ---------------------------------------------

@bp.post("/new")
def new():
    body = json_body()
    query = followed_query(body.get("query", ""))
    c = classroom()
    secret = codes.new_secret()
    for _ in range(5):                       # a collision among 27.5 billion codes: try again
        code = codes.new_code()
        try:
            c.store.create(code, codes.secret_hash(secret), query, now(), c.limits["sessions"],
                           codes.client_tag(client_key()), c.limits["sessions_per_client"])
            break
        except StoreError as e:
            if e.status != 409:
                raise
    else:
        return fail(503, "No free code was found; try again.")
    # The browser keeps teaching its other live sessions: their pairs stay in the cookie, and
    # the panel lists them (others) to resume or end.
    pairs = {k: v for k, v in mine().items()}
    pairs[code] = secret
    response = jsonify(dict(session_info(code), others=others_of(pairs, code)))
    set_teacher_cookie(response, pairs)
    response.headers["Cache-Control"] = "no-store"
    return response


def mine() -> dict:
    """code -> secret of the live sessions this browser teaches (its cookie's pairs, checked
    against the store)."""
    store, t = classroom().store, now()
    out = {}
    for code, secret in teacher_pairs().items():
        session = store.session(code, t)
        if session and codes.secret_matches(secret, session["teacher"]):
            out[code] = secret
    return out


def others_of(pairs: dict, current: str) -> list:
    store, t = classroom().store, now()
    out = []
    for code in pairs:
        session = store.session(code, t) if code != current else None
        if session:
            out.append(dict(code=code, shown=codes.shown(code), members=session["members"]))
    return out


@bp.get("/mine")
def my_sessions():
    """The live sessions this browser teaches: the panel offers to resume or end each."""
    pairs = mine()
    response = jsonify(sessions=[dict(session_info(code), members=classroom().store.session(
        code, now())["members"]) for code in pairs])
    set_teacher_cookie(response, pairs)
    response.headers["Cache-Control"] = "no-store"
    return response


def session_info(code: str) -> dict:
    return dict(code=code, shown=codes.shown(code),
                join_url=request.host_url.rstrip("/") + url_for("classroom.join_link",
                                                                code=code),
                join_page=request.host_url.rstrip("/") + url_for("classroom.join_form"),
                qr=url_for("classroom.qr", code=code), kinds=poll_kinds(),
                follow_poll_ms=classroom().limits["follow_poll_ms"])


def poll_kinds() -> list:
    return [dict(id=k.id, label=k.label) for k in polls.KINDS.values()]


@bp.get("/<code>/qr.svg")
def qr(code):
    import segno
    session = live_session(code)
    link = request.host_url.rstrip("/") + url_for("classroom.join_link", code=session["code"])
    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="svg", scale=8, border=2, dark="#000",
                                     light="#fff", xmldecl=False, title="Join: " + link)
    response = current_app.response_class(out.getvalue(), mimetype="image/svg+xml")
    response.headers["Cache-Control"] = "private, max-age=3600"
    return response


@bp.post("/<code>/end")
def end(code):
    json_body()
    session = teacher_session(code)
    classroom().store.end(session["code"])
    response = jsonify(ended=True)
    request.environ["explainer.teacher_of"] = None
    set_teacher_cookie(response, {k: v for k, v in teacher_pairs().items()
                                  if k != session["code"]})
    return response


@bp.post("/<code>/state")
def teacher_state(code):
    session = teacher_session(code)
    query = followed_query(json_body().get("query", ""))
    version = classroom().store.set_state(session["code"], query, now())
    return jsonify(version=version)


@bp.get("/<code>/state")
def follow(code):
    """The session as a follower sees it. Its version is the ETag: a poll that sends it back
    (If-None-Match) gets 304 and no body until something changes."""
    norm = guard(code)
    store = classroom().store
    version = store.version(norm, now())
    if version is None:
        unknown(norm)
        return fail(404, "This class has ended or expired.")
    etag = f'"{version}"'
    if etag in [e.strip() for e in request.headers.get("If-None-Match", "").split(",")]:
        response = current_app.response_class(status=304)
        response.headers["ETag"] = etag
        response.headers["Cache-Control"] = "no-cache"
        return response
    session = store.session(norm, now())
    if session is None:
        return fail(404, "This class has ended or expired.")
    sid = student_id()
    poll = session["poll"]
    out = dict(code=norm, version=session["version"], query=session["state"],
               members=session["members"], teacher=is_teacher(session),
               member=bool(sid) and store.is_member(norm, sid), poll=None)
    if out["teacher"]:
        out.update(session_info(norm))
    if poll:
        out["poll"] = dict(id=poll["id"], status=poll["status"], answered=poll["answered"],
                           **polls.public(poll["spec"]))
        if sid and poll["status"] == "open":
            out["poll"]["mine"] = store.mine(norm, poll["id"], sid)
        if poll["status"] == "revealed":
            out["poll"]["reveal"] = poll["reveal"]
    response = jsonify(out)
    response.headers["ETag"] = f'"{session["version"]}"'
    response.headers["Cache-Control"] = "no-cache"
    return response


# --- polls -----------------------------------------------------------------------------------

def teacher_view(query: str):
    """(lm, state) of the teacher's page state, validated as the page validates it."""
    with current_app.test_request_context("/?" + query):
        return current_state()


@bp.post("/<code>/polls")
def open_poll(code):
    session = teacher_session(code)
    body = json_body()
    kind = polls.KINDS.get(body.get("kind"))
    if kind is None:
        return fail(422, f"Poll kinds: {', '.join(polls.KINDS)}.")
    query = followed_query(body["query"]) if "query" in body else session["state"]
    lm, state = teacher_view(query)
    if "prompt" in state.errors:
        return fail(422, "The projected prompt is not valid: " + state.errors["prompt"])
    ctx = cached_build(find_section(kind.section), lm, state)   # as the section renders it
    spec = polls.open_spec(kind, lm, state, ctx)
    c = classroom()
    pid = c.store.open_poll(session["code"], kind.id, json.dumps(spec), now(),
                            c.limits["polls"])
    return jsonify(id=pid, **polls.public(spec))


@bp.post("/<code>/polls/<int:poll_id>/answer")
def answer(code, poll_id):
    session = live_session(code)
    sid = student_id()
    if sid is None:
        return fail(403, "Join the class first (its code or link).")
    poll = session["poll"]
    if poll is None or poll["id"] != poll_id or poll["status"] != "open":
        return fail(409, "This poll is closed: its answer has been revealed or another poll "
                         "has started.")
    value = polls.validate(poll["spec"], json_body().get("answer"))
    c = classroom()
    new = c.store.answer(session["code"], poll_id, sid, value, now(), c.limits["answers"])
    return jsonify(answer=value, changed=not new)


@bp.post("/<code>/polls/<int:poll_id>/reveal")
def reveal(code, poll_id):
    json_body()
    session = teacher_session(code)
    poll = session["poll"]
    if poll is None or poll["id"] != poll_id or poll["status"] not in ("open", "revealing"):
        return fail(409, "Only the open poll can be revealed.")
    spec = poll["spec"]
    store = classroom().store
    store.lock(session["code"], poll_id, now())          # no answer after this one counts
    answers = store.answers(session["code"], poll_id)
    lm = current_app.extensions["explainer"].get(spec["model"])
    if lm is None:
        raise Gone("The model of this poll is not on this server.")
    result = polls.reveal(spec, answers, lm, joined=session["members"])
    store.reveal(session["code"], poll_id, json.dumps(result), now())
    return jsonify(result)


def init_app(app, store=None, data_dir=None):
    """Register the blueprint and the app's Classroom (store: "sqlite" or a redis:// URL)."""
    app.extensions["classroom"] = Classroom(store or app.config.get("CLASSROOM_STORE"),
                                            data_dir or app.config.get("CLASSROOM_DATA_DIR"),
                                            app.config.get("CLASSROOM_LIMITS"))
    app.register_blueprint(bp)
