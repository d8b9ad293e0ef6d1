"""The class when its Redis store fails: stopped, frozen (SIGSTOP) or killed with -9 in the middle
of a session. Every class route answers a 503 saying so within a bounded time (never a 500, never
a 10 s hang), the app works again by itself when Redis is back, nothing acknowledged is lost
with the recipe's persistence options, and a session's end reaches the followers of another
instance at once."""
import time

from tests.redis_server_support import readme_redis_args
from web.classroom.store import UNAVAILABLE

# A hang of the old client was 10 s (its socket timeout) and more with its retries; the
# benchmark (bench/bench_classroom.py --redis-faults) measures the real time to answer.
BOUND = 3.0
ORIGIN = {"Origin": "http://localhost"}


def make_app(model, tmp_path, url):
    from app import create_app
    return create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False,
                       "PROBE_ENCODINGS": False, "CLASSROOM_STORE": url,
                       "CLASSROOM_DATA_DIR": str(tmp_path / "data")})


def client_at(app, address):
    c = app.test_client()
    c.environ_base["REMOTE_ADDR"] = address
    return c


class Lesson:
    """A session on `app`: the teacher, two students who joined, a poll both answered."""

    def __init__(self, app, answers=("wife", "man")):
        self.app = app
        self.teacher = client_at(app, "10.1.0.1")
        r = self.teacher.post("/class/new", json={"query": "tour=2&present=1"}, headers=ORIGIN)
        assert r.status_code == 200, r.json
        self.code = r.json["code"]
        self.students = []
        for i, _ in enumerate(answers):
            s = client_at(app, f"10.1.1.{i + 1}")
            assert s.get(f"/class/{self.code}").status_code == 303
            self.students.append(s)
        r = self.teacher.post(f"/class/{self.code}/polls", json={"kind": "next-token"},
                              headers=ORIGIN)
        assert r.status_code == 200, r.json
        self.poll = r.json["id"]
        for s, a in zip(self.students, answers, strict=True):
            r = s.post(f"/class/{self.code}/polls/{self.poll}/answer", json={"answer": a},
                       headers=ORIGIN)
            assert r.status_code == 200, r.json
        r = self.students[0].get(f"/class/{self.code}/state")
        assert r.status_code == 200
        self.etag = r.headers["ETag"]

    def routes(self):
        """(name, kind, call) for every class route, as its own user sends it."""
        code, pid, t, s = self.code, self.poll, self.teacher, self.students[0]
        newcomer = client_at(self.app, "10.1.2.1")
        return [
            ("GET /class?code=", "html", lambda: newcomer.get(f"/class?code={code}")),
            ("GET /class/<code>", "html", lambda: newcomer.get(f"/class/{code}")),
            ("GET /class/<code>/state", "json", lambda: newcomer.get(f"/class/{code}/state")),
            ("GET /class/<code>/state (follower)", "json", lambda: s.get(
                f"/class/{code}/state", headers={"If-None-Match": self.etag})),
            ("GET /class/<code>/qr.svg", "json", lambda: t.get(f"/class/{code}/qr.svg")),
            ("POST /class/new", "json", lambda: newcomer.post(
                "/class/new", json={"query": "tour=1"}, headers=ORIGIN)),
            ("POST /class/<code>/state", "json", lambda: t.post(
                f"/class/{code}/state", json={"query": "tour=3&present=1"}, headers=ORIGIN)),
            ("POST /class/<code>/polls", "json", lambda: t.post(
                f"/class/{code}/polls", json={"kind": "n-tokens"}, headers=ORIGIN)),
            ("POST /class/<code>/polls/<id>/answer", "json", lambda: s.post(
                f"/class/{code}/polls/{pid}/answer", json={"answer": "husband"},
                headers=ORIGIN)),
            ("POST /class/<code>/polls/<id>/reveal", "json", lambda: t.post(
                f"/class/{code}/polls/{pid}/reveal", json={}, headers=ORIGIN)),
            ("POST /class/<code>/end", "json", lambda: t.post(
                f"/class/{code}/end", json={}, headers=ORIGIN)),
        ]

    def state(self, client=None):
        return (client or self.teacher).get(f"/class/{self.code}/state")


def assert_unavailable(name, kind, call, deadline=BOUND):
    """The route answers 503 with the message within `deadline` s. A follower's poll of an
    unchanged session may be answered 304 from what the instance heard until it notices."""
    start = time.monotonic()
    while True:
        t0 = time.monotonic()
        r = call()
        took = time.monotonic() - t0
        assert took < BOUND, f"{name}: {took:.1f} s to answer"
        if r.status_code != 304 or time.monotonic() - start > deadline:
            break
    assert r.status_code == 503, (name, r.status_code, r.get_data(as_text=True)[:300])
    assert r.headers.get("Retry-After", "").isdigit(), name
    assert r.headers.get("Cache-Control") == "no-store", name
    if kind == "json":
        assert r.json == {"error": UNAVAILABLE}, name
    else:
        page = r.get_data(as_text=True)
        assert r.mimetype == "text/html" and UNAVAILABLE in page and 'role="alert"' in page, name
    return time.monotonic() - start


def wait_until_served(lesson, timeout=5.0):
    """The app answers again by itself (no restart): the teacher's state poll is a 200."""
    deadline = time.monotonic() + timeout
    while True:
        r = lesson.state()
        if r.status_code == 200:
            return r.json
        assert r.status_code == 503, r.status_code
        assert time.monotonic() < deadline, "the app did not come back with Redis"
        time.sleep(0.05)


def test_redis_stopped_every_route_says_so_and_the_class_goes_on_when_it_returns(
        model, tmp_path, aof_redis):
    app = make_app(model, tmp_path, aof_redis.url)
    with app.app_context():
        lesson = Lesson(app)
        aof_redis.stop()
        for name, kind, call in lesson.routes():
            assert_unavailable(name, kind, call)
        assert app.test_client().get("/class").status_code == 200   # the form needs no store
        aof_redis.start()
        state = wait_until_served(lesson)
        assert state["members"] == 2 and state["poll"]["answered"] == 2
        r = lesson.teacher.post(f"/class/{lesson.code}/polls/{lesson.poll}/reveal", json={},
                                headers=ORIGIN)
        assert r.status_code == 200 and r.json["total"] == 2
        # the listener is back too: a change is heard, and followers are answered from it
        store = app.extensions["classroom"].store
        assert store._listening.wait(3)
        v = lesson.teacher.post(f"/class/{lesson.code}/state", json={"query": "tour=4"},
                                headers=ORIGIN).json["version"]
        deadline = time.monotonic() + 2
        while store._heard.get(lesson.code, (0,))[0] != v:
            assert time.monotonic() < deadline, "the listener did not hear the change"
            time.sleep(0.01)


def test_redis_frozen_every_route_answers_in_time_then_recovers(
        model, tmp_path, aof_redis):
    app = make_app(model, tmp_path, aof_redis.url)
    with app.app_context():
        lesson = Lesson(app)
        aof_redis.freeze()
        try:
            for name, kind, call in lesson.routes():
                assert_unavailable(name, kind, call)
        finally:
            aof_redis.thaw()
        state = wait_until_served(lesson)
        assert state["members"] == 2 and state["poll"]["answered"] == 2
        r = lesson.teacher.post(f"/class/{lesson.code}/state", json={"query": "tour=5"},
                                headers=ORIGIN)
        assert r.status_code == 200


def test_the_end_reaches_a_follower_on_another_instance_within_a_second(
        model, tmp_path, aof_redis):
    one = make_app(model, tmp_path / "one", aof_redis.url)
    other = make_app(model, tmp_path / "other", aof_redis.url)     # a second app instance
    with one.app_context():
        teacher = one.test_client()
        code = teacher.post("/class/new", json={"query": "tour=2"}, headers=ORIGIN).json["code"]
    with other.app_context():
        student = other.test_client()
        assert student.get(f"/class/{code}").status_code == 303
        etag = student.get(f"/class/{code}/state").headers["ETag"]
        store = other.extensions["classroom"].store
        assert store._listening.wait(5)
        assert student.get(f"/class/{code}/state",
                           headers={"If-None-Match": etag}).status_code == 304
    with one.app_context():
        assert teacher.post(f"/class/{code}/end", json={}, headers=ORIGIN).status_code == 200
        ended = time.monotonic()
    with other.app_context():
        while True:
            r = student.get(f"/class/{code}/state", headers={"If-None-Match": etag})
            if r.status_code != 304:
                break
            assert time.monotonic() - ended < 1.0, "the end took more than 1 s to arrive"
            time.sleep(0.02)
        assert r.status_code == 404
        assert time.monotonic() - ended < 1.0


def test_redis_killed_mid_session_keeps_every_answer(model, tmp_path, aof_redis):
    """kill -9 of the recipe's redis-server: what was written to its append-only file is
    there after a restart on the same port and directory, and the app (not restarted) serves
    the session again."""
    app = make_app(model, tmp_path, aof_redis.url)
    answers = [f"guess{i}" for i in range(6)]
    with app.app_context():
        lesson = Lesson(app, answers)
        aof_redis.wait_in_aof(answers[-1].encode())
        aof_redis.kill()
        name, kind, call = lesson.routes()[8]                      # a student answers
        assert_unavailable(name, kind, call)
        aof_redis.start()
        state = wait_until_served(lesson)
        assert state["members"] == 6 and state["poll"]["status"] == "open"
        assert state["poll"]["answered"] == 6
        r = lesson.students[1].post(f"/class/{lesson.code}/polls/{lesson.poll}/answer",
                                    json={"answer": "changed"}, headers=ORIGIN)
        assert r.status_code == 200 and r.json["changed"] is True
        r = lesson.teacher.post(f"/class/{lesson.code}/polls/{lesson.poll}/reveal", json={},
                                headers=ORIGIN)
        assert r.status_code == 200 and r.json["total"] == 6
        counted = {g["answer"]: g["count"] for g in r.json["groups"]}
        assert sum(counted.values()) + r.json["others"] == 6


def test_the_readme_recipe_runs_redis_with_an_append_only_file():
    args = " ".join(readme_redis_args())
    assert "--appendonly yes" in args and "--appendfsync everysec" in args


def test_an_ended_session_is_none_at_once_on_another_store_instance(aof_redis):
    from web.classroom.store.redis import RedisStore
    one = RedisStore(aof_redis.url, 3600, prefix="ended:")
    other = RedisStore(aof_redis.url, 3600, prefix="ended:")           # another process
    try:
        one.create("ABCDEFG", "hash", "tour=1", 1000.0, 10)
        one.join("ABCDEFG", "student00", 1000.0, 10)
        v = other.version("ABCDEFG", 1000.0)
        assert v and other._listening.wait(5)
        assert other.version("ABCDEFG", 1000.0) == v                  # from what it heard
        one.end("ABCDEFG")
        ended = time.monotonic()
        while other.version("ABCDEFG", 1000.0) is not None:
            assert time.monotonic() - ended < 1.0, "the end took more than 1 s to arrive"
            time.sleep(0.01)
        assert other.session("ABCDEFG", 1000.0) is None
    finally:
        one.close()
        other.close()


def test_a_locked_sqlite_store_is_a_503_too(model, tmp_path):
    """The default store's "database is locked" (a writer holding the file past the busy
    timeout) is the same 503, not a 500."""
    import sqlite3
    app = make_app(model, tmp_path, "sqlite")
    with app.app_context():
        teacher = client_at(app, "10.1.0.1")
        code = teacher.post("/class/new", json={"query": "tour=2"}, headers=ORIGIN).json["code"]
        store = app.extensions["classroom"].store
        store._conn().execute("PRAGMA busy_timeout=50")      # this thread's connection
        holder = sqlite3.connect(store.path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            r = teacher.post(f"/class/{code}/state", json={"query": "tour=3"}, headers=ORIGIN)
            assert r.status_code == 503 and r.json == {"error": UNAVAILABLE}
            assert r.headers["Retry-After"].isdigit()
            r = client_at(app, "10.1.1.1").get(f"/class/{code}")
            assert r.status_code == 503 and UNAVAILABLE in r.get_data(as_text=True)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert teacher.post(f"/class/{code}/state", json={"query": "tour=3"},
                            headers=ORIGIN).status_code == 200
