"""Identical requests are computed once (web/serving/shared_answers.py): a class that opens the same
page in the same second gets it from one computation, outside the compute gate, and what a
class's member is withheld is never served to anyone else (nor the reverse)."""
import threading

from tests.test_classroom_api import joined, make_app, start
from web.core.views import builds


def test_sixty_identical_page_loads_are_computed_once_and_none_is_refused(model, tmp_path):
    from app import create_app
    app = create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False,
                      "PROBE_ENCODINGS": False, "GATE_SLOTS": 1, "GATE_WAITING": 0,
                      "CLASSROOM_DATA_DIR": str(tmp_path / "data")})
    gate = app.extensions["explainer_gate"]
    url = "/?prompt=The%20class%20opens%20one%20page&tour=3"
    start_line = threading.Barrier(60)
    statuses = []

    def phone():
        c = app.test_client()
        start_line.wait()
        statuses.append(c.get(url).status_code)

    with app.app_context():
        before = dict(builds())
        threads = [threading.Thread(target=phone) for _ in range(60)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        shared = app.extensions["shared_answers"]
        assert statuses == [200] * 60
        assert shared.computed == 1 and shared.shared == 59
        made = {k: v - before.get(k, 0) for k, v in builds().items() if v != before.get(k, 0)}
        assert made and set(made.values()) == {1}           # each eager section built once
        # another page is not served from it, and still passes the gate
        gate.acquire()
        try:
            assert app.test_client().get(url + "&theme=dark").status_code == 503
            assert app.test_client().get(url).status_code == 200
        finally:
            gate.release()


def test_a_shared_answer_keeps_the_headers_of_every_answer_and_no_cookie(model, tmp_path):
    app, _ = make_app(model, tmp_path)
    with app.app_context():
        c = app.test_client()
        first = c.get("/section/logits?prompt=Once%20upon", headers={"HX-Request": "true"})
        again = app.test_client().get("/section/logits?prompt=Once%20upon",
                                      headers={"HX-Request": "true"})
        assert app.extensions["shared_answers"].shared >= 1
        assert again.get_data() == first.get_data()
        for h in ("Content-Security-Policy", "Vary", "HX-Push-Url", "Content-Type"):
            assert again.headers[h] == first.headers[h], h
        # a different htmx target is another answer
        part = app.test_client().get("/section/logits?prompt=Once%20upon",
                                     headers={"HX-Request": "true", "HX-Target": "logits-live"})
        assert part.get_data() != first.get_data()


def test_what_a_member_is_withheld_is_not_what_others_are_served(model, tmp_path):
    app, _ = make_app(model, tmp_path)
    with app.app_context():
        teacher, code = start(app)
        student, = joined(app, code, 1)
        query = teacher.get(f"/class/{code}/state").json["query"]
        teacher.post(f"/class/{code}/polls", json={"kind": "next-token"})
        held = student.get(f"/section/logits?{query}").get_data(as_text=True)
        public = app.test_client().get(f"/section/logits?{query}").get_data(as_text=True)
        again = student.get(f"/section/logits?{query}").get_data(as_text=True)
        assert "Withheld until the reveal." in held and "Withheld" not in public
        assert again == held and 'data-predict="next-token"' in public
