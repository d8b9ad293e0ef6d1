"""The page as a student's browser meets it: first load, page length, and every control's answer.

Starts the app as `make run` does (app.py, default model and workers) on a free port of
127.0.0.1, drives Debian's chromium through Playwright at 1280x900, and prints:
- first load: bytes transferred (compressed sizes as sent) and seconds until the network is idle;
- page length in screens of 900 px, once every section has loaded, every disclosure closed
  (target: at most 25 screens);
- each section's core at 1280x800: the height of its box with its disclosures closed (target:
  at most 800 px, one screen), and the sections over it;
- the prose of the cores: words of paragraphs and list items outside tables, figures and "Go
  deeper" disclosures, all sections together (target: at most 3,000) and per section;
- for every slider and select shown in a section (checkVisibility: a control inside a closed
  disclosure has an offsetParent in Chromium, yet is not shown): the time from the key press
  (a slider's arrow key; a select's next option) to the last change of the page it caused (a
  MutationObserver, settled when nothing has changed for QUIET_MS and no request is in
  flight), and the bytes fetched for it. Each control is moved REPEATS times (a slider one
  step right then back, a select to its next option). The first move of a control asks for a
  value the server has not computed yet (the page was loaded at the defaults; a control moved
  before it went back to its default): a FIRST move, as a student's move to a value nobody
  asked for. The moves after it ask for values the server has answered (the default, the first
  move's value): REPEAT moves. Median and p95 of each kind, and the slowest five controls of
  each (the median of their own moves of that kind). With two worker processes a repeat may
  reach the worker that has not computed it: a repeat is at worst a first move. Beside them:
  the time until the last answer arrived (htmx:beforeOnLoad; the server's part and the
  network's) and the renderer main thread's busy time during the move (Chrome's
  Performance.getMetrics TaskDuration: the browser's own work, less sensitive to a busy machine
  than the wall clock).
Results also go to bench/results/bench_browser.json with date, machine and commit.

With --open, every "Go deeper" disclosure is open (`open=` in the URL names them all, as a
student who opened each one would have it) while the controls are timed, those inside the
disclosures included; saved as bench_browser_open.json. With --model KEY, the page is on that
model (model=KEY; saved as bench_browser_KEY.json, or bench_browser_open_KEY.json).

With --trace FILE, the requests each move made (path, query and the htmx headers) are written
to FILE as JSON, for bench/profile_moves.py to replay the slowest ones under a profiler.

    python bench/bench_browser.py [--url http://127.0.0.1:8000] [--no-save] [--limit N]
                                  [--section ID] [--repeats N] [--open] [--model KEY]
                                  [--trace FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from local_server import (  # noqa: E402
    CHROMIUM,
    pct,
    save_result,
    serve,
    stop_server,
    wait_until_ready,
)
from local_server import CHROMIUM_ARGS as ARGS  # noqa: E402

WIDTH, HEIGHT = 1280, 900
CORE_HEIGHT = 800              # a core is one screen of a 1280x800 laptop
TARGET_SCREENS = 25
TARGET_CORE_WORDS = 3000
QUIET_MS = 600
TIMEOUT_S = 20
REPEATS = 3

WATCH = """() => {
  window.__bench = {last: 0, pressed: 0, inflight: 0, answered: 0};
  new MutationObserver(() => { window.__bench.last = performance.now(); })
    .observe(document.body, {subtree: true, childList: true, attributes: true,
                             characterData: true});
  for (const name of ['keydown', 'input']) {
    document.addEventListener(name, () => {
      if (!window.__bench.pressed) window.__bench.pressed = performance.now(); }, true);
  }
  document.addEventListener('htmx:beforeRequest', () => { window.__bench.inflight += 1; });
  document.addEventListener('htmx:afterRequest', () => { window.__bench.inflight -= 1; });
  // an answer arrived (before htmx swaps it in)
  document.addEventListener('htmx:beforeOnLoad', () => {
    window.__bench.answered = performance.now(); });
}"""


class Transfer:
    """Bytes of every finished response (headers + body as sent, i.e. compressed)."""
    def __init__(self, page):
        self.bytes = 0
        self.requests = 0
        page.on("requestfinished", self.add)

    def add(self, request):
        try:
            sizes = request.sizes()
        except Exception:                           # the page was closed meanwhile
            return
        self.bytes += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        self.requests += 1


SETTLED = """([quietMs, timeoutMs]) => new Promise(resolve => {
  // resolves once nothing has changed for quietMs and no request is in flight: checked at each
  // change, each htmx event and quietMs after the latest of them (the page's own timers)
  const b = window.__bench, t0 = performance.now();
  let timer = null;
  const check = () => {
    const now = performance.now(), since = now - Math.max(b.last, b.pressed || t0);
    if ((b.inflight <= 0 && since >= quietMs) || now - t0 > timeoutMs) { finish(); return; }
    clearTimeout(timer);
    timer = setTimeout(check, b.inflight > 0 ? quietMs : quietMs - since + 1);
  };
  const obs = new MutationObserver(check);
  const finish = () => { obs.disconnect(); clearTimeout(timer);
    document.removeEventListener('htmx:afterRequest', check); resolve(); };
  obs.observe(document.body, {subtree: true, childList: true, attributes: true,
                              characterData: true});
  document.addEventListener('htmx:afterRequest', check);
  check();
})"""


def settle(page, started_at: float) -> tuple:
    """Wait until nothing changed for QUIET_MS and no request is in flight (SETTLED, in the
    page); milliseconds from the key press to the last change (None when nothing changed), and
    from the key press to the last answer's arrival (None when nothing was asked): the rest is
    the browser's work (swapping, drawing the figures)."""
    page.evaluate(SETTLED, [QUIET_MS, TIMEOUT_S * 1000])
    last, pressed, answered = page.evaluate(
        "() => [window.__bench.last, window.__bench.pressed, window.__bench.answered]")
    pressed = pressed or started_at
    return ((last - pressed) if last > pressed else None,
            (answered - pressed) if answered > pressed else None)


def load_everything(page):
    """Scroll down step by step until no section is left to load (as a reader would)."""
    for _ in range(400):
        left = page.evaluate("() => document.querySelectorAll('[data-lazy]').length")
        if not left:
            break
        page.evaluate("() => { const el = document.querySelector('[data-lazy]'); "
                      "if (el) el.scrollIntoView(); }")
        page.wait_for_timeout(100)
    page.wait_for_load_state("networkidle")


CLOSE_ALL = """() => document.querySelectorAll('details[open]')
  .forEach(d => { d.open = false; })"""

# Height of each section's box (the overview's too), as laid out now.
CORE_HEIGHTS = """() => Array.from(
    document.querySelectorAll('#overview, #sections > section.section'))
  .map(s => [s.id, Math.round(s.getBoundingClientRect().height)])"""

# Words of prose per section: the visible text of each paragraph and list item (not a token
# chip) outside tables, figures and "Go deeper" disclosures, each counted once (an item inside a
# counted one is part of it). A word is a run of non-space characters with a letter or digit.
CORE_WORDS = """() => Array.from(
    document.querySelectorAll('#sections > section.section')).map(s => {
  const outside = 'table, figure, .plot, .plot-box, details.deeper, .chip, .chips';
  const counted = Array.from(s.querySelectorAll('p, li')).filter(el =>
    !el.closest(outside) && el.getClientRects().length &&
    !(el.parentElement && el.parentElement.closest('p, li')));
  const words = counted.reduce((n, el) =>
    n + el.innerText.split(/\\s+/).filter(w => /[\\p{L}\\p{N}]/u.test(w)).length, 0);
  return [s.id, words];
})"""


def measure_cores(page) -> dict:
    """Page length with every disclosure closed (at WIDTH x HEIGHT), then each core's height at
    1280x800 and the words of the cores' prose."""
    result = {}
    page.evaluate(CLOSE_ALL)
    page.wait_for_timeout(300)
    height = page.evaluate("() => document.documentElement.scrollHeight")
    result["page"] = {"height_px": height, "screens": round(height / HEIGHT, 1),
                      "target_screens": TARGET_SCREENS}
    print(f"page, every section loaded, every disclosure closed: {height:,} px = "
          f"{height / HEIGHT:.1f} screens of {HEIGHT} px (target <= {TARGET_SCREENS})")

    page.set_viewport_size({"width": 1280, "height": CORE_HEIGHT})
    page.wait_for_timeout(1000)                  # figures follow the window's resize
    heights = dict(page.evaluate(CORE_HEIGHTS))
    over = {sid: h for sid, h in heights.items() if h > CORE_HEIGHT}
    result["cores"] = {"viewport": f"1280x{CORE_HEIGHT}", "target_px": CORE_HEIGHT,
                       "height_px": heights, "over_target": over}
    print(f"cores at 1280x{CORE_HEIGHT}: {len(heights) - len(over)} of {len(heights)} fit "
          f"{CORE_HEIGHT} px")
    for sid, h in over.items():
        print(f"  over: {sid} {h:,} px ({h / CORE_HEIGHT:.1f} screens)")

    words = dict(page.evaluate(CORE_WORDS))
    total = sum(words.values())
    result["prose"] = {"words": total, "target_words": TARGET_CORE_WORDS, "per_section": words}
    print(f"prose of the cores: {total:,} words (target <= {TARGET_CORE_WORDS:,}); most: " +
          ", ".join(f"{sid} {n}" for sid, n in sorted(words.items(), key=lambda kv: -kv[1])[:5]))
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.wait_for_timeout(500)
    return result


def controls(page) -> list:
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        'section.section input[type=range], section.section select'))
      .filter(el => el.id && el.checkVisibility() && !el.disabled)
      .map(el => ({id: el.id, kind: el.tagName === 'SELECT' ? 'select' : 'range',
                   section: el.closest('section.section').id}))""")


def move(page, c, back=False) -> None:
    """One step of the control: a slider's arrow key (back: the other way, unless at an end), a
    select's next option."""
    el = page.locator(f"#{c['id']}")
    el.scroll_into_view_if_needed()
    if c["kind"] == "range":
        at_min, at_max = page.evaluate(
            "(id) => { const e = document.getElementById(id); "
            "return [Number(e.value) <= Number(e.min), Number(e.value) >= Number(e.max)]; }",
            c["id"])
        left = at_max or (back and not at_min)
        el.focus()
        page.keyboard.press("ArrowLeft" if left else "ArrowRight")
    else:
        options = el.evaluate("e => Array.from(e.options).map(o => o.value)")
        current = el.evaluate("e => e.value")
        i = options.index(current) if current in options else 0
        el.select_option(options[(i + 1) % len(options)])


class Requests:
    """The page's own requests (sections, the overview, the page) since the last take():
    path with query and the htmx headers the server reads."""
    KEPT = ("hx-request", "hx-target", "hx-trigger", "x-sections", "x-follows",
            "x-follows-later", "hx-current-url", "hx-history-restore-request")

    def __init__(self, page, base):
        self.base, self.seen = base, []
        page.on("request", self.add)

    def add(self, request):
        path = request.url[len(self.base):]
        if request.url.startswith(self.base) and not path.startswith(("/static/", "/assets/")):
            headers = {k: v for k, v in request.headers.items() if k.lower() in self.KEPT}
            self.seen.append({"url": path, "headers": headers})

    def take(self) -> list:
        seen, self.seen = self.seen, []
        return seen


def kind_stats(steps, kind: str) -> dict:
    """Median, p95 and the slowest five controls of one kind of move ("first" or "repeat")."""
    own = [s for s in steps if s["kind"] == kind and s["ms"] is not None]
    if not own:
        return None
    times = [s["ms"] for s in own]
    per = {}
    for s in own:
        per.setdefault(s["id"], []).append(s)
    slowest = sorted(({"id": i, "section": ss[0]["section"], "moves": len(ss),
                       "ms": round(statistics.median(x["ms"] for x in ss), 1)}
                      for i, ss in per.items()), key=lambda c: -c["ms"])[:5]
    answered = [s["answered_ms"] for s in own if s.get("answered_ms") is not None]
    busy = [s["browser_busy_ms"] for s in own if s.get("browser_busy_ms") is not None]
    return {"moves": len(own), "median": round(statistics.median(times), 1),
            "p95": round(pct(times, 95), 1), "slowest5": slowest,
            # the key press to the last answer's arrival: the server's part and the network's
            "answered_median": round(statistics.median(answered), 1) if answered else None,
            "answered_p95": round(pct(answered, 95), 1) if answered else None,
            # the renderer's main thread busy during the move (its own work, the settling wait
            # included: a fixed QUIET_MS of idle page adds little)
            "browser_busy_median": round(statistics.median(busy), 1) if busy else None,
            "browser_busy_p95": round(pct(busy, 95), 1) if busy else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a server already running on this machine "
                                  "(default: start app.py on a free port)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--model", default=None, help="the page on this model of the app "
                    "(model=KEY, e.g. smollm2; saved as bench_browser_KEY.json)")
    ap.add_argument("--open", action="store_true", help="every disclosure open while the "
                    "controls are timed")
    ap.add_argument("--limit", type=int, default=0, help="measure only the first N controls")
    ap.add_argument("--repeats", type=int, default=REPEATS, help="moves per control")
    ap.add_argument("--section", action="append", default=[],
                    help="measure only the controls of this section "
                    "(repeatable; implies --no-save)")
    ap.add_argument("--trace", help="write each move's requests to this JSON file")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    base, server = serve(args.url)
    result = {}
    try:
        # a model beside the default warms after the server answers, in the processes that
        # serve the page (SmolLM2: minutes on 2 cores): measured once every offered one is ready
        for key in dict.fromkeys([args.model or "smollm2", "smollm2"]):
            waited = wait_until_ready(base, key, offered_only=key != args.model)
            if waited is not None:
                print(f"model={key} ready after {waited:.0f} s")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            # bypass_csp: the page forbids eval, which page.evaluate needs; nothing else changes.
            context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT},
                                          bypass_csp=True)
            page = context.new_page()
            transfer = Transfer(page)
            asked = Requests(page, base)
            t0 = time.perf_counter()
            page.goto(base + "/" + (f"?model={args.model}" if args.model else ""),
                      wait_until="networkidle")
            first_s = time.perf_counter() - t0
            result["first_load"] = {"bytes": transfer.bytes, "requests": transfer.requests,
                                    "seconds_to_network_idle": round(first_s, 2)}
            print(f"first load: {transfer.bytes / 1e6:.2f} MB in {transfer.requests} requests, "
                  f"{first_s:.2f} s to network idle")

            load_everything(page)
            result.update(measure_cores(page))
            if args.open:                  # the same page with every disclosure open
                ids = page.evaluate("() => Array.from(document.querySelectorAll("
                                    "'details.deeper[id]')).map(d => d.id.replace(/^deeper-/, ''))")
                query = [f"model={args.model}"] if args.model else []
                page.goto(base + "/?" + "&".join(query + ["open=" + ",".join(ids)]),
                          wait_until="networkidle")
                load_everything(page)
                result["open"] = {"disclosures": len(ids),
                                  "open_now": page.evaluate(
                                      "() => document.querySelectorAll('details[open]').length")}
                print(f"every disclosure open: {len(ids)} named in the URL, "
                      f"{result['open']['open_now']} open on the page")

            page.evaluate(WATCH)
            asked.take()
            # the renderer's main-thread busy time (Chrome's Performance.getMetrics
            # TaskDuration): the browser's own work per move, beside the wall-clock times
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")

            def busy_s() -> float:
                return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                            if m["name"] == "TaskDuration")
            found = controls(page)
            if args.section:
                found = [c for c in found if c["section"] in args.section]
            if args.limit:
                found = found[:args.limit]
            steps, skipped, moved = [], [], []
            for c in found:
                for k in range(args.repeats):
                    if not page.locator(f"#{c['id']}").is_visible():
                        skipped.append(c["id"])      # hidden or replaced by an earlier step
                        break
                    page.evaluate("() => { window.__bench.pressed = 0; window.__bench.last = 0; "
                                  "window.__bench.answered = 0; }")
                    before = transfer.bytes
                    started = page.evaluate("() => performance.now()")
                    task0 = busy_s()
                    move(page, c, back=k % 2 == 1)
                    ms, answered = settle(page, started)
                    task_ms = (busy_s() - task0) * 1000
                    steps.append({**c, "move": k, "kind": "first" if k == 0 else "repeat",
                                  "ms": None if ms is None else round(ms, 1),
                                  "answered_ms": None if answered is None else round(answered, 1),
                                  "browser_busy_ms": round(task_ms, 1),
                                  "bytes": transfer.bytes - before,
                                  "requests": asked.take()})
                if any(s["id"] == c["id"] for s in steps):
                    moved.append(c)
            changed = [s for s in steps if s["ms"] is not None]
            times = [s["ms"] for s in changed]
            sizes = [s["bytes"] for s in steps]
            per_control = []
            for c in moved:
                own = [s for s in changed if s["id"] == c["id"]]
                if own:
                    per_control.append({**c, "moves": len(own),
                                        "ms": round(statistics.median(s["ms"] for s in own), 1),
                                        "bytes": statistics.median(s["bytes"] for s in own)})
            result["controls"] = {
                "count": len(moved), "moves": len(steps), "repeats": args.repeats,
                "unchanged": sorted({s["id"] for s in steps if s["ms"] is None}),
                "not_visible_at_their_turn": skipped,
                "ms": {"median": round(statistics.median(times), 1),
                       "p95": round(pct(times, 95), 1)} if times else None,
                "bytes": {"median": statistics.median(sizes), "p95": pct(sizes, 95)}
                if sizes else None,
                "worst5": sorted(per_control, key=lambda s: -s["ms"])[:5],
                "first": kind_stats(steps, "first"), "repeat": kind_stats(steps, "repeat"),
                "all": [{k: v for k, v in s.items() if k != "requests"} | {
                    "requests": len(s["requests"])} for s in steps]}
            if args.trace:
                with open(args.trace, "w") as f:
                    json.dump({"base": base, "model": args.model, "steps": steps}, f, indent=1)
            print(f"{len(moved)} controls (sliders and selects in sections), {len(steps)} moves: "
                  f"key press to the last change of the page")
            if times:
                print(f"  median {statistics.median(times):.0f} ms, p95 {pct(times, 95):.0f} ms; "
                      f"bytes per step median {statistics.median(sizes) / 1e3:.1f} kB, "
                      f"p95 {pct(sizes, 95) / 1e3:.1f} kB")
            for kind in ("first", "repeat"):
                k = result["controls"][kind]
                if k:
                    print(f"  {kind} moves ({k['moves']}): median {k['median']:.0f} ms, "
                          f"p95 {k['p95']:.0f} ms (the answers in: median "
                          f"{k['answered_median'] or 0:.0f} ms, p95 {k['answered_p95'] or 0:.0f}"
                          f" ms; browser main thread busy: median "
                          f"{k['browser_busy_median'] or 0:.0f} ms); slowest: " + ", ".join(
                              f"{c['section']}/{c['id']} {c['ms']:.0f} ms" for c in k["slowest5"]))
            if skipped:
                print("  not visible when their turn came: " + ", ".join(skipped))
            if result["controls"]["unchanged"]:
                print("  no visible change: " + ", ".join(result["controls"]["unchanged"]))
            browser.close()
    finally:
        stop_server(server)
    if not args.no_save and not args.limit and not args.section:
        result["model"] = args.model or "default"
        name = "bench_browser" + ("_open" if args.open else "") + (
            f"_{args.model}" if args.model else "")
        print("saved", save_result(name,
                                   result, "bench_browser.py",
                                   argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
