"""Where the browser's time goes when a control moves: Chrome's sampling profiler (CDP Profiler)
over one move of each named control, on the page as bench/bench_browser.py drives it (app.py
started as `make run` starts it, headless Chromium at 1280x900, every section loaded, with
--open every "Go deeper" disclosure open), from the key press until the page stops changing.

    python bench/profile_browser.py s_temp-range att-layer [--open] [--model KEY] [--top 15]

For each control: the time to the last change and to the last answer's arrival, the renderer's
busy time (Performance.getMetrics TaskDuration) and the sampled self time per function: page
scripts by file and line, "(program)" for the browser's own work outside JavaScript (style,
layout, paint), "(garbage collector)". The window includes Playwright's own calls (its
selector engine appears as "query" in an unnamed script).
"""
import argparse
import collections
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_browser as B  # noqa: E402
from local_server import CHROMIUM, serve, stop_server, wait_until_ready  # noqa: E402
from local_server import CHROMIUM_ARGS as ARGS  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("controls", nargs="+", help="element ids of sliders or selects")
    ap.add_argument("--open", action="store_true", help="every disclosure open")
    ap.add_argument("--model", default=None)
    ap.add_argument("--url", help="a server already running on this machine")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    base, server = serve(args.url)
    try:
        if args.model:
            wait_until_ready(base, args.model)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": B.WIDTH, "height": B.HEIGHT},
                                          bypass_csp=True)
            page = context.new_page()
            query = [f"model={args.model}"] if args.model else []
            page.goto(base + "/?" + "&".join(query), wait_until="networkidle")
            B.load_everything(page)
            if args.open:
                ids = page.evaluate("() => Array.from(document.querySelectorAll("
                                    "'details.deeper[id]')).map(d => d.id.replace(/^deeper-/, ''))")
                page.goto(base + "/?" + "&".join(query + ["open=" + ",".join(ids)]),
                          wait_until="networkidle")
                B.load_everything(page)
            page.evaluate(B.WATCH)
            kinds = {c["id"]: c for c in B.controls(page)}
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})

            def busy_s():
                return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                            if m["name"] == "TaskDuration")

            for cid in args.controls:
                c = kinds.get(cid)
                if c is None:
                    print(f"{cid}: no such control shown (shown: {', '.join(sorted(kinds))})")
                    continue
                page.evaluate("() => { window.__bench.pressed = 0; window.__bench.last = 0; "
                              "window.__bench.answered = 0; }")
                task0 = busy_s()
                cdp.send("Profiler.start")
                started = page.evaluate("() => performance.now()")
                B.move(page, c)
                ms, answered = B.settle(page, started)
                profile = cdp.send("Profiler.stop")["profile"]
                busy = (busy_s() - task0) * 1000
                nodes = {n["id"]: n["callFrame"] for n in profile["nodes"]}
                self_ms = collections.Counter()
                for sid, dt in zip(profile["samples"], profile["timeDeltas"], strict=True):
                    f = nodes[sid]
                    where = f["url"].rsplit("/", 1)[-1]
                    self_ms[f"{f['functionName'] or '(anonymous)'}"
                            + (f" {where}:{f['lineNumber'] + 1}" if where else "")] += dt / 1000
                print(f"{c['section']}/{cid}: last change {ms or 0:.0f} ms, last answer "
                      f"{answered or 0:.0f} ms after the key press; renderer busy {busy:.0f} ms")
                for name, v in self_ms.most_common(args.top):
                    if name != "(idle)":
                        print(f"  {v:8.1f} ms  {name}")
            browser.close()
    finally:
        stop_server(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
