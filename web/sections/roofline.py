"""Prefill vs decode on the roofline: published hardware and model configurations through the
roofline formula (pipeline/roofline.py), next to this server's own roof and the live model's
prefill and decode, each measured once per process (web.model_state.measured)."""
from pipeline.published import PUBLISHED, published
from pipeline.roofline import (
    HARDWARE,
    WEIGHT_SCHEMES,
    compute_bound_from,
    decode_work,
    model_costs,
    prefill_work,
    roof_curve,
    roofline,
    weight_scheme,
)
from web.core.params import Param
from web.figures import roofline as figures
from web.model_state.forward import prompt_ids
from web.model_state.measured import cost_table, machine, machine_measurement, stamp
from web.sections import Section

DEFAULT_MODEL = "Llama 3 8B"
BITS = tuple(WEIGHT_SCHEMES)          # 16, 8, 4
LENGTHS = (128, 512, 1024, 2048, 4096, 8192, 32768, 131072)

PARAMS = (
    Param("rf_model", "Model", default=DEFAULT_MODEL, max_chars=60,
          choices=[p.name for p in PUBLISHED]),
    Param("rf_bits", "Bits per weight", kind="int", default=16, choices=BITS),
    Param("rf_len", "Prompt tokens", kind="int", default=1024, min=1, max=131072),
    Param("rf_batch", "Batch size", kind="int", default=16, min=1, max=1024),
)

def warm(lm):
    machine()
    cost_table(lm)


def build(lm, state) -> dict:
    name, bits = state["rf_model"], state["rf_bits"]     # one of their Params' choices
    p = published(name)
    cfg = p.config
    n, batch = state["rf_len"], state["rf_batch"]
    if n > cfg.n_ctx:
        state.reject("rf_len", f"{name} reads at most {cfg.n_ctx:,} tokens (its context "
                     f"window); got {n:,}.")
        n = min(1024, cfg.n_ctx)
    scheme = weight_scheme(bits)
    costs = model_costs(cfg, p.reported_params, 2, 2, scheme)
    phases = dict(prefill=prefill_work(costs, n), decode1=decode_work(costs, n, 1),
                  decodeB=decode_work(costs, n, batch))
    rows = []
    for h in HARDWARE:
        est = {k: roofline(w, h.peak_flops, h.bandwidth) for k, w in phases.items()}
        rows.append(dict(name=h.name, source=h.source, ridge=h.ridge, memory=h.memory,
                         fits=costs.weight_bytes + batch * n * costs.kv_bytes_per_token
                         <= h.memory,
                         compute_from=compute_bound_from(costs, h.peak_flops, h.bandwidth,
                                                         cfg.n_ctx), **est))
    live = live_point(lm, state)
    points = [(f"prefill {n:,} tokens", phases["prefill"].intensity),
              ("decode, 1 sequence", phases["decode1"].intensity),
              (f"decode, {batch} sequences", phases["decodeB"].intensity)]
    roofs = [(h.name, *roof_curve(h.peak_flops, h.bandwidth)) for h in HARDWARE]
    roofs.append(("this server", *roof_curve(live["peak"], live["bandwidth"])))
    return dict(
        model=name, repo=p.repo, nominal=p.nominal, params=p.reported_params,
        bits=bits, n=n, prefill_verdict=prefill_verdict(n, rows),
        scheme=("16-bit floats" if scheme is None else
                f"{scheme.name} ({scheme.describe()}; embeddings and norms at 16 bits)"),
        lengths=LENGTHS, batch=batch, n_ctx=cfg.n_ctx,
        costs=costs, phases=phases, rows=rows, live=live,
        figure=figures.roofline_figure(
            roofs, points,
            [(f"{lm.name} prefill, measured", live["prefill_intensity"], live["prefill_flops"]),
             (f"{lm.name} decode, measured", live["decode_intensity"], live["decode_flops"])]),
    )


def chips(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def prefill_verdict(n, rows) -> str:
    """Which chips the prefill of n tokens is compute-bound on, and from how many tokens each
    would be: the table's own bounds and pipeline.roofline.compute_bound_from."""
    compute = [r["name"] for r in rows if r["prefill"].bound == "compute"]
    memory = [r["name"] for r in rows if r["prefill"].bound == "memory"]
    if not memory:
        head = f"at {n:,} tokens the prefill is compute-bound on every chip listed"
    elif not compute:
        head = f"at {n:,} tokens the prefill is memory-bound on every chip listed"
    else:
        head = (f"at {n:,} tokens the prefill is compute-bound on {chips(compute)} and "
                f"memory-bound on {chips(memory)}")
    later = [f"{r['compute_from']:,} tokens on {r['name']}" for r in rows
             if r["prefill"].bound == "memory" and r["compute_from"] is not None]
    never = [r["name"] for r in rows
             if r["prefill"].bound == "memory" and r["compute_from"] is None]
    tail = ""
    if later:
        tail += f"; it becomes compute-bound from {', '.join(later)}"
    if never:
        tail += f"; on {chips(never)} it stays memory-bound up to the model's context window"
    return head + tail


def live_point(lm, state) -> dict:
    """The live model's prefill and decode on this server: FLOPs and bytes from the same
    formulas (float32: 4 bytes per weight and per cached value), times from the model's cost
    table (web.model_state.measured.cost_table) interpolated to the prompt's length."""
    m, m_at = machine_measurement()
    table = cost_table(lm)
    n_prompt = len(prompt_ids(lm, state["prompt"]))
    prefill, decode = table.prefill_at(n_prompt), table.decode_at(n_prompt)
    ids = range(n_prompt)
    prefill_s, decode_s = prefill.seconds, decode.seconds
    costs = model_costs(lm.model.config, lm.model.n_params(), 4, 4)
    pre, dec = prefill_work(costs, len(ids)), decode_work(costs, len(ids), 1)
    return dict(
        peak=m.peak_flops, bandwidth=m.bandwidth, threads=m.threads,
        ridge=m.peak_flops / m.bandwidth,
        n_prompt=n_prompt, measured_at=stamp(table.measured_at), machine_at=stamp(m_at),
        prefill=prefill, decode=decode, prefill_s=prefill_s, decode_s=decode_s,
        weight_bytes=costs.weight_bytes,
        prefill_intensity=pre.intensity, decode_intensity=dec.intensity,
        prefill_flops=pre.flops / prefill_s, decode_flops=dec.flops / decode_s,
        prefill_tps=len(ids) / prefill_s, decode_tps=1 / decode_s,
        decode_bandwidth=dec.bytes / decode_s,
        prefill_roof=min(m.peak_flops, pre.intensity * m.bandwidth),
        decode_roof=min(m.peak_flops, dec.intensity * m.bandwidth),
    )


SECTION = Section("roofline", "Prefill vs decode: the roofline", PARAMS, build,
                  short="Roofline", warm=warm,
                  gives_away=("kv-bytes",),
                  tour=("Why is reading the prompt fast and writing the answer slow? The prefill "
                        "does many operations per byte of weights it reads; a decode step very "
                        "few. The roofline shows which limit, arithmetic or memory, each phase "
                        "hits on real chips."))
