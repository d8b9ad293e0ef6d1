"""Shared by the benchmark scripts: the app started as `make run` serves it, on a free port of
127.0.0.1, addresses checked to be this machine's, and results saved with when, where and what
was measured (bench/results/<name>.json)."""
import datetime
import http.client
import ipaddress
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
# Debian's chromium, as the browser tests drive it (Playwright's own browser is never used).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]


def pct(values, q):
    """The q-th percentile of values (nearest rank on the sorted list; NaN when there are none),
    as every benchmark reports it."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def loopback_only(url: str) -> urllib.parse.SplitResult:
    """The parts of `url`, refused unless it is an http address of this machine."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if parts.scheme != "http" or not ok:
        raise SystemExit(f"{url!r} is not an http address of this machine "
                         "(127.0.0.0/8, localhost or ::1); refusing to send load there")
    return parts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, workers: int = None, args=()) -> subprocess.Popen:
    """app.py as `make run` starts it (with `args` added); returns once / answers 200. It warms
    every model it offers first (SmolLM2's measurements take tens of seconds)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    extra = (["--workers", str(workers)] if workers else []) + list(args)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "app.py"), "--port", str(port),
                             *extra], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", "/")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the server did not answer within 300 s")


def serve(url: str = None, workers: int = None):
    """(base URL, server process): `url` if given (checked to be this machine's; no process),
    else app.py started on a free port. stop_server(process) stops what this started."""
    if url:
        return loopback_only(url).geturl().rstrip("/"), None
    port = free_port()
    return f"http://127.0.0.1:{port}", start_server(port, workers)


def wait_until_ready(base: str, model: str, seconds: float = 900, offered_only=False) -> float:
    """Wait until the server at `base` serves `model=model` (a model beside the default warms
    after the server answers, in the same processes: its page is a 503 until then); the
    seconds waited. offered_only: None at once when the server does not offer that model (its
    page is a 4xx)."""
    parts = loopback_only(base)
    start = time.time()
    while time.time() - start < seconds:
        try:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
            conn.request("GET", "/?model=" + urllib.parse.quote(model))
            response = conn.getresponse()
            response.read()
            conn.close()
            if response.status == 200:
                return time.time() - start
            if offered_only and 400 <= response.status < 500:
                return None
            if response.status not in (503,):
                raise SystemExit(f"model={model}: the server answered {response.status}")
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"model={model} was not ready within {seconds:.0f} s")


def server_memory(pid: int) -> dict:
    """Memory of the server process `pid` and its workers (its children), from Linux's
    /proc/<pid>/smaps_rollup: Rss counts a page shared by the forked workers in each of them;
    Pss divides it among them, so the Pss sum is what the server as a whole holds."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    total = {"processes": 0, "rss_mb": 0.0, "pss_mb": 0.0}
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        total["processes"] += 1
        total["rss_mb"] += int(fields["Rss"].split()[0]) / 1024
        total["pss_mb"] += int(fields["Pss"].split()[0]) / 1024
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in total.items()}


def stop_server(proc):
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_speed() -> str:
    """Two probes of this machine's speed at the time of the measurement, so figures from two
    machines (or a busy and a quiet one) can be told apart: one core's float32 matrix product
    (numpy @, 512 x 512 x 512, best of 5) and memory copy (a 256 MB array, best of 3)."""
    import numpy as np
    a = np.ones((512, 512), dtype=np.float32)
    best = min(_timed(lambda: a @ a) for _ in range(5))
    big = np.ones(64 * 1024 * 1024, dtype=np.float32)
    out = np.empty_like(big)
    copy = min(_timed(lambda: np.copyto(out, big)) for _ in range(3))
    return (f"{cpu_name()}: matmul {2 * 512 ** 3 / best / 1e9:.0f} GFLOP/s, "
            f"copy {2 * big.nbytes / copy / 1e9:.1f} GB/s")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def provenance() -> dict:
    """When, on what and at which commit a measurement was made."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
        # results and the README they feed are not the code measured
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                                     "--", ".", ":(exclude)bench/results", ":(exclude)README.md"],
                                    cwd=ROOT, capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", False
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} "
                       f"{platform.release()}, Python {platform.python_version()}, "
                       f"{machine_speed()}",
            "commit": commit + ("+uncommitted changes" if dirty else "")}


def save_result(name: str, result: dict, script: str, argv: list) -> str:
    """Write bench/results/<name>.json: the result with its provenance and the command that
    produced it (`python bench/<script> <argv>`)."""
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    record = {**provenance(), "command": " ".join(["python", f"bench/{script}", *argv]),
              **result}
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return path
