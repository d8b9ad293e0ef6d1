"""Start-up of `app.py` as `make run` starts it (2 workers, every model it offers), on a free
port of 127.0.0.1, twice: cold (an empty --data-dir: nothing kept from an earlier start) and warm
(the same data dir again: measurements and SmolLM2's float32 weights kept by the first run).

For each run: seconds from the process's start to the first answer (any), to the default page
(200), and to each model ready (its "<key> ready in" line on the server's output); and the longest
time any request waited unanswered while the server started: a prober sends GET / every 250 ms
from t=0, each request in a thread of its own with a 30 s timeout, until every model is ready (a
refused connection, before the socket is bound, is answered at once: it is not waiting).
Targets: the default page within 15 s, no request unanswered for more than 5 s.

    python bench/bench_startup.py [--no-save]      (bench/bench_classroom.py --startup runs it)
"""
import argparse
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from local_server import free_port, save_result  # noqa: E402

PROBE_SECONDS = 0.25
TARGET_DEFAULT_S, TARGET_WAIT_S = 15, 5


def probe(port, t0, results, stop):
    def one(sent):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/")
            status = conn.getresponse().status
            conn.close()
        except ConnectionRefusedError:
            status = "refused"
        except OSError as e:
            status = type(e).__name__
        results.append((sent - t0, time.monotonic() - t0, status))
    threads = []
    while not stop.is_set():
        t = threading.Thread(target=one, args=(time.monotonic(),), daemon=True)
        t.start()
        threads.append(t)
        stop.wait(PROBE_SECONDS)
    for t in threads:
        t.join(35)


def one_start(data_dir: str, label: str, timeout: float = 600) -> dict:
    port = free_port()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "app.py"), "--port", str(port),
                             "--data-dir", data_dir], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    results, stop = [], threading.Event()
    prober = threading.Thread(target=probe, args=(port, t0, results, stop), daemon=True)
    prober.start()
    ready, lines = {}, []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            m = re.match(r"\s+(\S+) ready in", line)
            if m:
                ready[m.group(1)] = round(time.monotonic() - t0, 2)
            if line.startswith("Every model is warmed"):
                break
            if time.monotonic() - t0 > timeout:
                break
    finally:
        stop.set()
        prober.join(40)
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    answered = [(s, e, st) for s, e, st in results if st != "refused"]
    first_200 = min((e for s, e, st in answered if st == 200), default=None)
    waits = [e - s for s, e, st in answered]
    return {"label": label, "default_page_s": round(first_200, 2) if first_200 else None,
            "first_answer_s": round(min((e for s, e, st in answered), default=0), 2),
            "models_ready_s": ready,
            "longest_unanswered_s": round(max(waits, default=0), 2),
            "probes": len(results), "refused_before_bind": len(results) - len(answered),
            "failed": sum(1 for s, e, st in answered if not isinstance(st, int)),
            "answers": sorted({str(st) for s, e, st in answered}),
            "load_average_after": round(os.getloadavg()[0], 2)}


def measure_startup() -> list:
    data_dir = tempfile.mkdtemp(prefix="bench-startup-")
    try:
        return [one_start(data_dir, "cold (empty data dir)"),
                one_start(data_dir, "warm (data dir kept from the cold run)")]
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def report(runs):
    for r in runs:
        ok = (r["default_page_s"] or 1e9) <= TARGET_DEFAULT_S and \
            r["longest_unanswered_s"] <= TARGET_WAIT_S
        print(f"-- start-up, {r['label']}: default page {r['default_page_s']} s, first answer "
              f"{r['first_answer_s']} s, models ready {r['models_ready_s']}, longest unanswered "
              f"request {r['longest_unanswered_s']} s ({r['probes']} probes, "
              f"{r['refused_before_bind']} refused before the socket was bound, "
              f"{r['failed']} failed; answers {r['answers']}); load average after "
              f"{r['load_average_after']}; targets (<= {TARGET_DEFAULT_S} s, <= "
              f"{TARGET_WAIT_S} s): {'met' if ok else 'NOT met'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    runs = measure_startup()
    report(runs)
    if not args.no_save:
        path = save_result("bench_startup", {"startup": runs}, "bench_startup.py",
                           argv if argv is not None else sys.argv[1:])
        print(f"saved {os.path.relpath(path, ROOT)}")
    return runs


if __name__ == "__main__":
    main()
