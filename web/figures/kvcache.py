"""Figures of the KV-cache section: measured step times and cache bytes of the running model,
and the KV-cache formula on published configs."""
import plotly.graph_objects as go

from web.figures import base_layout, label, to_json

ACCENT, MUTED, DARK = "#b4451f", "#7a8ba6", "#2b3a55"
GIB = 2 ** 30
PALETTE = ("#2b3a55", "#b4451f", "#3c8d5a", "#8a5fb5", "#c08a1e", "#4d8fbf")


def human_bytes(n: float) -> str:
    """Binary units (KiB = 1024 bytes, MiB, GiB), three significant figures."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def step_time_figure(steps) -> str:
    """Measured ms per step vs sequence length: full recompute grows, the cached step stays flat."""
    xs = [s.n_tokens for s in steps]
    fig = go.Figure([
        go.Scatter(x=xs, y=[s.uncached_ms for s in steps], mode="lines+markers",
                   name="without cache (full forward)", line=dict(color=MUTED),
                   hovertemplate="%{x} tokens: %{y:.2f} ms<extra>without cache</extra>"),
        go.Scatter(x=xs, y=[s.cached_ms for s in steps], mode="lines+markers",
                   name="with cache", line=dict(color=ACCENT),
                   hovertemplate="%{x} tokens: %{y:.2f} ms<extra>with cache</extra>"),
    ])
    fig.update_layout(**base_layout(
        title=dict(text="Measured time per step"),
        xaxis=dict(title=dict(text="tokens in the sequence")),
        yaxis=dict(title=dict(text="milliseconds"), rangemode="tozero"),
        legend=dict(orientation="h", y=-0.25)))
    return to_json(fig)


def cache_bytes_figure(steps) -> str:
    """KVCache.nbytes (the tokens held) and allocated_nbytes (the buffers) after every step."""
    xs = [s.n_tokens for s in steps]
    fig = go.Figure([
        go.Scatter(x=xs, y=[s.allocated_nbytes for s in steps], mode="lines",
                   line=dict(color=MUTED, shape="hv"), name="allocated (buffers)",
                   customdata=[s.capacity for s in steps],
                   hovertemplate="%{x} tokens: %{y:,} bytes allocated (room for %{customdata} "
                                 "tokens)<extra></extra>"),
        go.Scatter(x=xs, y=[s.nbytes for s in steps], mode="lines+markers",
                   line=dict(color=ACCENT), name="used (nbytes)",
                   hovertemplate="%{x} tokens: %{y:,} bytes<extra>nbytes</extra>"),
    ])
    fig.update_layout(**base_layout(
        title=dict(text="Cache bytes after each step"),
        xaxis=dict(title=dict(text="tokens in the cache")),
        yaxis=dict(title=dict(text="bytes"), rangemode="tozero", tickformat=","),
        legend=dict(orientation="h", y=-0.25)))
    return to_json(fig)


def context_figure(curves, ctx: int) -> str:
    """fp16 KV-cache bytes vs context length for published configs, both axes logarithmic."""
    fig = go.Figure([
        go.Scatter(x=xs, y=ys, mode="lines", name=label(name),
                   line=dict(color=PALETTE[i % len(PALETTE)]),
                   hovertemplate="%{x:,} tokens: %{y:.3s}B<extra>" + label(name) + "</extra>")
        for i, (name, xs, ys) in enumerate(curves)])
    fig.add_vline(x=ctx, line=dict(color=ACCENT, dash="dot"))
    fig.update_layout(**base_layout(
        title=dict(text="fp16 KV cache of one sequence vs context length"),
        xaxis=dict(title=dict(text="context length (tokens, log scale)"), type="log"),
        yaxis=dict(title=dict(text="bytes (log scale; k, M, G = thousand, million, billion)"),
                   type="log", exponentformat="SI"),
        height=420, legend=dict(orientation="h", y=-0.3)))
    return to_json(fig)


def kinds_figure(rows, ctx: int) -> str:
    """Multi-head vs grouped-query vs multi-query: fp16 and int8 bytes at ctx tokens."""
    names = [f"{label(r['name'])}<br>{r['kind']} ({r['n_kv_heads']} kv heads)" for r in rows]
    fig = go.Figure([
        go.Bar(x=names, y=[r[kind] / GIB for r in rows], name=kind, marker_color=colour,
               text=[human_bytes(r[kind]) for r in rows], textposition="auto",
               customdata=[r[kind] for r in rows],
               hovertemplate="%{x}: %{customdata:,} bytes<extra>" + kind + "</extra>")
        for kind, colour in (("fp16", DARK), ("int8", ACCENT))
    ])
    fig.update_layout(**base_layout(
        title=dict(text=f"KV cache of one {ctx:,}-token sequence"), barmode="group",
        yaxis=dict(title=dict(text="GiB (1024³ bytes)"), rangemode="tozero"),
        legend=dict(orientation="h", y=-0.25), height=380))
    return to_json(fig)
