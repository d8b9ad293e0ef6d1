"""A classroom on one server: simulated students reading the page, typing prompts of their own
and moving its controls at once.

Each student is a thread with its own keep-alive connection, as a browser has. A student first
loads the page the class opens (GET /: the model's own prompt and the first sections, the same
address for every student of a model), at a random moment of the first 2 s, then every ~2 s
(uniformly 1.5-2.5 s) does what the page's htmx does:
- first, and then one time in ten, types a new prompt of their own (a passage cut at random from
  a held-out chapter of Pride and Prejudice, so no two students share one; with --fixed-prompts,
  one of six fixed prompts instead): GET / with `X-Sections` naming the sections near the
  prompt box. The box is the overview's first at the top of the page, so these are the first
  two sections (AT_THE_PROMPT_BOX: what a browser at 1280x900 names there), and the student
  reads on from the first;
- otherwise moves a control of a random section to a random value of the control's whole range
  (a slider's min to max in its steps, any option of a select), as the page they were sent
  shows it for their prompt: GET /section/<id>?<whole state> with the control's HX-Target and
  HX-Trigger. A section not on their page yet for this prompt loads itself first (GET
  /section/<id>, as it does when scrolled to): that is the request of that turn, and the move
  is the next. When an answer names a change (HX-Trigger: "<id>-changed"), the elements of the
  student's page that follow it (hx-trigger "<id>-changed from:body") ask for their part at
  once, as htmx does.
The controls, their ranges and the followers are read from the HTML each answer brings (the
page's <input type="range"> and <select>); choices are random with a fixed seed.
With --picked-values, the former class instead: moves among a hand-picked list of values
(MOVES) of the section on screen, one time in five scrolling on to another section.

By default the script starts the app itself as `make run` serves it (app.py, the default model)
on a free port of 127.0.0.1, waits until it answers, runs the class and stops the server. `--url`
points it at a server already running, on this machine only (127.0.0.0/8, localhost, ::1): the
script refuses any other address.

It prints, for all requests: how many, answered 200 / refused busy (503, the overload gate) /
errors (anything else: a 4xx, a 5xx other than 503, a timeout, a dropped connection); p50, p95
and max latency of the 200s and of the 503s; p95 per kind; and saves the same as
bench/results/load_test.json (with date, machine and commit) unless --no-save.

With --smollm2 N, N of the students read the page on SmolLM2-135M-Instruct (`model=smollm2`, as
its picker sets it; the server must offer it: `make run` installs it), the others on the default
model; their answers are reported per model too. The class starts once every model the server
offers is ready (SmolLM2 warms in the serving processes after the default model answers, for
minutes on 2 cores). The server's memory (Rss and Pss of the server
process and its workers, bench/local_server.server_memory) is read at the end when the script
started the server.

    python bench/load_test.py [--students 60] [--seconds 60] [--workers N] [--fixed-prompts]
                              [--smollm2 N] [--url http://127.0.0.1:8000] [--no-save]
                              [--picked-values]
"""
import argparse
import collections
import html as html_text
import http.client
import os
import random
import re
import statistics
import sys
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from local_server import (  # noqa: E402
    loopback_only,
    pct,
    save_result,
    serve,
    server_memory,
    stop_server,
    wait_until_ready,
)

from web.core.registry import SECTIONS, all_params  # noqa: E402

HELD_OUT = os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt")
PROMPTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
    "Mr. Darcy bowed to Elizabeth, and Elizabeth smiled at Mr. Darcy.",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home",
    "The weather was fine, and they walked to Meryton.",
    "It was a beautiful",
    "<img src=x onerror=alert(1)> a student pastes HTML",
]
# (section, parameter, values a student might pick): real controls, valid values.
MOVES = [
    ("tokenization", "merges", range(0, 61)),
    ("tokenization", "step", range(0, 4)),
    ("embeddings", "emb_k", range(1, 21)),
    ("positions", "pos_base", [100, 1000, 10000, 50000, 100000]),
    ("positions", "pos_layer", range(0, 4)),
    ("block", "blk_layer", range(0, 4)),
    ("block", "blk_part", ["q", "k", "v", "pattern", "z", "attn_out", "resid_mid", "ln2"]),
    ("attention", "att_layer", range(0, 4)),
    ("attention", "att_head", ["mean", "0", "1", "2", "3", "4", "5", "6", "7"]),
    ("attention", "att_token", range(0, 4)),        # the shortest prompt has 4 tokens
    ("feedforward", "ffn_layer", range(0, 4)),
    ("feedforward", "ffn_token", range(0, 4)),
    ("logits", "lg_temp", [0.0, 0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 2.0]),
    ("sampling", "s_temp", [0.2, 0.5, 0.7, 1.0, 1.5, 2.0]),
    ("sampling", "s_topk", [0, 1, 5, 10, 40, 100]),
    ("sampling", "s_topp", [0.5, 0.8, 0.9, 0.95, 1.0]),
    ("sampling", "s_minp", [0.0, 0.02, 0.05, 0.1]),
    ("sampling", "s_seed", range(0, 100)),
    ("decoding", "b_width", range(1, 9)),
    ("decoding", "b_new", range(1, 13)),
    ("generation", "gen_step", range(0, 20)),
    ("kvcache", "kv_ctx", [1024, 8192, 32768, 131072]),
    ("batching", "bat_slots", range(1, 9)),
    ("batching", "bat_block", [4, 8, 16, 32, 64]),
    ("quantization", "q_group", [32, 64, 128]),
    ("speculative", "sp_gamma", range(1, 9)),
    ("speculative", "sp_seed", range(0, 100)),
    ("tiling", "til_bq", [4, 8, 16, 32]),
    ("tiling", "til_bk", [4, 8, 16, 32]),
    ("roofline", "rf_batch", [1, 4, 16, 64, 256]),
    ("roofline", "rf_len", [256, 1024, 4096, 8192]),   # the default model (Llama 3 8B) reads 8,192
]
NEW_PROMPT_SHARE = 0.1
# SmolLM2's generation section runs 8 tokens by default (web.sections.generation's big_default):
# its students step through those.
BIG_GEN_MAX = next(p.big_default for p in all_params() if p.name == "gen_max")


SECTION_ORDER = [m[0] for m in MOVES]
SECTION_ORDER = sorted(set(SECTION_ORDER), key=SECTION_ORDER.index)
# The loaded sections near the screen when a student types a prompt (the box is at the top of
# the page, in the overview): static/requests.js names them in X-Sections, and a browser at
# 1280x900 names these two (at 1024x768 the first alone, on a phone none).
AT_THE_PROMPT_BOX = [s.id for s in SECTIONS[:2]]
NEW_SECTION_SHARE = 0.2


def own_prompt(rng: random.Random, words: list) -> str:
    """A prompt a student might type: 3-30 consecutive words of the held-out chapter, cut at a
    random place, sometimes lower-cased or with a question added."""
    n = rng.randint(3, 30)
    start = rng.randrange(0, len(words) - n)
    text = " ".join(words[start:start + n])
    r = rng.random()
    if r < 0.15:
        text = text.lower()
    elif r < 0.25:
        text += " What will " + rng.choice(["Elizabeth", "Mr. Darcy", "Jane", "she"]) + " say?"
    return text


# --- the page's own controls, read from its HTML -----------------------------------------------
_SECTION = re.compile(r'<section id="([a-z0-9_-]+)" class="section"')
_ATTR = re.compile(r'([a-zA-Z_:][-a-zA-Z0-9_:.]*)="([^"]*)"')
_RANGE = re.compile(r'<input\b[^>]*\btype="range"[^>]*>')
_SELECT = re.compile(r'<select\b([^>]*)>(.*?)</select>', re.S)
_OPTION = re.compile(r'<option\b[^>]*\bvalue="([^"]*)"')
_FOLLOWER = re.compile(r'<[a-z]+\b[^>]*\bhx-trigger="[^"]*-changed from:body[^"]*"[^>]*>')


def attrs(tag: str) -> dict:
    return {k: html_text.unescape(v) for k, v in _ATTR.findall(tag)}


def range_values(a: dict) -> list:
    """Every value of a slider from its min to its max in its steps, as the browser writes
    them."""
    step = a.get("step", "1")
    lo, hi = float(a.get("min", "0")), float(a.get("max", "100"))
    st = float(step) if step != "any" else 0.01
    n = int(round((hi - lo) / st + 1e-9))
    decimals = len(step.split(".")[1]) if "." in step else 0
    out = []
    for k in range(n + 1):
        v = lo + k * st
        out.append(str(int(round(v))) if decimals == 0 and float(v).is_integer()
                   else f"{v:.{max(decimals, 1)}f}".rstrip("0").rstrip("."))
    return out


def page_controls(text: str, section: str = None) -> dict:
    """{section id: {"controls": [(name, values, HX-Target, element id)], "followers":
    [(event, path, HX-Target, element id)]}} of the sections in this HTML (`section`: the
    section a part belongs to, when the HTML holds no section's box)."""
    cuts = [(m.start(), m.group(1)) for m in _SECTION.finditer(text)]
    if not cuts:
        cuts = [(0, section)] if section else []
    out = {}
    for i, (at, sid) in enumerate(cuts):
        chunk = text[at:cuts[i + 1][0] if i + 1 < len(cuts) else len(text)]
        found = out.setdefault(sid, {"controls": [], "followers": []})
        for tag in _RANGE.findall(chunk):
            a = attrs(tag)
            if a.get("name") and "disabled" not in a and a.get("hx-get"):
                found["controls"].append((a["name"], range_values(a),
                                          a.get("hx-target", "").lstrip("#"), a.get("id", "")))
        for head, body in _SELECT.findall(chunk):
            a = attrs(head)
            values = _OPTION.findall(body)
            if a.get("name") and values and a.get("hx-get"):
                found["controls"].append((a["name"], [html_text.unescape(v) for v in values],
                                          a.get("hx-target", "").lstrip("#"), a.get("id", "")))
        for tag in _FOLLOWER.findall(chunk):
            a = attrs(tag)
            for event in re.findall(r"([a-z0-9_-]+-changed) from:body", a["hx-trigger"]):
                found["followers"].append((event, a.get("hx-get", "").split("?")[0],
                                           a.get("hx-target", "").lstrip("#"), a.get("id", "")))
    return out


class Student(threading.Thread):
    def __init__(self, n, parts, stop_at, rng_seed, results, lock, words, model=None,
                 picked=False):
        super().__init__(daemon=True)
        self.model = model                  # None: the default model; else its model= name
        self.picked = picked                # --picked-values: the former hand-picked moves
        self.page = {}                      # section id -> its controls and followers, read
        self.going_to = None                #   from the answers for this prompt; the section
        #                                     a move is on its way to (loaded first)
        self.rng = random.Random(rng_seed)
        self.parts, self.stop_at = parts, stop_at
        self.results, self.lock = results, lock
        self.words = words
        # the page the class opens has the model's own prompt; --picked-values: the former
        # class's first page, with the student's prompt
        self.prompt = self.next_prompt() if picked else None
        self.state = {}
        self.conn = None
        self.section = self.rng.choice(SECTION_ORDER[:2])      # the first sections are on screen
        self.loaded = set(SECTION_ORDER[:2])

    def next_prompt(self) -> str:
        if self.words is None:
            return self.rng.choice([p for p in PROMPTS if p != getattr(self, "prompt", None)])
        return own_prompt(self.rng, self.words)

    def connect(self):
        self.conn = http.client.HTTPConnection(self.parts.hostname, self.parts.port or 80,
                                               timeout=30)

    def query(self, path: str) -> str:
        chosen = {"model": self.model} if self.model else {}
        return path + "?" + urllib.parse.urlencode(
            {**chosen, **({} if self.prompt is None else {"prompt": self.prompt}), **self.state},
            quote_via=urllib.parse.quote)

    def seen(self, path: str, kind: str, status, text: str, headers: dict) -> list:
        """Read an answer (its HTML: the controls of the sections it holds; its HX-Trigger):
        the requests of the page's elements that follow the change it names, as
        [(path with query, kind, headers)]."""
        if status != 200 or self.picked:
            return []
        section = path.split("?")[0].rsplit("/", 1)[-1] if path.startswith("/section/") else None
        for sid, found in page_controls(text, section).items():
            if sid is None:
                continue
            mine = self.page.setdefault(sid, {"controls": {}, "followers": {}})
            for c in found["controls"]:
                mine["controls"][c[0]] = c
            for f in found["followers"]:
                mine["followers"][f[3] or f[1] + f[2]] = f
        event = (headers or {}).get("HX-Trigger", "")
        follow = []
        for sid, mine in self.page.items():
            for ev, fpath, target, fid in mine["followers"].values():
                if ev == event and fpath:
                    follow.append((self.query(fpath), "follow " + sid,
                                   {"HX-Request": "true", "HX-Target": target,
                                    "HX-Trigger": fid}))
        return follow

    def choose(self, first=False) -> tuple:
        """The student's next request, as the page's htmx makes it: (path with its query,
        kind, headers)."""
        if self.picked or first:
            return self.choose_picked(first)
        headers = {"HX-Request": "true"}
        if self.prompt is None or self.rng.random() < NEW_PROMPT_SHARE:
            self.prompt = self.next_prompt()
            self.state = {}                      # the page drops per-prompt choices
            self.page = {}
            self.section, self.going_to = AT_THE_PROMPT_BOX[0], None
            headers["X-Sections"] = ",".join(AT_THE_PROMPT_BOX)
            return self.query("/"), "new prompt", headers
        sid = self.going_to or self.rng.choice(SECTION_ORDER)
        controls = list(self.page.get(sid, {}).get("controls", {}).values())
        if sid not in self.page:                 # scrolled to: it loads itself first
            self.going_to, self.section = sid, sid
            headers["HX-Trigger"] = sid
            return self.query(f"/section/{sid}"), "section load", headers
        self.going_to, self.section = None, sid
        if not controls:                         # nothing to move there: reloads itself
            headers["HX-Trigger"] = sid
            return self.query(f"/section/{sid}"), "section load", headers
        name, values, target, cid = self.rng.choice(controls)
        self.state[name] = self.rng.choice(values)
        if target:
            headers["HX-Target"] = target
        if cid:
            headers["HX-Trigger"] = cid
        return self.query(f"/section/{sid}"), sid, headers

    def choose_picked(self, first=False) -> tuple:
        """--picked-values: the former class's request (hand-picked values of MOVES)."""
        headers = {"HX-Request": "true"}
        r = self.rng.random()
        if first:
            path, kind, headers = "/", "first page", {}
        elif r < NEW_PROMPT_SHARE:
            self.prompt = self.next_prompt()
            self.state = {}                      # the page drops per-prompt choices
            i = SECTION_ORDER.index(self.section)
            self.loaded = set(SECTION_ORDER[i:i + 2])
            headers["X-Sections"] = ",".join(self.loaded)
            path, kind = "/", "new prompt"
        elif r < NEW_PROMPT_SHARE + NEW_SECTION_SHARE or self.section not in self.loaded:
            self.section = self.rng.choice(SECTION_ORDER)
            self.loaded.add(self.section)
            headers["HX-Trigger"] = self.section
            path, kind = f"/section/{self.section}", "section load"
        else:
            section, name, values = self.rng.choice(
                [m for m in MOVES if m[0] == self.section])
            if self.model and name == "gen_step":
                values = range(0, BIG_GEN_MAX)     # steps of the big model's shorter run
            self.state[name] = self.rng.choice(list(values))
            path, kind = f"/section/{section}", section
        return self.query(path), kind, headers

    def one(self, first=False):
        follow = self.ask(*self.choose(first))
        for request in follow:          # the page's followers ask at once (htmx), one by one
            self.ask(*request)

    def ask(self, path, kind, headers) -> list:
        """One request on the student's connection, recorded; the followers' requests."""
        t0 = time.perf_counter()
        body, answer = b"", {}
        try:
            if self.conn is None:
                self.connect()
            self.conn.request("GET", path, headers={"Accept-Encoding": "identity", **headers})
            response = self.conn.getresponse()
            body = response.read()
            status = response.status
            answer = {"HX-Trigger": response.getheader("HX-Trigger", "")}
            if response.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
        except (OSError, http.client.HTTPException) as e:
            status = type(e).__name__
            if self.conn is not None:
                self.conn.close()
            self.conn = None
        with self.lock:
            self.results.append((kind, status, time.perf_counter() - t0, time.time(),
                                 self.model or "default"))
        return self.seen(path, kind, status, body.decode("utf-8", "replace"), answer)

    def run(self):
        time.sleep(self.rng.uniform(0, 2))
        self.one(first=True)
        while time.time() < self.stop_at:
            started = time.time()
            self.one()
            pause = self.rng.uniform(1.5, 2.5) - (time.time() - started)
            if pause > 0:
                time.sleep(min(pause, max(0.0, self.stop_at - time.time())))
        if self.conn is not None:
            self.conn.close()


def report(results, seconds, start):
    results = [r[:4] for r in results]
    ok = [t for _, s, t, _ in results if s == 200]
    busy = [t for _, s, t, _ in results if s == 503]
    errors = [(k, s) for k, s, _, _ in results if s not in (200, 503)]
    print(f"requests: {len(results)} in {seconds:.0f} s ({len(results) / seconds:.1f}/s)")
    print(f"  200: {len(ok)}   503 busy: {len(busy)}   errors: {len(errors)}")
    if ok:
        print(f"  latency of 200s: p50 {pct(ok, 50) * 1000:.0f} ms, "
              f"p95 {pct(ok, 95) * 1000:.0f} ms, "
              f"max {max(ok) * 1000:.0f} ms, mean {statistics.mean(ok) * 1000:.0f} ms")
    if busy:
        print(f"  latency of 503s: p50 {pct(busy, 50) * 1000:.0f} ms, "
              f"p95 {pct(busy, 95) * 1000:.0f} ms, max {max(busy) * 1000:.0f} ms")
    if busy:
        windows = [0] * (int(seconds // 10) + 1)
        for _, s, _, at in results:
            if s == 503:
                windows[min(len(windows) - 1, int((at - start) // 10))] += 1
        print("  503s per 10 s: " + " ".join(map(str, windows)) + "   by kind: " + ", ".join(
            f"{k} {n}" for k, n in sorted(collections.Counter(
                k for k, s, _, _ in results if s == 503).items())))
    everything = [t for _, _, t, _ in results]
    # p95 of every request's time (answers, refusals, errors) by the 10 s in which it ended: the
    # class's first seconds (every student's first prompt at once) apart from the rest; the
    # last window holds only the requests that end after the class stops asking
    per_window = collections.defaultdict(list)
    for _, _, t, at in results:
        per_window[int((at - start) // 10)].append(t)
    window_p95 = [round(pct(per_window[w], 95) * 1000) for w in sorted(per_window)]
    if everything:
        print(f"  all answers: p50 {pct(everything, 50) * 1000:.0f} ms, "
              f"p95 {pct(everything, 95) * 1000:.0f} ms;  p95 per 10 s (ms): "
              + " ".join(map(str, window_p95)))
    kinds = sorted({k for k, _, _, _ in results})
    print("  per kind: " + ", ".join(
        f"{k} {pct([t for kk, s, t, _ in results if kk == k and s == 200], 95) * 1000:.0f} ms p95"
        for k in kinds if any(kk == k and s == 200 for kk, s, _, _ in results)))
    if errors:
        print("  errors: " + ", ".join(f"{k}: {s}" for k, s in errors[:20]))
    ms = lambda v: round(v * 1000, 1)                                    # noqa: E731
    return {
        "requests": len(results), "seconds": round(seconds, 1), "ok": len(ok),
        "busy": len(busy), "errors": len(errors),
        "busy_share": round(len(busy) / len(results), 4) if results else None,
        "ok_ms": {"p50": ms(pct(ok, 50)), "p95": ms(pct(ok, 95)),
                  "max": ms(max(ok))} if ok else None,
        "busy_ms": {"p95": ms(pct(busy, 95)), "max": ms(max(busy))} if busy else None,
        "all_p95_ms": ms(pct(everything, 95)) if everything else None,
        "all_p95_ms_per_10s": window_p95,
        "per_kind": {k: {"n": sum(1 for kk, _, _, _ in results if kk == k),
                         "busy": sum(1 for kk, s, _, _ in results if kk == k and s == 503),
                         "p95_ms": ms(pct([t for kk, s, t, _ in results
                                           if kk == k and s == 200], 95))}
                     for k in kinds},
        "error_samples": [f"{k}: {s}" for k, s in errors[:20]],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--url", help="a server already running on this machine "
                                  "(default: start app.py on a free port)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, help="app.py's --workers for the server this script "
                                                "starts (default: app.py's own default)")
    ap.add_argument("--fixed-prompts", action="store_true",
                    help="new prompts from a fixed list of six instead of each student's own")
    ap.add_argument("--smollm2", type=int, default=0, metavar="N",
                    help="N of the students read the page on SmolLM2 (model=smollm2)")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    ap.add_argument("--picked-values", action="store_true",
                    help="the former class: hand-picked values (MOVES) of the section on screen")
    args = ap.parse_args(argv)
    if not 1 <= args.students <= 500 or not 1 <= args.seconds <= 600:
        raise SystemExit("load_test.py: --students 1..500 and --seconds 1..600")

    words = None
    if not args.fixed_prompts:
        with open(HELD_OUT, encoding="utf-8") as f:
            words = f.read().split()
    base, server = serve(args.url, args.workers)
    parts = loopback_only(base)
    try:
        # SmolLM2 warms after the server answers, in the processes that serve the class: the
        # class starts once it is ready (when the server offers it), whoever reads it
        waited = wait_until_ready(base, "smollm2", offered_only=not args.smollm2)
        if waited is not None:
            print(f"smollm2 ready after {waited:.0f} s")
        results, lock = [], threading.Lock()
        start = time.time()
        stop_at = start + args.seconds
        students = [Student(n, parts, stop_at, args.seed * 1000 + n, results, lock, words,
                            "smollm2" if n < args.smollm2 else None, args.picked_values)
                    for n in range(args.students)]
        for s in students:
            s.start()
        for s in students:
            s.join(timeout=args.seconds + 60)    # a request times out after 30 s
        print(f"{args.students} students, one interaction every ~2 s each, {args.seconds:.0f} s, "
              f"{'fixed' if args.fixed_prompts else 'their own'} prompts, against {parts.geturl()}")
        summary = report(results, time.time() - start, start)
        if args.smollm2:
            summary["per_model"] = {}
            for m in sorted({r[4] for r in results}):
                print(f"-- students on {m}:")
                summary["per_model"][m] = report([r for r in results if r[4] == m],
                                                 time.time() - start, start)
        if server is not None:
            summary["memory"] = server_memory(server.pid)
            print(f"server memory ({summary['memory']['processes']} processes): "
                  f"Rss {summary['memory']['rss_mb']:.0f} MB, Pss {summary['memory']['pss_mb']:.0f}"
                  f" MB (Pss: pages shared by the workers counted once)")
    finally:
        stop_server(server)
    if not args.no_save:
        name = "load_test" + ("_picked_values" if args.picked_values else "_whole_range") + (
            "_fixed_prompts" if args.fixed_prompts else "") + (
            f"_workers{args.workers}" if args.workers else "") + (
            f"_students{args.students}" if args.students != 60 else "") + (
            f"_smollm2_{args.smollm2}" if args.smollm2 else "")
        summary.update(students=args.students, smollm2_students=args.smollm2,
                       workers=args.workers or "default",
                       prompts="fixed" if args.fixed_prompts else "own",
                       values="picked" if args.picked_values else "whole range",
                       server=args.url or
                       "app.py started by the script")
        print("saved", save_result(name, summary, "load_test.py",
                                   argv if argv is not None else sys.argv[1:]))
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
