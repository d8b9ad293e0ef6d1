"""Where the server's time goes when a control moves: the requests bench/bench_browser.py
recorded (--trace FILE) replayed in this process against the app `make run` serves, in the
order the browser made them, the first moves' requests under cProfile with process time.

    python bench/bench_browser.py --open --no-save --trace /tmp/trace.json
    python bench/profile_moves.py /tmp/trace.json [--kind first] [--top 40] [--sort tottime]
                                  [--slowest 10] [--dump /tmp/moves.prof]

Prints the CPU (process time) of each first move's requests, replayed once without the profiler
and once under it (from fresh caches each time), the controls whose moves cost the most, and the
profile of all of them (or of the --slowest N controls' moves only). The app
runs in one process with one thread: what is measured is the server's own work, without the
browser, the network or the other worker.
"""
import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")       # as the server runs (Makefile)
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def replay(client, request) -> int:
    # compressed as the browser's answers are (web/serving/assets.py)
    return client.get(request["url"], headers={"Accept-Encoding": "gzip, deflate, br, zstd",
                                               **request["headers"]}).status_code


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="bench_browser.py --trace output")
    ap.add_argument("--kind", default="first", choices=("first", "repeat"),
                    help="the moves profiled (the others are replayed unprofiled)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--slowest", type=int, default=0,
                    help="profile only the N controls whose moves cost the most CPU in the "
                         "first pass (without the profiler)")
    ap.add_argument("--dump", help="write the profile (pstats) here")
    ap.add_argument("--control", action="append", default=[],
                    help="profile only this control's moves (its element id; repeatable)")
    ap.add_argument("--whole-sections", action="store_true",
                    help="render a part's answer from its whole section, as before parts were "
                         "rendered alone (web/core/views.py part_wanted): for comparison")
    args = ap.parse_args(argv)
    with open(args.trace) as f:
        trace = json.load(f)

    from app import create_app
    from web.serving import server as serving
    # the trace's model only (the Austen model's trace need not wait for SmolLM2's warm-up)
    app = create_app({} if trace.get("model") else {"INSTALLED_MODELS": False})
    if args.whole_sections:
        from flask import g

        def every_part(part_id):          # every part rendered, whatever the answer needs
            g.setdefault("part_stack", []).append(part_id)
            return True
        app.jinja_env.globals["part_wanted"] = every_part
    serving.warm(app, page=True)

    def fresh_client():
        """The page at the defaults, as the browser had it before its first move: every
        section computed with every disclosure open."""
        from web.core.registry import sections
        client = app.test_client()
        first = next((s for s in trace["steps"] if s["requests"]), None)
        query = first["requests"][0]["headers"].get("hx-current-url", "").partition("?")[2] \
            if first else ""
        client.get("/?" + query, headers={"HX-Request": "true", "X-Sections": ",".join(
            s.id for s in sections())})
        return client

    def run(steps, profile, wanted):
        """Replay every step; the wanted ones under `profile`: {control id: [CPU ms]}."""
        client = fresh_client()
        cpu = {}
        for s in steps:
            timed = s["kind"] == args.kind and s["id"] in wanted
            for r in s["requests"]:
                if not timed:
                    replay(client, r)
                    continue
                start = time.process_time()
                if profile is not None:
                    profile.enable()
                status = replay(client, r)
                if profile is not None:
                    profile.disable()
                ms = (time.process_time() - start) * 1000
                cpu.setdefault(s["id"], []).append((ms, status, r["url"].split("?")[0],
                                                    r["headers"].get("hx-target", "")))
        return cpu

    steps = trace["steps"]
    section_of = {s["id"]: s["section"] for s in steps}
    ids = set(args.control) or {s["id"] for s in steps}

    def show(cpu, how):
        per_move = {i: sum(x[0] for x in v) for i, v in cpu.items()}
        totals = sorted(per_move.values())
        print(f"{args.kind} moves replayed {how}: {len(per_move)} controls; server CPU per move "
              f"median {statistics.median(totals):.1f} ms, p95 "
              f"{totals[min(len(totals) - 1, round(0.95 * (len(totals) - 1)))]:.1f} ms, "
              f"max {totals[-1]:.1f} ms, sum {sum(totals):.0f} ms")
        for i in sorted(per_move, key=lambda i: -per_move[i])[:15]:
            parts = "; ".join(f"{p} {t or '-'} {ms:.0f} ms ({st})" for ms, st, p, t in cpu[i])
            print(f"  {section_of[i]}/{i}: {per_move[i]:.0f} ms: {parts}")
        return per_move

    # first without the profiler (its cost per Python call inflates template code against
    # NumPy's), from a fresh app's caches, then again under it
    per_move = show(run(steps, None, ids), "without the profiler")
    if args.slowest:
        ids = set(sorted(per_move, key=lambda i: -per_move[i])[:args.slowest])
    app.extensions["explainer"].caches.clear()
    app.extensions["shared_answers"].clear()
    serving.warm(app, page=True)
    profile = cProfile.Profile(time.process_time)
    show(run(steps, profile, ids), "under cProfile")
    stats = pstats.Stats(profile)
    if args.dump:
        stats.dump_stats(args.dump)
    stats.sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
