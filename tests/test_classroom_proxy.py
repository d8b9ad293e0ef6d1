"""The several-instance recipe of docs/classroom.md, run for real: one redis-server (append-only
file), two app instances (`app.py --workers 1 --store redis://... --proxy 1`) and nginx with the
recipe's configuration in front. Through the proxy a teacher starts a class and students join, each
from its own address with its own cookies; their polls reach both instances; a slide change, the
answers and the end reach every one of them; the join limit counts each student's own address and a
forged X-Forwarded-For does not escape it."""
import concurrent.futures
import random
import time

import pytest

from tests.classroom_support import NO_REDIS
from tests.proxy_support import NO_NGINX, Cluster, nginx_exe
from web.classroom import codes
from web.core.limits import CLASSROOM

STUDENTS = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import shutil
    if shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    if nginx_exe() is None:
        pytest.skip(NO_NGINX)
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c.start()
    finally:
        c.stop()


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_class_through_nginx_on_two_instances(cluster):
    teacher = cluster.client("127.0.0.200")
    s, _, j = teacher.json("POST", "/class/new", {"query": "tour=2&present=1"})
    assert s == 200, j
    code = j["code"]
    # the proxy's address as the browser used it, port and all (Host $http_host)
    assert j["join_url"] == f"http://127.0.0.1:{cluster.port}/class/{code}"

    students = [cluster.client(f"127.0.1.{i + 1}") for i in range(STUDENTS)]
    for st in students:
        s, _, page = st.request("GET", f"/class/{code}")
        assert s == 303, (s, page[-600:])
    etags = {}
    for st in students:
        for _ in range(4):                       # several polls each: nginx spreads them
            s, h, j = st.json("GET", f"/class/{code}/state")
            assert s == 200 and j["member"] is True and j["members"] == STUDENTS, (s, j)
            etags[st] = h["ETag"]
    served = cluster.upstream_counts()
    assert set(served) == {p for p, _ in cluster.apps}, served   # both instances answered
    assert min(served.values()) >= STUDENTS, served

    # a slide change reaches every follower, whichever instance answers its poll
    t0 = time.monotonic()
    s, _, j = teacher.json("POST", f"/class/{code}/state", {"query": "tour=3&present=1"})
    assert s == 200
    version = j["version"]
    for st in students:
        def sees_it(st=st):
            s, h, j = st.json("GET", f"/class/{code}/state", headers={"If-None-Match": etags[st]})
            if s == 200:
                etags[st] = h["ETag"]
                return j["version"] >= version and "tour=3" in j["query"]
            assert s == 304, (s, j)
        wait_for(sees_it, 1.0, "a follower did not see the slide change within 1 s")
    assert time.monotonic() - t0 < 1.0 + 0.1 * STUDENTS

    # a poll: every answer counted once, whichever instance took it
    s, _, j = teacher.json("POST", f"/class/{code}/polls", {"kind": "next-token"})
    assert s == 200, j
    pid = j["id"]

    def answer(i):
        st = students[i]
        out = []
        for guess in ([f"first{i % 3}", f"guess{i % 3}"] if i % 3 == 0 else [f"guess{i % 3}"]):
            s, _, j = st.json("POST", f"/class/{code}/polls/{pid}/answer", {"answer": guess})
            out.append((s, j))
        return out
    with concurrent.futures.ThreadPoolExecutor(STUDENTS) as pool:
        results = list(pool.map(answer, range(STUDENTS)))
    assert all(s == 200 for r in results for s, _ in r), results
    assert sum(j["changed"] for r in results for _, j in r) == len(range(0, STUDENTS, 3))
    assert set(cluster.upstream_counts(r"/class/\w+/polls/\d+/answer")) == \
        {p for p, _ in cluster.apps}
    s, _, j = teacher.json("GET", f"/class/{code}/state")
    assert j["poll"]["answered"] == STUDENTS
    s, _, j = teacher.json("POST", f"/class/{code}/polls/{pid}/reveal", {})
    assert s == 200 and j["total"] == STUDENTS, j
    counted = {g["answer"]: g["count"] for g in j["groups"]}
    assert counted == {f"guess{k}": len(range(k, STUDENTS, 3)) for k in range(3)}, j

    # the end reaches every follower within a second
    s, _, _ = teacher.json("POST", f"/class/{code}/end", {})
    assert s == 200
    ended = time.monotonic()
    for st in students:
        def gone(st=st):
            s, _, _ = st.request("GET", f"/class/{code}/state",
                                 headers={"If-None-Match": etags[st]})
            return s == 404
        wait_for(gone, 1.0 - (time.monotonic() - ended), "the end took more than 1 s")


def test_the_join_limit_counts_each_clients_own_address_through_the_proxy(cluster):
    teacher = cluster.client("127.0.2.200")
    s, _, j = teacher.json("POST", "/class/new", {"query": "tour=1"})
    assert s == 200, j
    code = j["code"]
    limit = CLASSROOM["join_failures"]
    rng = random.Random(7)

    def wrong():
        while True:
            c = codes.new_code()
            if c != code:
                return c
    # A forges a new X-Forwarded-For with every wrong code: nginx appends the address it saw,
    # the only one --proxy 1 trusts, so every try counts against A
    a = cluster.client("127.0.2.1")
    for _ in range(limit):
        forged = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        s, _, _ = a.request("GET", f"/class/{wrong()}", headers={"X-Forwarded-For": forged})
        assert s == 404
    s, h, page = a.request("GET", f"/class/{code}", headers={"X-Forwarded-For": "127.0.2.2"})
    assert s == 429 and h["Retry-After"], page[:200]
    s, _, _ = a.request("GET", f"/class/{code}")
    assert s == 429
    # B, another address behind the same proxy, is not locked out
    b = cluster.client("127.0.2.2")
    s, _, _ = b.request("GET", f"/class/{wrong()}")
    assert s == 404
    s, _, _ = b.request("GET", f"/class/{code}")
    assert s == 303
    # and the members of one session are counted per address too: four phones behind the
    # proxy each join (the per-address cap would stop them at the proxy's one address)
    for i in range(CLASSROOM["members_per_client"] + 1):
        s, _, _ = cluster.client(f"127.0.3.{i + 1}").request("GET", f"/class/{code}")
        assert s == 303
