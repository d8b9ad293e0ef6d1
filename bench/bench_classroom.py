"""A class in one room on 127.0.0.1: 60 students join a session, the teacher changes slide 20
times and runs 5 polls, while bench/load_test.py plays the usual class of 60 on the same server.

For each store (SQLite, the default; and Redis: a redis-server this script starts on a free port)
it starts app.py as `make run` does (2 worker processes x 24 threads) with `--store`, then:
- the teacher (one HTTP client holding the teacher's cookie) starts a session and changes the
  page state 20 times, one every 1.5 s (the tour's slide), each time noting the clock before its
  POST and the version the server returned;
- 60 followers, each a thread with its own keep-alive connection and cookie, join by the link and
  poll /class/<code>/state with If-None-Match every 500 ms, as static/classroom.js does; a
  follower "shows" a change when it first receives that version or a later one: the lag is that
  moment minus the teacher's clock before the POST;
- after every 4th slide the teacher opens a poll (5 kinds); each follower answers within 0.3-3 s,
  one in four changes its answer once; the teacher reveals when 60 have answered (or after 20 s)
  and the reveal's counts are checked against what each student last had acknowledged: every
  answer counted once, none lost;
- meanwhile `bench/load_test.py --url <server> --students 60` runs in its own process for as
  long as the session, and its own figures are kept (0 errors, <= 1% refused, p95 <= 400 ms are
  the class-of-60 goals).

Before that, the transport probe: why short polls and not Server-Sent Events. A waitress server
with this app's thread count (24 per worker) and a WSGI app that holds each request open as an
event stream does is sent 60 streams; how many are answered, and whether one ordinary request
still gets through, is printed.

Saves bench/results/bench_classroom.json (unless --no-save).

    python bench/bench_classroom.py [--students 60] [--slides 20] [--polls 5] [--no-save]

Two sections run on their own, each saved to its own file:
--redis-faults  Redis (the README's redis-server: append-only file) stopped, frozen (SIGSTOP) and
                killed -9 in the middle of a session of --students on app.py (2 workers): every
                class route's status, message and time to answer (the max over the routes), the
                followers polling all at once, the time until the class is served again once
                Redis is back (the app is not restarted) and whether members and answers were kept
                (bench_classroom_redis_faults.json).
--proxy         the README's several-instance recipe (redis-server, two `app.py --proxy 1`
                instances, nginx with the README's configuration: tests/proxy_support.py):
                --students followers, each from its own 127.x address, the teacher changes slide
                --slides times and runs --polls polls: the lag of each change on each follower,
                every answer checked, the polls each instance answered (bench_classroom_proxy.json).
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from local_server import free_port, pct, save_result, start_server  # noqa: E402

from tests.proxy_support import Client, Cluster  # noqa: E402

KINDS = ["next-token", "top-p-half", "beam-vs-greedy", "kv-bytes", "n-tokens"]
SLIDE_SECONDS = 1.5
POLL_MS = 500


# --- the transport probe ---------------------------------------------------------------------

def transport_probe(streams=60, threads=24):
    """Held event streams on one waitress process of `threads` threads."""
    import logging

    from waitress.server import create_server
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)   # its queue is the point
    stop = threading.Event()

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/plain":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        start_response("200 OK", [("Content-Type", "text/event-stream")])

        def events():
            yield b"data: hello\n\n"
            while not stop.wait(0.5):
                yield b": keep-alive\n\n"
        return events()
    server = create_server(app, host="127.0.0.1", port=0, threads=threads,
                           connection_limit=300, channel_timeout=30)
    threading.Thread(target=server.run, daemon=True).start()
    port = server.effective_port
    socks, answered = [], 0
    for _ in range(streams):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    deadline = time.time() + 3
    for s in socks:
        s.settimeout(max(0.01, deadline - time.time()))
        try:
            if b"hello" in s.recv(4096):
                answered += 1
        except OSError:
            pass
    start = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request("GET", "/plain")
        conn.getresponse().read()
        plain = f"answered in {1000 * (time.time() - start):.0f} ms"
    except OSError:
        plain = f"no answer within {time.time() - start:.0f} s"
    stop.set()
    for s in socks:
        s.close()
    server.close()
    return dict(streams=streams, threads=threads, streams_answered=answered,
                ordinary_request=plain)


# --- the server ------------------------------------------------------------------------------

def start_redis():
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    return proc, f"redis://127.0.0.1:{port}/0"


def start_app(port, store, data_dir):
    """app.py as `make run` starts it, with this run's store and data directory."""
    return start_server(port, args=["--store", store, "--data-dir", data_dir])


def student_address(n: int) -> str:
    """The n-th student's own loopback address (127.0.x.y): the server counts members and
    wrong codes per client address, as a real room's phones each have their own."""
    return f"127.0.{20 + n // 250}.{1 + n % 250}"


class Follower(threading.Thread):
    def __init__(self, n, port, code, stop, rng):
        super().__init__(daemon=True)
        self.n, self.code, self.stop, self.rng = n, code, stop, rng
        self.client = Client(port, student_address(n))
        self.seen = {}             # version -> first time seen
        self.errors = []
        self.acked = {}            # poll id -> the answer the server last acknowledged
        self.plan = {}             # poll id -> [(time, answer), ...]
        self.requests = 0

    def answers_for(self, poll):
        i = self.n
        if poll["input"] == "choice":
            return [poll["choices"][i % len(poll["choices"])],
                    poll["choices"][(i + 1) % len(poll["choices"])]]
        if poll["input"] == "number":
            return [str(100 + i % 4), str(200 + i % 4)]
        return [f"first{i % 4}", f"guess{i % 4}"]      # at most 8 answers: every group listed

    def run(self):
        for _ in range(5):               # a person sent a busy page (503) tries again
            s, h, _ = self.client.request("GET", f"/class/{self.code}")
            if s != 503:
                break
            self.errors.append("join 503, retried")
            time.sleep(float(h.get("Retry-After", 2)))
        if s != 303:
            self.errors.append(f"join {s}")
            return
        etag = None
        while not self.stop.is_set():
            now = time.monotonic()
            try:
                s, h, body = self.client.request(
                    "GET", f"/class/{self.code}/state",
                    headers={"If-None-Match": etag} if etag else {})
                self.requests += 1
                seen_at = time.monotonic()
                if s == 200:
                    etag = h["ETag"]
                    state = json.loads(body)
                    self.seen.setdefault(state["version"], seen_at)
                    poll = state["poll"]
                    if poll and poll["status"] == "open" and poll["id"] not in self.plan:
                        choices = self.answers_for(poll)
                        t = now + self.rng.uniform(0.3, 3.0)
                        plan = [(t, choices[0])]
                        if self.n % 4 == 0 and len(choices) > 1:
                            plan.append((t + self.rng.uniform(0.2, 1.0), choices[1]))
                        self.plan[poll["id"]] = plan
                elif s != 304:
                    self.errors.append(f"state {s}")
                for pid, plan in self.plan.items():
                    while plan and plan[0][0] <= time.monotonic():
                        _, answer = plan.pop(0)
                        s, _, body = self.client.request(
                            "POST", f"/class/{self.code}/polls/{pid}/answer", {"answer": answer})
                        self.requests += 1
                        if s == 200:
                            self.acked[pid] = json.loads(body)["answer"]
                        else:
                            self.errors.append(f"answer {s} {body[:80]!r}")
            except Exception as e:                          # noqa: BLE001 - counted
                self.errors.append(repr(e))
            time.sleep(max(0.0, POLL_MS / 1000 - (time.monotonic() - now)))


def run_class(store_name, store, students, slides, n_polls, seconds_hint):
    data_dir = tempfile.mkdtemp(prefix="bench-classroom-")
    port = free_port()
    server = start_app(port, store, data_dir)
    base = f"http://127.0.0.1:{port}"
    try:
        teacher = Client(port)
        s, _, body = teacher.request("POST", "/class/new", {"query": "present=1&tour=1"})
        assert s == 200, body
        code = json.loads(body)["code"]
        load = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "load_test.py"),
                                 "--url", base, "--students", "60", "--seconds",
                                 str(seconds_hint), "--no-save"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        stop = threading.Event()
        followers = [Follower(n, port, code, stop, random.Random(n)) for n in range(students)]
        for f in followers:
            f.start()
        deadline = time.time() + 60
        while time.time() < deadline:
            s, _, body = teacher.request("GET", f"/class/{code}/state")
            if json.loads(body)["members"] == students:
                break
            time.sleep(0.2)
        changes, polls, errors = [], [], []
        started = time.time()
        for slide in range(2, slides + 2):
            t0 = time.monotonic()
            s, _, body = teacher.request("POST", f"/class/{code}/state",
                                         {"query": f"present=1&tour={slide}"})
            if s != 200:
                errors.append(f"slide {s}")
                continue
            changes.append((t0, json.loads(body)["version"]))
            time.sleep(SLIDE_SECONDS)
            if (slide - 1) % (slides // n_polls) == 0 and len(polls) < n_polls:
                polls.append(run_poll(teacher, code, KINDS[len(polls) % len(KINDS)], students,
                                      followers, errors))
        elapsed = time.time() - started
        time.sleep(1.0)
        stop.set()
        for f in followers:
            f.join(timeout=30)
        out, _ = load.communicate(timeout=seconds_hint + 120)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
    lags = []
    for t0, v in changes:
        for f in followers:
            first = min((t for ver, t in f.seen.items() if ver >= v), default=None)
            lags.append(None if first is None else first - t0)
    missed = sum(1 for x in lags if x is None)
    lags = [x for x in lags if x is not None]
    follower_errors = [e for f in followers for e in f.errors]
    result = dict(
        store=store_name, students=students, slide_changes=len(changes),
        follower_requests=sum(f.requests for f in followers), seconds=round(elapsed, 1),
        lag_ms=dict(p50=round(1000 * pct(lags, 50), 1), p95=round(1000 * pct(lags, 95), 1),
                    max=round(1000 * max(lags), 1), within_1s=sum(1 for x in lags if x <= 1.0),
                    of=len(lags) + missed, missed=missed),
        polls=polls, answers_recorded=sum(p["counted"] for p in polls),
        answers_lost=sum(p["lost"] for p in polls),
        answers_twice=sum(p["twice"] for p in polls),
        errors=errors + follower_errors[:20], follower_errors=len(follower_errors),
        load_test=parse_load(out))
    return result


def run_poll(teacher, code, kind, students, followers, errors):
    s, _, body = teacher.request("POST", f"/class/{code}/polls", {"kind": kind})
    if s != 200:
        errors.append(f"open {kind} {s} {body[:100]!r}")
        return dict(kind=kind, counted=0, lost=students, twice=0)
    pid = json.loads(body)["id"]
    start = time.monotonic()
    deadline = time.time() + 20
    while time.time() < deadline:
        _, _, body = teacher.request("GET", f"/class/{code}/state")
        p = json.loads(body)["poll"]
        done = all(f.acked.get(pid) is not None and not f.plan.get(pid) for f in followers)
        if p["answered"] >= students and done:
            break
        time.sleep(0.25)
    t = time.monotonic()
    s, _, body = teacher.request("POST", f"/class/{code}/polls/{pid}/reveal", {})
    reveal_ms = 1000 * (time.monotonic() - t)
    if s != 200:
        errors.append(f"reveal {kind} {s}")
        return dict(kind=kind, counted=0, lost=students, twice=0)
    r = json.loads(body)
    counted = {g["answer"].lower(): g["count"] for g in r["groups"]}
    expected = {}
    for f in followers:
        if pid in f.acked:
            a = f.acked[pid].lower()
            expected[a] = expected.get(a, 0) + 1
    total_expected = sum(expected.values())
    lost = sum(max(0, n - counted.get(a, 0)) for a, n in expected.items())
    twice = sum(max(0, n - expected.get(a, 0)) for a, n in counted.items()) + r["others"]
    return dict(kind=kind, counted=r["total"], acknowledged=total_expected, lost=lost,
                twice=twice, changed=sum(1 for f in followers if f.n % 4 == 0),
                seconds_to_all_answers=round(t - start, 1), reveal_ms=round(reveal_ms, 1),
                model=r["model"])


def parse_load(text):
    out = {"raw": text.strip().splitlines()[-12:]}
    m = re.search(r"200: (\d+)\s+503 busy: (\d+)\s+errors: (\d+)", text)
    if m:
        ok, busy, err = map(int, m.groups())
        out.update(ok=ok, busy=busy, errors=err,
                   busy_share=round(busy / max(1, ok + busy + err), 4))
    m = re.search(r"latency of 200s: p50 (\d+) ms, p95 (\d+) ms, max (\d+) ms", text)
    if m:
        out.update(p50_ms=int(m.group(1)), p95_ms=int(m.group(2)), max_ms=int(m.group(3)))
    return out



# --- Redis failing mid-session (--redis-faults) ---------------------------------------------

FAULT_STUDENTS = 10


def fault_routes(app_port, code, pid, teacher, student, etag):
    """(name, call) for every class route, each sent as its own user sends it."""
    newcomer = Client(app_port, "127.0.9.1")
    return [
        ("GET /class?code=", lambda: newcomer.request("GET", f"/class?code={code}")),
        ("GET /class/<code>", lambda: newcomer.request("GET", f"/class/{code}")),
        ("GET /class/<code>/state", lambda: newcomer.request("GET", f"/class/{code}/state")),
        ("GET /class/<code>/state, follower", lambda: student.request(
            "GET", f"/class/{code}/state", headers={"If-None-Match": etag})),
        ("GET /class/<code>/qr.svg", lambda: teacher.request("GET", f"/class/{code}/qr.svg")),
        ("POST /class/new", lambda: newcomer.request("POST", "/class/new", {"query": "tour=1"})),
        ("POST /class/<code>/state", lambda: teacher.request(
            "POST", f"/class/{code}/state", {"query": "tour=3&present=1"})),
        ("POST /class/<code>/polls", lambda: teacher.request(
            "POST", f"/class/{code}/polls", {"kind": "n-tokens"})),
        ("POST .../answer", lambda: student.request(
            "POST", f"/class/{code}/polls/{pid}/answer", {"answer": "husband"})),
        ("POST .../reveal", lambda: teacher.request(
            "POST", f"/class/{code}/polls/{pid}/reveal", {})),
        ("POST /class/<code>/end", lambda: teacher.request("POST", f"/class/{code}/end", {})),
    ]


def timed(call):
    t = time.monotonic()
    try:
        status, headers, body = call()
    except Exception as e:                               # noqa: BLE001 - reported
        return dict(status=repr(e), seconds=round(time.monotonic() - t, 3))
    out = dict(status=status, seconds=round(time.monotonic() - t, 3))
    if status == 503:
        text = body.decode(errors="replace")
        out["retry_after"] = headers.get("Retry-After")
        out["message"] = ("the store's message" if "class store is not answering" in text
                          else text[:80])
    return out


def followers_during_fault(port, code, sources, etags):
    """Every follower polls once, all at once: statuses and the slowest answer."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i):
        c = Client(port, sources[i])
        return timed(lambda: c.request("GET", f"/class/{code}/state",
                                       headers={"If-None-Match": etags[i]}))
    with ThreadPoolExecutor(len(sources)) as pool:
        got = list(pool.map(one, range(len(sources))))
    statuses = {}
    for g in got:
        statuses[str(g["status"])] = statuses.get(str(g["status"]), 0) + 1
    return dict(statuses=statuses, max_seconds=max(g["seconds"] for g in got))


def redis_faults(followers=60):
    """Redis stopped, frozen (SIGSTOP) and killed -9 in the middle of a session served by
    app.py (2 workers, as `make run`) with the README's redis-server: what every route answers
    and how fast, what 60 followers polling at once get, how long until the class is served
    again once Redis is back (the app is not restarted), and whether the session, its members
    and answers were kept."""
    from tests.redis_server_support import RedisServer
    work = tempfile.mkdtemp(prefix="bench-redis-faults-")
    os.makedirs(os.path.join(work, "redis"))
    redis_server = RedisServer(os.path.join(work, "redis")).start()
    port = free_port()
    server = start_app(port, redis_server.url, os.path.join(work, "data"))
    results = dict(redis_args=" ".join(redis_server.args), followers=followers, faults=[])
    try:
        teacher = Client(port, "127.0.8.1")
        s, _, body = teacher.request("POST", "/class/new", {"query": "tour=2&present=1"})
        assert s == 200, body
        code = json.loads(body)["code"]
        sources = [f"127.0.{10 + i // 250}.{1 + i % 250}" for i in range(followers)]
        students = [Client(port, a) for a in sources]
        for st in students:
            s, _, body = st.request("GET", f"/class/{code}")
            assert s == 303, body[-300:]
        s, _, body = teacher.request("POST", f"/class/{code}/polls", {"kind": "next-token"})
        assert s == 200, body
        pid = json.loads(body)["id"]
        answered = 0

        def answer_some(n):
            nonlocal answered
            for st in students[answered:answered + n]:
                s, _, body = st.request("POST", f"/class/{code}/polls/{pid}/answer",
                                        {"answer": f"guess{answered % 4}"})
                assert s == 200, body
                answered += 1

        def etags():
            return [st.request("GET", f"/class/{code}/state")[1]["ETag"] for st in students]

        def recover(fault):
            t = time.monotonic()
            while time.monotonic() - t < 60:
                s, _, body = teacher.request("GET", f"/class/{code}/state")
                if s == 200:
                    state = json.loads(body)
                    return dict(seconds=round(time.monotonic() - t, 2),
                                members=state["members"], answered=state["poll"]["answered"],
                                expected_members=followers, expected_answered=answered,
                                kept=state["members"] == followers
                                and state["poll"]["answered"] == answered)
                time.sleep(0.02)
            return dict(seconds=None, kept=False)

        for fault in ("stopped", "frozen", "killed -9"):
            answer_some(followers // 4)                  # answers just before the fault
            tags = etags()
            routes = fault_routes(port, code, pid, teacher, students[0], tags[0])
            if fault == "stopped":
                redis_server.stop()
            elif fault == "frozen":
                redis_server.freeze()
            else:
                redis_server.kill()                      # no wait for the append-only file
            try:
                first = {name: timed(call) for name, call in routes}
                crowd = followers_during_fault(port, code, sources, tags)
                again = {name: timed(call) for name, call in routes}
            finally:
                if fault == "frozen":
                    redis_server.thaw()
                else:
                    redis_server.start()
            back = recover(fault)
            worst = max(first.values(), key=lambda r: r["seconds"])
            results["faults"].append(dict(
                fault=fault, routes=first, routes_again=again, followers_at_once=crowd,
                max_seconds=max(r["seconds"] for r in first.values()),
                max_seconds_again=max(r["seconds"] for r in again.values()),
                slowest_route=[k for k, v in first.items() if v is worst][0],
                all_503=all(r["status"] == 503 for r in first.values())
                and all(r["status"] == 503 for r in again.values()),
                recovery=back))
    finally:
        stop_app(server)
        redis_server.close()
        shutil.rmtree(work, ignore_errors=True)
    return results


def stop_app(server):
    server.terminate()
    server.wait(timeout=30)


def print_faults(r):
    print(f"-- Redis failing mid-session ({r['followers']} followers; redis-server "
          f"{r['redis_args']}):")
    for f in r["faults"]:
        statuses = sorted({str(v["status"]) for v in f["routes"].values()})
        messages = sorted({v.get("message", "-") for v in f["routes"].values()})
        print(f"   {f['fault']}: every route {'/'.join(statuses)} ({', '.join(messages)}); "
              f"slowest {f['max_seconds']:.2f} s ({f['slowest_route']}), right after "
              f"{f['max_seconds_again']:.2f} s; {r['followers']} followers at once: "
              f"{f['followers_at_once']['statuses']}, slowest "
              f"{f['followers_at_once']['max_seconds']:.2f} s")
        rec = f["recovery"]
        print(f"      Redis back: served again after {rec['seconds']} s; kept: {rec['kept']} "
              f"({rec.get('members')} of {rec.get('expected_members')} members, "
              f"{rec.get('answered')} of {rec.get('expected_answered')} answers)")


# --- two instances behind nginx (--proxy) ----------------------------------------------------

def proxy_class(students=60, slides=20, n_polls=5, workers=1):
    """The README's several-instance recipe (tests/proxy_support.py: redis-server with its
    append-only file, two `app.py --proxy 1` instances, nginx with the README's configuration):
    `students` followers, each from its own address, poll through nginx; the teacher changes
    slide `slides` times and runs `n_polls` polls; the lag of each change on each follower,
    every answer checked, and how the polls spread over the instances."""
    work = tempfile.mkdtemp(prefix="bench-proxy-")
    cluster = Cluster(work, instances=2, workers=workers).start()
    try:
        teacher = Client(cluster.port, "127.0.8.1")
        s, _, body = teacher.request("POST", "/class/new", {"query": "present=1&tour=1"})
        assert s == 200, body
        code = json.loads(body)["code"]
        stop = threading.Event()
        followers = []
        for n in range(students):
            f = Follower(n, cluster.port, code, stop, random.Random(n))
            f.client = Client(cluster.port, f"127.0.{10 + n // 250}.{1 + n % 250}")
            followers.append(f)
        for f in followers:
            f.start()
        deadline = time.time() + 60
        while time.time() < deadline:
            s, _, body = teacher.request("GET", f"/class/{code}/state")
            if json.loads(body)["members"] == students:
                break
            time.sleep(0.2)
        changes, polls, errors = [], [], []
        started = time.time()
        for slide in range(2, slides + 2):
            t0 = time.monotonic()
            s, _, body = teacher.request("POST", f"/class/{code}/state",
                                         {"query": f"present=1&tour={slide}"})
            if s != 200:
                errors.append(f"slide {s}")
                continue
            changes.append((t0, json.loads(body)["version"]))
            time.sleep(SLIDE_SECONDS)
            if (slide - 1) % (slides // n_polls) == 0 and len(polls) < n_polls:
                polls.append(run_poll(teacher, code, KINDS[len(polls) % len(KINDS)], students,
                                      followers, errors))
        elapsed = time.time() - started
        time.sleep(1.0)
        stop.set()
        for f in followers:
            f.join(timeout=30)
        spread = cluster.upstream_counts()
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    lags = []
    for t0, v in changes:
        for f in followers:
            first = min((t for ver, t in f.seen.items() if ver >= v), default=None)
            lags.append(None if first is None else first - t0)
    missed = sum(1 for x in lags if x is None)
    lags = [x for x in lags if x is not None]
    follower_errors = [e for f in followers for e in f.errors]
    return dict(
        instances=2, workers_per_instance=workers, students=students,
        slide_changes=len(changes), seconds=round(elapsed, 1),
        state_polls_per_instance={str(k): v for k, v in sorted(spread.items())},
        lag_ms=dict(p50=round(1000 * pct(lags, 50), 1), p95=round(1000 * pct(lags, 95), 1),
                    max=round(1000 * max(lags), 1), within_1s=sum(1 for x in lags if x <= 1.0),
                    of=len(lags) + missed, missed=missed),
        polls=polls, answers_recorded=sum(p["counted"] for p in polls),
        answers_acknowledged=sum(p.get("acknowledged", 0) for p in polls),
        answers_lost=sum(p["lost"] for p in polls),
        answers_twice=sum(p["twice"] for p in polls),
        errors=errors + follower_errors[:20], follower_errors=len(follower_errors),
        load_average_after=round(os.getloadavg()[0], 2))


def print_proxy(r):
    print(f"-- {r['students']} followers on {r['instances']} instances ({r['workers_per_instance']}"
          f" worker each) behind nginx, {r['slide_changes']} slide changes in {r['seconds']} s;"
          f" state polls per instance: {r['state_polls_per_instance']}")
    print(f"   change on every follower: p50 {r['lag_ms']['p50']} ms, p95 {r['lag_ms']['p95']} ms,"
          f" max {r['lag_ms']['max']} ms; within 1 s: {r['lag_ms']['within_1s']} of "
          f"{r['lag_ms']['of']}")
    print(f"   answers: {r['answers_recorded']} recorded of {r['answers_acknowledged']} "
          f"acknowledged, lost {r['answers_lost']}, counted twice {r['answers_twice']}; "
          f"follower errors {r['follower_errors']} {r['errors'][:3]}; load average after "
          f"{r['load_average_after']}")


# --- a class that joins at once ---------------------------------------------------------------

def join_rush(students=60, spread=1.0, model=None):
    """`students` phones, each from its own address, open the join link within `spread` seconds
    of each other (uniformly at random) on a server started as `make run` starts it: each joins
    (GET /class/<code>, 303), loads the teacher's page it is sent to (GET /?<state>) and asks
    for the class's state once, as static/classroom.js does on load. Per phone: the time from
    its join to its page, and every status; the server's busy pages (503) counted."""
    data_dir = tempfile.mkdtemp(prefix="bench-rush-")
    port = free_port()
    server = start_app(port, "sqlite", data_dir)
    try:
        teacher = Client(port)
        deadline = time.time() + 600
        while model and time.time() < deadline:     # the model warms after the default's page
            s, _, _ = teacher.request("GET", f"/?model={model}")
            if s == 200:
                break
            time.sleep(1.0)
        query = "present=1&tour=2" + (f"&model={model}" if model else "")
        s, _, body = teacher.request("POST", "/class/new", {"query": query})
        assert s == 200, body
        code = json.loads(body)["code"]
        rng = random.Random(7)
        start_at = time.monotonic() + 1.0
        offsets = [rng.uniform(0, spread) for _ in range(students)]
        results = [None] * students

        def phone(n):
            c = Client(port, student_address(n))
            time.sleep(max(0.0, start_at + offsets[n] - time.monotonic()))
            t0 = time.monotonic()
            statuses = []
            s, h, _ = c.request("GET", f"/class/{code}")
            statuses.append(s)
            if s == 303:
                s, _, _ = c.request("GET", h["Location"].split("#")[0])
                statuses.append(s)
                page_at = time.monotonic()
                s, _, _ = c.request("GET", f"/class/{code}/state")
                statuses.append(s)
                results[n] = dict(seconds=page_at - t0, statuses=statuses,
                                  page_ok=statuses[1] == 200)
            else:
                results[n] = dict(seconds=None, statuses=statuses, page_ok=False)

        threads = [threading.Thread(target=phone, args=(n,)) for n in range(students)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        s, _, body = teacher.request("GET", f"/class/{code}/state")
        members = json.loads(body)["members"]
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
    times = [r["seconds"] for r in results if r and r["page_ok"]]
    statuses = [st for r in results if r for st in r["statuses"]]
    return dict(students=students, spread_seconds=spread, model=model or "default",
                load_average_after=round(os.getloadavg()[0], 2),
                members=members, pages=len(times),
                busy_pages=sum(1 for st in statuses if st == 503),
                other_statuses=sorted({st for st in statuses if st not in (200, 303, 503)}),
                join_to_page_ms=dict(p50=round(1000 * pct(times, 50)),
                                     p95=round(1000 * pct(times, 95)),
                                     max=round(1000 * max(times))) if times else None)


def print_rush(r):
    t = r["join_to_page_ms"] or {}
    print(f"-- {r['students']} phones join within {r['spread_seconds']:g} s ({r['model']} model):"
          f" {r['members']} joined, {r['pages']} pages, {r['busy_pages']} busy pages, other "
          f"statuses {r['other_statuses']}; join to page p50 {t.get('p50')} ms, p95 "
          f"{t.get('p95')} ms, max {t.get('max')} ms")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--slides", type=int, default=20)
    ap.add_argument("--polls", type=int, default=5)
    ap.add_argument("--stores", default="sqlite,redis")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--redis-faults", action="store_true", help="only: Redis stopped, frozen "
                    "and killed -9 mid-session (saves bench_classroom_redis_faults.json)")
    ap.add_argument("--proxy", action="store_true", help="only: the followers on two instances "
                    "behind nginx (saves bench_classroom_proxy.json)")
    ap.add_argument("--proxy-workers", type=int, default=1, help="workers per instance, --proxy")
    ap.add_argument("--startup", action="store_true", help="only: app.py's start-up, cold and "
                    "warm data dir (bench/bench_startup.py; saves bench_startup.json)")
    ap.add_argument("--join-rush", action="store_true", help="only: the class joins within one "
                    "second, on each model (saves bench_classroom_join.json)")
    args = ap.parse_args(argv)
    if args.join_rush:
        runs = [join_rush(args.students), join_rush(args.students, model="smollm2")]
        for r in runs:
            print_rush(r)
        if not args.no_save:
            print("saved", os.path.relpath(save_result(
                "bench_classroom_join", {"runs": runs}, "bench_classroom.py",
                argv if argv is not None else sys.argv[1:]), ROOT))
        return
    if args.startup:
        import bench_startup
        runs = bench_startup.measure_startup()
        bench_startup.report(runs)
        if not args.no_save:
            print("saved", os.path.relpath(save_result(
                "bench_startup", {"startup": runs}, "bench_classroom.py",
                argv if argv is not None else sys.argv[1:]), ROOT))
        return
    if args.redis_faults or args.proxy:
        argv_used = argv if argv is not None else sys.argv[1:]
        if args.redis_faults:
            r = redis_faults(args.students)
            print_faults(r)
            if not args.no_save:
                print("saved", os.path.relpath(save_result(
                    "bench_classroom_redis_faults", r, "bench_classroom.py", argv_used), ROOT))
        if args.proxy:
            r = proxy_class(args.students, args.slides, args.polls, args.proxy_workers)
            print_proxy(r)
            if not args.no_save:
                print("saved", os.path.relpath(save_result(
                    "bench_classroom_proxy", r, "bench_classroom.py", argv_used), ROOT))
        return
    probe = transport_probe()
    print(f"transport probe: {probe['streams']} held event streams on one waitress process of "
          f"{probe['threads']} threads: {probe['streams_answered']} answered; an ordinary "
          f"request: {probe['ordinary_request']}")
    runs = []
    seconds = int(args.slides * SLIDE_SECONDS + args.polls * 6 + 10)
    for name in args.stores.split(","):
        redis_proc = None
        try:
            if name == "redis":
                redis_proc, spec = start_redis()
            else:
                spec = "sqlite"
            r = run_class(name, spec, args.students, args.slides, args.polls, seconds)
            r["load_average_after"] = round(os.getloadavg()[0], 2)   # other jobs show here
        finally:
            if redis_proc:
                redis_proc.terminate()
                redis_proc.wait(timeout=10)
        lt = r["load_test"]
        print(f"-- {name}: {r['students']} followers, {r['slide_changes']} slide changes, "
              f"{r['follower_requests']} follower requests in {r['seconds']} s")
        print(f"   change on every follower: p50 {r['lag_ms']['p50']} ms, p95 "
              f"{r['lag_ms']['p95']} ms, max {r['lag_ms']['max']} ms; within 1 s: "
              f"{r['lag_ms']['within_1s']} of {r['lag_ms']['of']}")
        print(f"   polls: {len(r['polls'])}, answers recorded {r['answers_recorded']}, lost "
              f"{r['answers_lost']}, counted twice {r['answers_twice']}; reveal "
              + ", ".join(f"{p['kind']} {p.get('reveal_ms')} ms" for p in r["polls"]))
        print(f"   load average (1 min) after the run: {r['load_average_after']}")
        print(f"   load test alongside: {lt.get('ok')} ok, {lt.get('busy')} refused "
              f"({100 * lt.get('busy_share', 0):.2f}%), {lt.get('errors')} errors, p95 "
              f"{lt.get('p95_ms')} ms; follower errors: {r['follower_errors']} {r['errors'][:3]}")
        runs.append(r)
    if not args.no_save:
        path = save_result("bench_classroom", {"transport_probe": probe, "runs": runs},
                           "bench_classroom.py", argv if argv is not None else sys.argv[1:])
        print(f"saved {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
