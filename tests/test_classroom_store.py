"""The class's store, SQLite and Redis (a real redis-server) behind one interface: exact counts,
one answer per student, closed polls, caps, expiry deleting answers, join failures."""
import inspect
import json
import threading
import time

import pytest

from tests.classroom_support import make_store
from web.classroom.store import Closed, CodeTaken, Full, Gone, NotMember, Store, open_store
from web.classroom.store.redis import RedisStore
from web.classroom.store.sqlite import SQLiteStore

SPEC = json.dumps({"input": "text"})
BIG = 10 ** 6


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    s = make_store(request.param, tmp_path, idle=3600, redis_url=url)
    yield s
    s.close()


def started(store, code="ABCDEFG", members=3, now=1000.0):
    store.create(code, "hash", "tour=1", now, BIG)
    for i in range(members):
        assert store.join(code, f"student{i:02d}", now, BIG) is True
    return code


def test_a_lesson_counts_exactly(store):
    code = started(store)
    v0 = store.session(code, 1000)["version"]
    assert store.join(code, "student00", 1000, BIG) is False          # joined once
    assert store.set_state(code, "tour=2", 1001) == v0 + 1
    pid = store.open_poll(code, "next-token", SPEC, 1002, BIG)
    assert pid == 1
    assert store.answer(code, pid, "student00", "wife", 1003, BIG) is True
    assert store.answer(code, pid, "student01", "man", 1003, BIG) is True
    assert store.answer(code, pid, "student00", "husband", 1004, BIG) is False   # changed
    s = store.session(code, 1005)
    assert (s["state"], s["members"], s["poll"]["answered"], s["poll"]["status"]) == \
        ("tour=2", 3, 2, "open")
    assert sorted(store.answers(code, pid)) == ["husband", "man"]
    assert store.mine(code, pid, "student00") == "husband"
    assert store.mine(code, pid, "student02") is None
    store.lock(code, pid, 1006)
    with pytest.raises(Closed):
        store.answer(code, pid, "student02", "late", 1007, BIG)
    store.reveal(code, pid, json.dumps({"total": 2}), 1008)
    s = store.session(code, 1009)
    assert s["poll"]["status"] == "revealed" and s["poll"]["reveal"] == {"total": 2}
    assert store.version(code, 1009) == s["version"]


def test_a_new_poll_closes_the_open_one_and_strangers_cannot_answer(store):
    code = started(store)
    first = store.open_poll(code, "a", SPEC, 1000, BIG)
    second = store.open_poll(code, "b", SPEC, 1000, BIG)
    assert second == first + 1
    with pytest.raises(Closed):
        store.answer(code, first, "student00", "x", 1000, BIG)
    with pytest.raises(NotMember):
        store.answer(code, second, "stranger", "x", 1000, BIG)
    with pytest.raises(Gone):
        store.answer("ZZZZZZZ", second, "student00", "x", 1000, BIG)
    with pytest.raises(CodeTaken):
        store.create(code, "hash", "", 1000, BIG)


def test_sixty_students_answering_at_once_are_each_counted_once(store):
    code = started(store, members=60)
    pid = store.open_poll(code, "next-token", SPEC, 1000, BIG)
    barrier = threading.Barrier(60)
    errors = []

    def student(i):
        try:
            barrier.wait()
            store.answer(code, pid, f"student{i:02d}", "first", 1000, BIG)
            store.answer(code, pid, f"student{i:02d}", f"guess{i}", 1000, BIG)
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=student, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.session(code, 1000)["poll"]["answered"] == 60
    assert sorted(store.answers(code, pid)) == sorted(f"guess{i}" for i in range(60))


def test_caps(store):
    store.create("AAAAAAA", "h", "", 1000, 2)
    store.create("BBBBBBB", "h", "", 1000, 2)
    with pytest.raises(Full):
        store.create("CCCCCCC", "h", "", 1000, 2)
    code = "AAAAAAA"
    store.join(code, "s1", 1000, 2)
    store.join(code, "s2", 1000, 2)
    with pytest.raises(Full):
        store.join(code, "s3", 1000, 2)
    p1 = store.open_poll(code, "a", SPEC, 1000, 2)
    store.answer(code, p1, "s1", "x", 1000, 3)
    store.answer(code, p1, "s2", "x", 1000, 3)
    p2 = store.open_poll(code, "a", SPEC, 1000, 2)
    with pytest.raises(Full):
        store.open_poll(code, "a", SPEC, 1000, 2)
    store.answer(code, p2, "s1", "x", 1000, 3)
    store.answer(code, p2, "s1", "changed", 1000, 3)      # a change is not a new answer
    with pytest.raises(Full):
        store.answer(code, p2, "s2", "x", 1000, 3)
    assert store.session(code, 1000)["poll"]["answered"] == 1


def test_join_failures_are_counted_per_client_and_window(store):
    assert store.join_failures("1.2.3.4", 1000, 600) == 0
    assert [store.count_join_failure("1.2.3.4", 1000, 600) for _ in range(3)] == [1, 2, 3]
    assert store.join_failures("1.2.3.4", 1000, 600) == 3
    assert store.join_failures("5.6.7.8", 1000, 600) == 0


def test_sqlite_expiry_deletes_the_session_with_its_answers(tmp_path):
    store = make_store("sqlite", tmp_path, idle=60)
    code = started(store, now=1000)
    pid = store.open_poll(code, "a", SPEC, 1000, BIG)
    for i in range(3):
        store.answer(code, pid, f"student{i:02d}", "x", 1010, BIG)
    assert store.counts() == {"sessions": 1, "members": 3, "polls": 1, "answers": 3}
    assert store.session(code, 1069) is not None                 # idle 59 s: still there
    assert store.session(code, 1071) is None and store.version(code, 1071) is None
    assert store.expire(1071) == 1
    assert store.counts() == {"sessions": 0, "members": 0, "polls": 0, "answers": 0}


def test_redis_expiry_deletes_every_key_of_the_session(tmp_path, redis_url):
    store = make_store("redis", tmp_path, idle=0.4, redis_url=redis_url)
    code = started(store, now=time.time())
    pid = store.open_poll(code, "a", SPEC, time.time(), BIG)
    store.answer(code, pid, "student00", "x", time.time(), BIG)
    keys = store._keys(code)[:4]
    assert store.r.exists(*keys) == 4
    assert all(0 < store.r.pttl(k) <= 400 for k in keys)
    deadline = time.time() + 5
    while store.r.exists(*keys) and time.time() < deadline:
        time.sleep(0.05)
    assert store.r.exists(*keys) == 0
    assert store.session(code, time.time()) is None


def test_redis_changes_reach_another_instance_through_pub_sub(tmp_path, redis_url):
    one = make_store("redis", tmp_path, idle=3600, redis_url=redis_url)
    other = type(one)(redis_url, 3600, prefix=one.prefix)            # a second app instance
    code = started(one)
    assert other.version(code, 1000) == one.session(code, 1000)["version"]
    assert other._listening.wait(5)
    v = one.set_state(code, "tour=9", 1001)
    deadline = time.time() + 5
    while other._heard.get(code, (0,))[0] != v and time.time() < deadline:
        time.sleep(0.01)
    assert other._heard[code][0] == v and other.version(code, 1001) == v
    assert other.session(code, 1001)["state"] == "tour=9"


def parameters(function) -> list:
    return [(p.name, p.default) for p in inspect.signature(inspect.unwrap(function)).parameters
            .values()]


def test_both_stores_answer_the_interface_the_views_call(tmp_path):
    """Every method of the package's Store is a method of both classes, with the same
    parameters (a store may take more, with defaults); the factory picks them by --store."""
    methods = [n for n, v in vars(Store).items() if callable(v) and not n.startswith("_")]
    assert "join" in methods and "close" in methods and len(methods) == 19
    for cls in (SQLiteStore, RedisStore):
        for name in methods:
            theirs, ours = parameters(getattr(cls, name)), parameters(getattr(Store, name))
            assert theirs[:len(ours)] == ours, (cls.__name__, name)
            assert all(default is not inspect.Parameter.empty for _, default in
                       theirs[len(ours):]), (cls.__name__, name)
    store = open_store("sqlite", str(tmp_path), idle=60)
    assert type(store) is SQLiteStore and store.kind == "sqlite"
    store.close()
    with pytest.raises(ValueError, match="--store must be 'sqlite' or a redis:// URL"):
        open_store("postgres://x", str(tmp_path), idle=60)
