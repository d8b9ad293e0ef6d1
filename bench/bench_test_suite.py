"""How long the README's test command takes on a fresh clone: `make test` in a new clone of
this repository's HEAD (committed code only), as CI runs it after its lint.

    python bench/bench_test_suite.py [--runs 1] [--no-save]

Each run clones HEAD into a temporary folder and runs `make test` there: a new .venv and
node_modules (pip's and npm's download caches make those installs quick after the first
time), then the whole suite, browser tests included, on the project's pytest-xdist workers.
Debian's chromium and redis-server are the system's (`make test` installs them when missing).
Printed and saved: the wall time of `make test` (installs included), pytest's own summary
(passed, skipped, seconds) and the load average before and after. Whatever else runs on the
machine shares its 2 cores with the suite: the load average before says if something did.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from local_server import save_result  # noqa: E402

SUMMARY = re.compile(r"^=* ?(?P<counts>\d+ passed.*?) in (?P<seconds>[\d.]+)s", re.M)
TARGET_S = 360              # the suite's budget on this machine: six minutes


def counts_of(summary: str) -> dict:
    """{"passed": 3323, "skipped": 6, ...} from pytest's summary line's counts."""
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}


def one_run(log_path: str) -> dict:
    """make test in a fresh clone of HEAD: its times and pytest's summary."""
    folder = tempfile.mkdtemp(prefix="llm-explainer-suite-")
    try:
        clone = os.path.join(folder, "repo")
        subprocess.run(["git", "clone", "-q", ROOT, clone], check=True)
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        with open(log_path, "w") as log:
            done = subprocess.run(["make", "test"], cwd=clone, stdout=log,
                                  stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - started
        with open(log_path) as f:
            text = f.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    found = SUMMARY.findall(text)
    if done.returncode != 0 or not found:
        sys.exit(f"make test failed (exit {done.returncode}); its output is in {log_path}")
    counts, pytest_s = found[-1]
    return {"make_test_s": round(seconds, 1), "pytest_s": float(pytest_s),
            "counts": counts_of(counts), "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    runs = []
    for i in range(args.runs):
        log = os.path.join(tempfile.gettempdir(), f"bench_test_suite_{i + 1}.log")
        r = one_run(log)
        runs.append(r)
        print(f"run {i + 1}: make test {r['make_test_s']:.0f} s (installs included), pytest "
              f"{r['pytest_s']:.0f} s ({TARGET_S} s budget): {r['counts']}; load average "
              f"{r['load_before']} before, {r['load_after']} after")
    if not args.no_save:
        argv_shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-save"]
        path = save_result("bench_test_suite", {"target_s": TARGET_S, "runs": runs},
                           "bench_test_suite.py", argv_shown)
        print("saved", os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
