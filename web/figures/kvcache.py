"""Figures of the KV-cache section: measured step times and cache bytes of the running model,
and the KV-cache formula on published configs."""
from web.figures import ACCENT, MUTED, base_layout, figure_json, label, roles, series

GIB = 2 ** 30


def human_bytes(n: float) -> str:
    """Binary units (KiB = 1024 bytes, MiB, GiB), three significant figures."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def step_time_figure(steps) -> str:
    """Measured ms per step vs sequence length: full recompute grows, the cached step stays flat."""
    xs = [s.n_tokens for s in steps]
    data = [
        dict(type="scatter", x=xs, y=[s.uncached_ms for s in steps], mode="lines+markers",
             name="without cache", line=dict(color=MUTED), meta=roles("CONTEXT"),
             hovertemplate="%{x} tokens: %{y:.2f} ms<extra>without cache</extra>"),
        dict(type="scatter", x=xs, y=[s.cached_ms for s in steps], mode="lines+markers",
             name="with cache", line=dict(color=ACCENT), meta=roles("HIGHLIGHT"),
             hovertemplate="%{x} tokens: %{y:.2f} ms<extra>with cache</extra>"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="Measured time per step", y=0.98, yanchor="top"),
        xaxis=dict(title=dict(text="tokens in the sequence")),
        yaxis=dict(title=dict(text="time (ms)"), rangemode="tozero"), height=330,
        # the legend between the title and the plot: inside it, on a phone, it covered the top
        # of the lines (the recomputed one rises to the top left when its first steps are slow)
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        margin=dict(l=10, r=10, t=80, b=10)))


def cache_bytes_figure(steps) -> str:
    """KVCache.nbytes (the tokens held) and allocated_nbytes (the buffers) after every step."""
    xs = [s.n_tokens for s in steps]
    data = [
        dict(type="scatter", x=xs, y=[s.allocated_nbytes for s in steps], mode="lines",
             line=dict(color=MUTED, shape="hv"), name="allocated", meta=roles("CONTEXT"),
             customdata=[s.capacity for s in steps],
             hovertemplate="%{x} tokens: %{y:,} bytes allocated (room for %{customdata} "
                           "tokens)<extra></extra>"),
        dict(type="scatter", x=xs, y=[s.nbytes for s in steps], mode="lines+markers",
             line=dict(color=ACCENT), name="used (nbytes)", meta=roles("HIGHLIGHT"),
             hovertemplate="%{x} tokens: %{y:,} bytes<extra>nbytes</extra>"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="Cache bytes after each step", y=0.98, yanchor="top"),
        # outside ticks push the x labels below the y axis's "0", which hangs under the axis
        xaxis=dict(title=dict(text="tokens in the cache"), ticks="outside", ticklen=7,
                   tickcolor="white"),
        yaxis=dict(title=dict(text="bytes"), rangemode="tozero", tickformat=","), height=330,
        # the legend between the title and the plot: below it, on a phone, it met the x title
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        margin=dict(l=10, r=10, t=80, b=10)))


def context_figure(curves, ctx: int) -> str:
    """fp16 KV-cache bytes vs context length for published configs, both axes logarithmic."""
    # Two models can need almost the same bytes per token (Llama 2 7B and Llama 3.1 405B): on
    # log axes their lines coincide, so each line has its own dash and marker as well as colour.
    dashes = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
    symbols = ("circle", "square", "diamond", "triangle-up", "x", "star")
    data = [dict(type="scatter", x=list(xs), y=list(ys), mode="lines+markers", name=label(name),
                 meta=roles("SERIES"),
                 line=dict(color=series(i), dash=dashes[i % len(dashes)],
                           width=2.5),
                 marker=dict(symbol=symbols[i % len(symbols)], size=9, maxdisplayed=9),
                 hovertemplate="%{x:,} tokens: %{y:.3s}B<extra>" + label(name) + "</extra>")
            for i, (name, xs, ys) in enumerate(curves)]
    mark = dict(type="line", x0=ctx, x1=ctx, xref="x", y0=0, y1=1, yref="paper",
                line=dict(color=ACCENT, dash="dot"))
    return figure_json(data, base_layout(
        title=dict(text="fp16 KV cache of one sequence"), shapes=[mark],
        xaxis=dict(title=dict(text="context length (tokens, log scale)"), type="log"),
        yaxis=dict(title=dict(text="bytes (log scale)"), type="log", exponentformat="SI"),
        height=480, legend=dict(orientation="h", y=-0.25, yanchor="top")))


def kinds_figure(rows, ctx: int) -> str:
    """Multi-head vs grouped-query vs multi-query: fp16 and int8 bytes at ctx tokens."""
    # each name on short lines, written level: at a phone's width a two-line name was turned
    # on its side and cut at the figure's foot; a kind of more than 11 letters (grouped-query,
    # ~95 px) is broken at its hyphen, a phone giving each model ~90 px
    def short(kind):
        return kind.replace("-", "-<br>", 1) if len(kind) > 11 else kind
    names = [f"{label(r['name'])}<br>{short(r['kind'])}<br>({r['n_kv_heads']} kv heads)"
             for r in rows]
    data = [dict(type="bar", x=names, y=[r[kind] / GIB for r in rows], name=kind,
                 marker=dict(color=colour), meta=roles(role),
                 # the number over its unit: two bars side by side on a phone are ~37 px
                 # wide, and "64 MiB" on one line ran into its neighbour's "32 MiB"
                 text=[human_bytes(r[kind]).replace(" ", "<br>") for r in rows],
                 textposition="auto", textfont=dict(size=14), textangle=0,
                 constraintext="none",
                 customdata=[r[kind] for r in rows],
                 hovertemplate="%{x}: %{customdata:,} bytes<extra>" + kind + "</extra>")
            # fp16 the baseline, int8 the technique shown at work
            for kind, colour, role in (("fp16", MUTED, "CONTEXT"), ("int8", ACCENT, "HIGHLIGHT"))]
    return figure_json(data, base_layout(
        title=dict(text=f"KV cache of one {ctx:,}-token sequence"), barmode="group",
        yaxis=dict(title=dict(text="GiB (1024³ bytes)"), rangemode="tozero"),
        xaxis=dict(tickangle=0),
        legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom"),
        margin=dict(l=10, r=10, t=80, b=60), height=460))
