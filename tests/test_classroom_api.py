"""The class's routes on the real app and model: start, join by code or link, follow with
ETags, polls answered once per student, the reveal's model side from the sections' own builds,
403 for students, validation, caps, the join rate limit and expiry deleting answers."""
import math
import re
import urllib.parse

import numpy as np
import pytest

from pipeline.sampling import softmax_with_temperature
from web.classroom import codes, polls
from web.core.cache import cached_build
from web.core.registry import section
from web.model_state.forward import prompt_ids, prompt_run

PROMPT = "It is a truth universally acknowledged, that a single man in possession of a good"
QUERY = "prompt=" + PROMPT.replace(" ", "%20") + "&tour=8&present=1&theme=dark&bogus=1"


class Clock:
    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t


def make_app(model, tmp_path, store="sqlite", **limits):
    from app import create_app
    clock = Clock()
    app = create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False,
                      "PROBE_ENCODINGS": False, "CLASSROOM_STORE": store,
                      "CLASSROOM_DATA_DIR": str(tmp_path / "data"),
                      "CLASSROOM_LIMITS": limits, "CLASSROOM_CLOCK": clock})
    return app, clock


@pytest.fixture()
def app(model, tmp_path):
    app, clock = make_app(model, tmp_path)
    app.clock = clock
    with app.app_context():
        yield app


def client_at(app, address):
    c = app.test_client()
    c.environ_base["REMOTE_ADDR"] = address
    return c


def start(app, query=QUERY):
    teacher = app.test_client()
    r = teacher.post("/class/new", json={"query": query})
    assert r.status_code == 200, r.json
    return teacher, r.json["code"]


def joined(app, code, n):
    out = []
    for i in range(n):
        c = client_at(app, f"10.0.0.{i + 1}")
        r = c.get(f"/class/{code}")
        assert r.status_code == 303, r.get_data(as_text=True)
        out.append(c)
    return out


def test_start_gives_an_unguessable_code_a_teacher_cookie_and_a_qr_code(app):
    assert codes.CODE_BITS >= 30 and not set("01ILO") & set(codes.ALPHABET)
    teacher = app.test_client()
    r = teacher.post("/class/new", json={"query": QUERY})
    code = r.json["code"]
    assert re.fullmatch(f"[{codes.ALPHABET}]{{7}}", code)
    assert r.json["join_url"].endswith(f"/class/{code}")
    assert r.json["shown"] == code[:4] + " " + code[4:]
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith(f"cls_t={code}.") and "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie and "Path=/class" in cookie
    store = app.extensions["classroom"].store
    secret = cookie.split(";")[0].split(".", 1)[1]
    assert secret not in str(store.session(code, app.clock())) and len(secret) >= 40
    svg = teacher.get(r.json["qr"])
    assert svg.mimetype == "image/svg+xml" and b'xmlns="http://www.w3.org/2000/svg"' in svg.data
    assert r.json["join_url"].encode() in svg.data
    # the followed state: the page's own parameters only, the teacher's theme left out
    assert teacher.get(f"/class/{code}/state").json["query"] == \
        "prompt=" + urllib.parse.quote(PROMPT) + "&tour=8&present=1"


def test_join_by_code_or_link_then_follow_with_etags(app):
    teacher, code = start(app)
    student = app.test_client()
    typed = code[:3].lower() + "-" + code[3:].lower()
    r = student.get("/class", query_string={"code": typed})
    assert r.status_code == 303
    query = teacher.get(f"/class/{code}/state").json["query"]
    assert r.headers["Location"] == f"/?{query}#class={code}"
    cookie = r.headers["Set-Cookie"]
    assert re.match(r"cls_s=[A-Za-z0-9_-]{22};",
                    cookie) and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    again = student.get(f"/class/{code}")                     # the link: the same student
    assert again.status_code == 303
    first = student.get(f"/class/{code}/state")
    assert first.json["members"] == 1 and first.json["member"] and not first.json["teacher"]
    etag = first.headers["ETag"]
    assert student.get(f"/class/{code}/state", headers={"If-None-Match": etag}).status_code == 304
    assert teacher.post(f"/class/{code}/state",
                        json={"query": "tour=9&present=1"}).status_code == 200
    changed = student.get(f"/class/{code}/state", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.json["query"] == "tour=9&present=1"
    assert changed.headers["ETag"] != etag


def test_a_wrong_code_gets_a_clear_page_and_attempts_are_rate_limited(model, tmp_path):
    app, _ = make_app(model, tmp_path, join_failures=3)
    _, code = start(app)
    guesser = client_at(app, "192.0.2.7")
    r = guesser.get("/class", query_string={"code": "ABCD234"})
    assert r.status_code == 404 and "There is no class with the code" in r.get_data(as_text=True)
    r = guesser.get("/class", query_string={"code": "<script>"})
    page = r.get_data(as_text=True)
    assert r.status_code == 422 and "is not one of them" in page and "<script>" not in page
    assert guesser.get("/class/ZZZZZZZ").status_code == 404
    assert guesser.get("/class/ZZZZZZY").status_code == 404
    r = guesser.get(f"/class/{code}")                          # even the right code, now
    assert r.status_code == 429 and r.headers["Retry-After"] == "600"
    assert "Too many wrong codes" in r.get_data(as_text=True)
    other = client_at(app, "192.0.2.8")
    assert other.get(f"/class/{code}").status_code == 303


def test_only_the_teacher_changes_the_session(app):
    teacher, code = start(app)
    _, other_code = start(app)
    student, = joined(app, code, 1)
    pid = teacher.post(f"/class/{code}/polls", json={"kind": "n-tokens"}).json["id"]
    stranger = app.test_client()
    other_teacher = app.test_client()
    other_teacher.set_cookie("cls_t", f"{other_code}.whatever", path="/class")
    forged = app.test_client()
    forged.set_cookie("cls_t", f"{code}.not-the-secret", path="/class")
    for c in (student, stranger, other_teacher, forged):
        for path, body in ((f"/class/{code}/state", {"query": "tour=2"}),
                           (f"/class/{code}/polls", {"kind": "next-token"}),
                           (f"/class/{code}/polls/{pid}/reveal", {}),
                           (f"/class/{code}/end", {})):
            r = c.post(path, json=body)
            assert r.status_code == 403, (path, r.json)
    assert teacher.get(f"/class/{code}/state").json["poll"]["status"] == "open"
    # a form or another site's page cannot act for the teacher
    assert teacher.post(f"/class/{code}/end", data="x").status_code == 415
    assert teacher.post(f"/class/{code}/end", json={},
                        headers={"Origin": "http://evil.example"}).status_code == 403
    assert teacher.post(f"/class/{code}/end", json={}).status_code == 200
    assert student.get(f"/class/{code}/state").status_code == 404


def model_answer(app, kind_id, query):
    """What the section itself shows for this state (its cached build, as it renders)."""
    from web.classroom.views import teacher_view
    lm, state = teacher_view(query)
    ctx = cached_build(section(polls.KINDS[kind_id].section), lm, state)
    return lm, state, ctx


@pytest.mark.parametrize("kind", list(polls.KINDS))
def test_every_poll_kind_reveals_the_sections_own_answer(app, kind):
    teacher, code = start(app)
    students = joined(app, code, 3)
    opened = teacher.post(f"/class/{code}/polls", json={"kind": kind})
    assert opened.status_code == 200 and "answer" not in opened.json
    pid = opened.json["id"]
    lm, state, ctx = model_answer(app, kind, teacher.get(f"/class/{code}/state").json["query"])
    expected = {"next-token": lambda: ctx["rows"][0].text.replace("·", " ").strip(),
                "top-prob": lambda: round(100 * ctx["rows"][0].p1, 1),
                "n-tokens": lambda: len(prompt_ids(lm, PROMPT)),
                "top-p-half": lambda: ctx["half"].kept,
                "beam-vs-greedy": lambda: ctx["verdict"],
                "kv-bytes": lambda: ctx["final_nbytes"]}[kind]()
    poll = students[0].get(f"/class/{code}/state").json["poll"]
    assert "answer" not in poll and "shown" not in poll and poll["status"] == "open"
    if poll["input"] == "choice":
        guesses = [poll["choices"][0]] * 2 + [poll["choices"][1]]
    else:
        guesses = {"text": ["wife", "Wife ", "husband"], "number": ["1", "1", "2"]}[poll["input"]]
    for s, g in zip(students, guesses, strict=True):
        assert s.post(f"/class/{code}/polls/{pid}/answer", json={"answer": g}).status_code == 200
    assert teacher.get(f"/class/{code}/state").json["poll"]["answered"] == 3
    r = teacher.post(f"/class/{code}/polls/{pid}/reveal", json={})
    assert r.status_code == 200
    out = r.json
    assert out["model_answer"] == expected and out["total"] == 3
    assert [g["count"] for g in out["groups"]] == [2, 1]
    after = students[1].get(f"/class/{code}/state").json["poll"]
    assert after["status"] == "revealed" and after["reveal"] == out
    late = students[2].post(f"/class/{code}/polls/{pid}/answer", json={"answer": guesses[0]})
    assert late.status_code == 409


def test_next_token_reveal_puts_the_class_beside_the_models_probabilities(app):
    teacher, code = start(app)
    students = joined(app, code, 4)
    pid = teacher.post(f"/class/{code}/polls", json={"kind": "next-token"}).json["id"]
    for s, g in zip(students, ["wife", " Wife", "house", "<b>x</b>"], strict=True):
        s.post(f"/class/{code}/polls/{pid}/answer", json={"answer": g})
    students[2].post(f"/class/{code}/polls/{pid}/answer", json={"answer": "wife"})   # changed
    out = teacher.post(f"/class/{code}/polls/{pid}/reveal", json={}).json
    lm = app.extensions["explainer"].default_model
    p1 = softmax_with_temperature(prompt_run(lm, PROMPT).logits[-1], 1.0)
    wife = [i for i in range(lm.model.config.vocab_size)
            if lm.tokenizer.decode([i]).strip().lower() == "wife"]
    assert wife
    assert out["total"] == 4 and out["groups"][0]["count"] == 3
    assert out["favourite"]["answer"] == "wife" and out["favourite"]["share"] == 0.75
    assert math.isclose(out["favourite"]["p"], float(p1[wife].sum(dtype=np.float64)), rel_tol=1e-6)
    assert out["groups"][1] == {"answer": "<b>x</b>", "count": 1, "share": 0.25, "right": False,
                                "p": None}
    top = int(np.argmax(p1))
    assert math.isclose(out["model_p"], float(p1[top]), rel_tol=1e-6)
    fig = out["figure"]
    assert fig["data"][0]["y"][:2] == [0.75, 0.25]
    assert "&lt;b&gt;x&lt;/b&gt;" in fig["data"][0]["x"] and "<b>x</b>" not in fig["data"][0]["x"]
    assert fig["layout"]["yaxis"]["range"] == [0, 1]


def test_answers_are_validated(app):
    teacher, code = start(app)
    student, = joined(app, code, 1)
    outsider = app.test_client()
    pid = teacher.post(f"/class/{code}/polls", json={"kind": "top-p-half"}).json["id"]
    post = lambda c, a: c.post(f"/class/{code}/polls/{pid}/answer", json={"answer": a})  # noqa: E731
    assert post(student, "x" * 41).status_code == 422
    assert post(student, "-1").status_code == 422
    assert post(student, "10000000").status_code == 422
    assert post(student, "nan").status_code == 422
    assert post(student, "").status_code == 422
    assert post(student, "a\x00b").status_code == 422
    assert post(outsider, "3").status_code == 403
    assert student.post(f"/class/{code}/polls/{pid + 1}/answer",
                        json={"answer": "3"}).status_code == 409
    assert post(student, "1,024").json == {"answer": "1024", "changed": False}
    assert post(student, "12").json == {"answer": "12", "changed": True}
    pid2 = teacher.post(f"/class/{code}/polls", json={"kind": "beam-vs-greedy"}).json["id"]
    assert post(student, "3").status_code == 409                            # superseded
    r = student.post(f"/class/{code}/polls/{pid2}/answer", json={"answer": "better"})
    assert r.status_code == 422 and "Choose one of" in r.json["error"]
    assert teacher.post(f"/class/{code}/polls", json={"kind": "nope"}).status_code == 422


def test_caps_from_web_limits(model, tmp_path):
    app, _ = make_app(model, tmp_path, sessions=2, members=2, polls=2, answers=3)
    teacher, code = start(app)
    start(app)
    r = app.test_client().post("/class/new", json={"query": ""})
    assert r.status_code == 429 and "limit" in r.json["error"]
    a, b = joined(app, code, 2)
    r = app.test_client().get(f"/class/{code}")
    assert r.status_code == 429 and "full" in r.get_data(as_text=True)
    answer = lambda c, pid: c.post(f"/class/{code}/polls/{pid}/answer", json={"answer": "1"})  # noqa: E731
    first = teacher.post(f"/class/{code}/polls", json={"kind": "n-tokens"}).json["id"]
    assert answer(a, first).status_code == 200 and answer(b, first).status_code == 200
    second = teacher.post(f"/class/{code}/polls", json={"kind": "n-tokens"}).json["id"]
    r = teacher.post(f"/class/{code}/polls", json={"kind": "n-tokens"})
    assert r.status_code == 429 and "polls" in r.json["error"]
    assert answer(a, second).status_code == 200                        # the 3rd answer
    assert answer(a, second).status_code == 200                        # changed: not a 4th
    r = answer(b, second)
    assert r.status_code == 429 and "3 answers" in r.json["error"]
    assert teacher.get(f"/class/{code}/state").json["poll"]["answered"] == 1


def test_expiry_deletes_the_session_and_its_answers(model, tmp_path):
    app, clock = make_app(model, tmp_path, idle_seconds=600)
    teacher, code = start(app)
    students = joined(app, code, 2)
    pid = teacher.post(f"/class/{code}/polls", json={"kind": "n-tokens"}).json["id"]
    for s in students:
        s.post(f"/class/{code}/polls/{pid}/answer", json={"answer": "5"})
    store = app.extensions["classroom"].store
    assert store.counts()["answers"] == 2
    clock.t += 599
    assert students[0].get(f"/class/{code}/state").status_code == 200
    clock.t += 2
    assert students[0].get(f"/class/{code}/state").status_code == 404
    assert teacher.post(f"/class/{code}/state", json={"query": ""}).status_code == 404
    r = app.test_client().get(f"/class/{code}")
    assert r.status_code == 404 and "ended or" in r.get_data(as_text=True)
    store.expire(clock.t)
    assert store.counts() == {"sessions": 0, "members": 0, "polls": 0, "answers": 0}


def test_the_redis_store_serves_the_same_routes(model, tmp_path, redis_url):
    app, _ = make_app(model, tmp_path, store=redis_url)
    with app.app_context():
        teacher, code = start(app)
        students = joined(app, code, 3)
        pid = teacher.post(f"/class/{code}/polls", json={"kind": "next-token"}).json["id"]
        for s, g in zip(students, ["wife", "wife", "man"], strict=True):
            assert s.post(f"/class/{code}/polls/{pid}/answer",
                          json={"answer": g}).status_code == 200
        assert students[0].post(f"/class/{code}/polls",
                                json={"kind": "n-tokens"}).status_code == 403
        out = teacher.post(f"/class/{code}/polls/{pid}/reveal", json={}).json
        assert out["total"] == 3 and [g["count"] for g in out["groups"]] == [2, 1]
        assert app.extensions["classroom"].store.kind == "redis"


def test_joins_polls_and_answers_pass_outside_the_compute_gate():
    from web.serving.server import gated
    for endpoint in ("classroom.follow", "classroom.teacher_state", "classroom.answer",
                     "classroom.join_form", "classroom.join_link"):
        assert not gated(endpoint), endpoint
    for endpoint in ("classroom.open_poll", "classroom.reveal", "classroom.new", "classroom.qr"):
        assert gated(endpoint), endpoint


@pytest.mark.parametrize("guess, right", [("77", True), ("77.3", True), ("77.25", True),
                                          ("77.2", False), ("78", False), ("80", False),
                                          ("77.0", True), ("76.5", False)])
def test_a_percentage_is_right_at_the_precision_it_is_written_with(guess, right):
    """The top-prob poll shows the model's 77.2530...% as "77.3%": a guess is right within half a
    unit of its own last decimal place (never finer than the one shown) of the exact value."""
    spec = dict(kind="top-prob", input="number", question="q", shown="77.3%", answer=77.3,
                exact=77.2530, decimals=1)
    stored = polls.validate(spec | {"min": 0, "max": 100}, guess)
    out = polls.reveal(spec, [stored])
    assert out["groups"][0]["right"] is right and out["right"] == int(right)
    assert "precision" in out["right_means"]


def test_a_whole_number_poll_is_right_only_when_equal():
    spec = dict(kind="n-tokens", input="number", question="q", shown="12 tokens", answer=12,
                min=0, max=100, whole=True)
    out = polls.reveal(spec, [polls.validate(spec, g) for g in ("12", "11", "13")])
    assert [(g["answer"], g["right"]) for g in out["groups"]] == [
        ("11", False), ("12", True), ("13", False)]
    assert "right_means" not in out


def test_the_top_prob_poll_keeps_the_exact_value_it_judges_by(app):
    teacher, code = start(app)
    student, = joined(app, code, 1)
    pid = teacher.post(f"/class/{code}/polls", json={"kind": "top-prob"}).json["id"]
    lm, state, ctx = model_answer(app, "top-prob",
                                  teacher.get(f"/class/{code}/state").json["query"])
    exact = 100 * float(ctx["rows"][0].p1)
    guess = f"{exact:.0f}"                      # the whole percent nearest the model's value
    assert student.post(f"/class/{code}/polls/{pid}/answer",
                        json={"answer": guess}).status_code == 200
    out = teacher.post(f"/class/{code}/polls/{pid}/reveal", json={}).json
    assert out["model_answer"] == round(exact, 1) and out["right"] == 1
