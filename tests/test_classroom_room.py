"""A live lesson in a real room: the answer of an open poll reaches no member before the reveal
(on every route a member can fetch), one client address is a few voices, not a class, codes
are not guessed through any route, answers mean what was typed, and the teacher keeps the
class (several sessions per browser, a cookie renewed while the lesson goes on)."""
import pytest

from tests.test_classroom_api import Clock, client_at, joined, make_app, start
from web.classroom import polls
from web.classroom.views import Classroom, teacher_view
from web.core.cache import cached_build
from web.core.registry import section, sections

NOTE = "Withheld until the reveal."


@pytest.fixture(scope="module")
def room_app(model, tmp_path_factory):
    """One app of this module's (test_classroom_api.make_app): its sections' caches are made
    once, not again for each test (every route of the page, three times a test)."""
    app, _ = make_app(model, tmp_path_factory.mktemp("room"))
    return app


@pytest.fixture()
def app(room_app, tmp_path):
    """The module's app with a class store and a clock of this test's own (everything a class
    keeps: web/classroom/views.py Classroom), in its context."""
    clock = Clock()
    before = room_app.extensions["classroom"], room_app.config["CLASSROOM_CLOCK"]
    room_app.extensions["classroom"] = Classroom("sqlite", str(tmp_path / "data"))
    room_app.config["CLASSROOM_CLOCK"] = room_app.clock = clock
    try:
        with room_app.app_context():
            yield room_app
    finally:
        room_app.extensions["classroom"], room_app.config["CLASSROOM_CLOCK"] = before


def every_route(client, query):
    """Every answer of the page a member can fetch for the projected state: the page, each
    section, the overview (whole and its live part) and the streamed answer."""
    out = {"page": client.get(f"/?{query}"),
           "overview": client.get(f"/overview?{query}"),
           "overview-live": client.get(f"/overview?{query}",
                                       headers={"HX-Request": "true",
                                                "HX-Target": "overview-live"}),
           "stream": client.get(f"/generate/stream?{query}&gen_max=3")}
    for s in sections():
        out[s.id] = client.get(f"/section/{s.id}?{query}")
    for r in out.values():      # read whole, then closed as a browser's would be: the stream's
        r.get_data()            # slot is given back (the module's app serves every test)
        r.close()
    return out


def next_token_detectors(app, query):
    """How the page writes the model's top next token and its probability: its chip id, its
    label, its probability at the precisions the sections print."""
    lm, state = teacher_view(query)
    top = cached_build(section("logits"), lm, state)["rows"][0]
    return [f'tid">{top.id}<', top.text, f"{100 * top.p1:.1f}%", f"{100 * top.p1:.2f}%",
            f"{top.p1:.4f}"]


def detectors(app, kind, query):
    if kind in ("next-token", "top-prob"):
        return next_token_detectors(app, query)
    lm, state = teacher_view(query)
    ctx = cached_build(section(polls.KINDS[kind].section), lm, state)
    if kind == "beam-vs-greedy":
        return ["%.3f" % ctx["finals"][0].total, "%.3f" % ctx["greedy"].total]
    if kind == "kv-bytes":
        return [f"{ctx['final_nbytes']:,}"]
    return []


@pytest.mark.parametrize("kind", list(polls.KINDS))
def test_no_member_sees_an_open_polls_answer_on_any_route(app, kind):
    teacher, code = start(app)
    student, = joined(app, code, 1)
    query = teacher.get(f"/class/{code}/state").json["query"]
    found = detectors(app, kind, query)
    public = every_route(app.test_client(), query)
    # the places whose public answer shows the answer are all withheld (the list is complete)
    leaking = {place for place, r in public.items() if any(d in r.get_data(as_text=True)
                                                           for d in found)}
    held = polls.KINDS[kind].withholds
    assert all(held == polls.EVERYWHERE or place.split("-live")[0] in held or place == "page"
               for place in leaking), leaking
    before = every_route(student, query)
    assert not any(NOTE in r.get_data(as_text=True) for r in before.values())
    assert teacher.post(f"/class/{code}/polls", json={"kind": kind}).status_code == 200
    during = every_route(student, query)
    for place, r in during.items():
        body = r.get_data(as_text=True)
        assert r.status_code in (200, 403), (place, r.status_code)
        assert not [d for d in found if d in body], (place, [d for d in found if d in body])
        assert f'data-predict="{kind}"' not in body, place          # no "show" behind a button
        if kind in ("next-token", "top-prob", "top-p-half"):
            assert 'data-answer-of="next-token"' not in body, place
    for place in [s.id for s in sections()] + ["overview"]:
        withheld = NOTE in during[place].get_data(as_text=True)
        assert withheld == (held == polls.EVERYWHERE or place in held), place
    if held == polls.EVERYWHERE or "stream" in held:
        assert during["stream"].status_code == 403 and "reveal" in during["stream"].json[
            "errors"]["stream"]
    # the teacher and anyone outside the class see the section as it is
    own = polls.KINDS[kind].section
    assert NOTE not in app.test_client().get(f"/section/{own}?{query}").get_data(as_text=True)
    # after the reveal the member sees it again
    pid = teacher.get(f"/class/{code}/state").json["poll"]["id"]
    assert teacher.post(f"/class/{code}/polls/{pid}/reveal", json={}).status_code == 200
    after = student.get(f"/section/{own}?{query}").get_data(as_text=True)
    assert NOTE not in after


def test_a_member_exploring_sees_the_reason_and_the_overview_keeps_the_prompt_box(app):
    teacher, code = start(app)
    student, = joined(app, code, 1)
    teacher.post(f"/class/{code}/polls", json={"kind": "next-token"})
    page = student.get("/?prompt=The%20sun%20rose").get_data(as_text=True)   # a prompt of their own
    assert NOTE in page and "The next token" in page
    assert 'id="prompt-input"' in page and "The sun rose" in page
    assert 'id="ov-next"' not in page                   # no Next token step while withheld


# --- one voice per person ------------------------------------------------------------------

def test_one_address_is_a_few_voices_not_a_class(model, tmp_path):
    app, _ = make_app(model, tmp_path, members=10)
    teacher, code = start(app)
    prankster_joins = []
    for _ in range(20):                       # a fresh cookie jar each time: no cookie sent
        prankster_joins.append(client_at(app, "198.51.100.9").get(f"/class/{code}").status_code)
    assert prankster_joins.count(303) == 3 and prankster_joins.count(429) == 17
    refused = client_at(app, "198.51.100.9").get(f"/class/{code}")
    assert "from this network address" in refused.get_data(as_text=True)
    students = joined(app, code, 7)            # seven real students, each their own address
    assert len(students) == 7
    state = teacher.get(f"/class/{code}/state").json
    assert state["members"] == 10
    pid = teacher.post(f"/class/{code}/polls", json={"kind": "n-tokens"}).json["id"]
    for s in students[:5]:
        s.post(f"/class/{code}/polls/{pid}/answer", json={"answer": "12"})
    out = teacher.post(f"/class/{code}/polls/{pid}/reveal", json={}).json
    assert (out["total"], out["joined"]) == (5, 10)       # answered, of joined


def test_sessions_per_address_and_sessions_nobody_joined_end_sooner(model, tmp_path):
    app, clock = make_app(model, tmp_path, unjoined_idle_seconds=600, idle_seconds=7200)
    script = client_at(app, "203.0.113.5")
    made = [script.post("/class/new", json={"query": ""}) for _ in range(5)]
    assert [r.status_code for r in made] == [200, 200, 200, 429, 429]
    assert "limit for one address" in made[3].json["error"]
    teacher = client_at(app, "203.0.113.6")       # a real teacher elsewhere is not blocked
    r = teacher.post("/class/new", json={"query": ""})
    assert r.status_code == 200
    code = r.json["code"]
    joined(app, code, 1)
    clock.t += 601                                # nobody joined the script's three
    assert script.post("/class/new", json={"query": ""}).status_code == 200
    assert app.test_client().get(f"/class/{made[0].json['code']}/state").status_code == 404
    assert app.test_client().get(f"/class/{code}/state").status_code == 200   # joined: lives


# --- guessing ------------------------------------------------------------------------------

def test_unknown_codes_count_on_every_route_and_lock_every_route(model, tmp_path):
    app, _ = make_app(model, tmp_path, join_failures=4)
    teacher, code = start(app)
    guesser = client_at(app, "192.0.2.50")
    assert guesser.get("/class/ABCD234/state").status_code == 404
    assert guesser.get("/class/ABCD235/qr.svg").status_code == 404
    assert guesser.post("/class/ABCD236/polls/1/answer", json={"answer": "x"}).status_code == 404
    assert guesser.post("/class/ABCD237/end", json={}).status_code == 404
    for path in (f"/class/{code}/state", f"/class/{code}/qr.svg", "/class/ABCD238/state"):
        r = guesser.get(path)                     # locked: the right code says nothing either
        assert r.status_code == 429 and r.headers["Retry-After"] == "600", path
    assert guesser.get(f"/class/{code}").status_code == 429
    assert client_at(app, "192.0.2.51").get(f"/class/{code}/state").status_code == 200


def test_a_class_that_just_ended_is_not_a_wrong_code(model, tmp_path):
    app, _ = make_app(model, tmp_path, join_failures=3)
    teacher, code = start(app)
    phone = client_at(app, "192.0.2.60")
    phone.get(f"/class/{code}")
    teacher.post(f"/class/{code}/end", json={})
    for _ in range(10):                           # its follow polls and reloads after the end
        assert phone.get(f"/class/{code}/state").status_code == 404
    assert phone.get("/class/ABCD239/state").status_code == 404     # a real wrong code: 1
    _, code2 = start(app)
    assert phone.get(f"/class/{code2}").status_code == 303          # not locked out


def test_a_code_with_characters_codes_never_use_says_so_and_is_not_a_try(model, tmp_path):
    app, _ = make_app(model, tmp_path, join_failures=2)
    _, code = start(app)
    phone = client_at(app, "192.0.2.70")
    for _ in range(5):
        r = phone.get("/class", query_string={"code": "94D0Q3X"})
        page = r.get_data(as_text=True)
        assert r.status_code == 422 and "never use 0" in page and "is not a class code" not in page
    r = phone.get("/class", query_string={"code": "AB?DEFG"})
    assert r.status_code == 422 and "“?” is not one of them" in r.get_data(as_text=True)
    assert phone.get(f"/class/{code}").status_code == 303


# --- answers mean what was typed -------------------------------------------------------------

@pytest.mark.parametrize("kind,typed,status,stored", [
    ("top-prob", "1,5", 200, "1.5"), ("top-prob", "77,3 %", 200, "77.3"),
    ("top-prob", "77.3", 200, "77.3"), ("n-tokens", "1,5", 422, None),
    ("kv-bytes", "86,016", 200, "86016"), ("kv-bytes", "86 016", 200, "86016"),
    ("kv-bytes", "1_000", 422, None), ("kv-bytes", "1.2.3", 422, None),
    ("next-token", "a\u202eb", 422, None), ("next-token", "wi\u0085fe", 422, None),
    ("next-token", "\u200d", 422, None), ("next-token", "wi\u200bfe", 422, None),
    ("next-token", "👩\u200d💻", 200, "👩\u200d💻"), ("next-token", " wife", 200, "wife"),
])
def test_answers_mean_what_was_typed(app, kind, typed, status, stored):
    teacher, code = start(app)
    student, = joined(app, code, 1)
    pid = teacher.post(f"/class/{code}/polls", json={"kind": kind}).json["id"]
    r = student.post(f"/class/{code}/polls/{pid}/answer", json={"answer": typed})
    assert r.status_code == status, r.json
    if stored is not None:
        assert r.json["answer"] == stored
    else:
        assert r.json["error"]
    if "\u202e" in typed:
        assert "U+202E RIGHT-TO-LEFT OVERRIDE" in r.json["error"]
    if "_" in typed:
        assert "“_” is not part of a number" in r.json["error"]


# --- the teacher keeps the class -------------------------------------------------------------

def test_the_teachers_cookie_is_renewed_and_a_second_session_strands_nothing(app):
    teacher, first = start(app)
    r = teacher.post(f"/class/{first}/state", json={"query": "tour=2"})
    renewed = [c for c in r.headers.getlist("Set-Cookie") if c.startswith("cls_t=")]
    assert renewed and "Max-Age=7200" in renewed[0] and f"{first}." in renewed[0]
    student, = joined(app, first, 1)
    second = teacher.post("/class/new", json={"query": ""})
    assert second.status_code == 200
    assert [o["code"] for o in second.json["others"]] == [first]
    assert second.json["others"][0]["members"] == 1
    mine = teacher.get("/class/mine").json["sessions"]
    assert sorted(s["code"] for s in mine) == sorted([first, second.json["code"]])
    # the first session, which holds the student, is still the teacher's
    pid = teacher.post(f"/class/{first}/polls", json={"kind": "n-tokens"}).json["id"]
    student.post(f"/class/{first}/polls/{pid}/answer", json={"answer": "9"})
    assert teacher.post(f"/class/{first}/polls/{pid}/reveal", json={}).json["total"] == 1
    assert teacher.post(f"/class/{first}/end", json={}).status_code == 200
    assert [s["code"] for s in teacher.get("/class/mine").json["sessions"]] == \
        [second.json["code"]]
    assert teacher.post(f"/class/{second.json['code']}/state",
                        json={"query": "tour=3"}).status_code == 200


def test_every_answer_a_section_gives_away_is_a_polls():
    """A section's gives_away names what the polls ask (a misspelt name would withhold nothing)."""
    answers = {k.answer for k in polls.KINDS.values()}
    named = {a for s in sections() for a in s.gives_away}
    assert named and named <= answers, named - answers
    # and each poll's answer but "everywhere" is shown by some section (its own, at least)
    for k in polls.KINDS.values():
        assert k.answer == "*" or k.section in k.withholds, k.id
