"""The overview's Next token button: from the click to the appended token on screen.

Starts the app as `make run` does (app.py, default model) on a free port of 127.0.0.1, opens the
page in Debian's chromium at 1280x900 and presses Next token STEPS times. For each press it
prints the time from the click to the answer received (htmx:beforeSwap), to the moment the
new chip is in the page (the swapped live part holds the new step count), and until the page
stops changing (the thumbnail redrawn; the QUIET_MS without a mutation are not counted). It
also times GET /overview alone for a step right after the one before (the server's part: one
more step of the generation loop, the activation cache of the sequence, the render).
Results also go to bench/results/bench_overview_step.json with date, machine and commit.

With --model KEY the page is on that model of the app (model=KEY; saved as
bench_overview_step_KEY.json).

    python bench/bench_overview_step.py [--url http://127.0.0.1:8000] [--steps 10] [--model KEY]
                                        [--no-save]
"""
import argparse
import os
import statistics
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from local_server import CHROMIUM, save_result, serve, stop_server  # noqa: E402
from local_server import CHROMIUM_ARGS as ARGS  # noqa: E402

QUIET_MS = 300

PRESS = """async ([expected, quiet]) => {
  const start = performance.now();
  let shown = null, last = start, answered = null;
  document.addEventListener('htmx:beforeSwap', () => { answered = performance.now(); },
                            {once: true});
  const done = new Promise((resolve) => {
    const observer = new MutationObserver(() => {
      last = performance.now();
      const live = document.getElementById('overview-live');
      if (shown === null && live && live.getAttribute('data-steps') === String(expected)) {
        shown = last;
      }
    });
    observer.observe(document.body, {subtree: true, childList: true, attributes: true});
    const tick = () => {
      if (shown !== null && performance.now() - last > quiet) { observer.disconnect(); resolve(); }
      else setTimeout(tick, 20);
    };
    tick();
  });
  document.getElementById('ov-next').click();
  await done;
  return [shown - start, last - start, answered - start];
}"""


MODEL = ""          # "model=KEY&" when --model is given


def get(base: str, query: str) -> float:
    """GET /overview?<query> (the live part, as Next token asks), in ms."""
    req = urllib.request.Request(f"{base}/overview?{MODEL}{query}",
                                 headers={"HX-Request": "true", "HX-Target": "overview-live"})
    start = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        r.read()
    return (time.perf_counter() - start) * 1000


def server_ms(base: str, steps: int, repeats: int = 3) -> float:
    """Best of `repeats`: the answer for step `steps` right after step `steps - 1` (as Next token
    asks), each time with a temperature not used before, so nothing is remembered but the loop
    up to the step before."""
    best = float("inf")
    for _ in range(repeats):
        server_ms.fresh += 1
        temp = f"s_temp={0.5 + server_ms.fresh / 1000:.3f}"
        get(base, f"ov_steps={steps - 1}&{temp}")
        best = min(best, get(base, f"ov_steps={steps}&{temp}"))
    return best


server_ms.fresh = 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a server already running (loopback only)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--model", default=None, help="the app's model (model=KEY)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    global MODEL
    MODEL = f"model={args.model}&" if args.model else ""
    base, proc = serve(args.url)
    from playwright.sync_api import sync_playwright
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_context(viewport={"width": 1280, "height": 900},
                                       bypass_csp=True).new_page()
            page.goto(base + "/" + (f"?model={args.model}" if args.model else ""))
            page.wait_for_load_state("networkidle")
            shown, settled, answered = [], [], []
            for step in range(1, args.steps + 1):
                a, b, c = page.evaluate(PRESS, [step, QUIET_MS])
                shown.append(a)
                settled.append(b)
                answered.append(c)
                print(f"step {step:2d}: answer in {c:6.1f} ms, token shown {a:6.1f} ms, "
                      f"page settled {b:6.1f} ms")
            browser.close()
        server = [server_ms(base, s) for s in (1, args.steps // 2, args.steps)]
    finally:
        stop_server(proc)
    result = dict(steps=args.steps, shown_ms=shown, settled_ms=settled, answered_ms=answered,
                  answered_median_ms=statistics.median(answered),
                  shown_median_ms=statistics.median(shown), shown_max_ms=max(shown),
                  settled_median_ms=statistics.median(settled),
                  server_ms={str(s): round(v, 1) for s, v in
                             zip((1, args.steps // 2, args.steps), server, strict=False)})
    print(f"click to token shown: median {result['shown_median_ms']:.1f} ms, "
          f"max {result['shown_max_ms']:.1f} ms (target <= 300 ms)")
    print(f"click to the answer received: median {result['answered_median_ms']:.1f} ms")
    print(f"click to page settled: median {result['settled_median_ms']:.1f} ms")
    print("server, GET /overview for step 1 / mid / last after the step before: "
          + " / ".join(f"{v:.1f} ms" for v in server))
    if not args.no_save:
        result["model"] = args.model or "default"
        print("saved", save_result("bench_overview_step" + (f"_{args.model}" if args.model
                                                             else ""),
                                   result, "bench_overview_step.py", argv))


if __name__ == "__main__":
    main(sys.argv[1:])
