"""Figures of the transformer-block section.

Plain figure dicts (`web.figures.figure_json`): these sections re-render on every prompt change.
"""
import numpy as np

from web.figures import (
    ACCENT,
    INK,
    ROLES,
    SEQUENTIAL,
    base_layout,
    every_kth,
    figure_json,
    label,
    roles,
    signed_colours,
    text_px,
    typed_array,
    wrap_name,
)


def _token_ticks(tokens: list) -> list:
    return [f"{i}: {label(t)}" for i, t in enumerate(tokens)]


def tensor_heatmap(matrix, tokens: list, columns, title: str) -> str:
    """One tensor from the cache: a row per token (columns: its dimensions, or named tokens).
    -inf (masked attention scores) is left blank."""
    z = np.where(np.isfinite(matrix), matrix, np.nan).astype(np.float32)
    rows = list(range(z.shape[0]))
    finite = z[np.isfinite(z)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    diverging = finite.size and finite.min() < 0
    colours = signed_colours(bound) if diverging else dict(colorscale=SEQUENTIAL, zmin=0,
                                                           zmax=bound)
    heatmap = dict(
        # the colour bar lies along the bottom edge: beside a narrow plot it would take a
        # third of the width
        type="heatmap", z=typed_array(z), y=rows, **colours,
        colorbar=dict(orientation="h", thickness=10, yref="container", y=0, yanchor="bottom",
                      ypad=6, nticks=5, tickangle=0),
        hovertemplate="token %{y}, column %{x}: %{z:.4g}<extra></extra>")
    xaxis = dict(title=dict(text="dimension"), nticks=5, tickangle=0)
    if columns is not None:
        # named columns are categories, labelled vertically: Plotly names as many as the
        # drawn width has room for (a name that repeats gets its column number)
        names = [label(c) for c in columns]
        if len(set(names)) < len(names):
            names = [f"{n} ({i})" for i, n in enumerate(names)]
        heatmap["x"] = names
        xaxis = dict(title=dict(text="token (column)", standoff=8), type="category",
                     tickangle=-90)
    return figure_json([heatmap], base_layout(
        # automargin: a title that wraps on a narrow plot pushes the plot down, never covers it
        title=dict(text=label(title), font=dict(size=13), automargin=True, yref="paper", y=1,
                   yanchor="bottom", pad=dict(b=8)),
        xaxis=xaxis,
        yaxis=dict(title=dict(text="token"), tickmode="array", tickvals=rows,
                   ticktext=_token_ticks(tokens), autorange="reversed"),
        margin=dict(l=10, r=10, t=48, b=60), height=max(300, 140 + 17 * len(rows))))


NORMS_TOP, NORMS_BOTTOM = 48, 80        # px: the title above; the colour bar below
NORMS_ROW_PX = 20                       # px a token's row, up to NORMS_ROWS_MAX px in all
NORMS_ROWS_MAX = 720


def norms_layout_px(n_tokens: int, stages: list) -> tuple:
    """(figure height, plot height) of the residual-norm heatmap: the rows, plus below them the
    room its vertical stage labels and the x-axis title take (a 30-block model's "out of block
    29" took 130 px of a 320 px figure, and the five rows left overlapped)."""
    plot_px = min(NORMS_ROW_PX * n_tokens, NORMS_ROWS_MAX)
    below = text_px(stages) + 8 + 24               # the stage labels, the standoff, the x title
    return int(np.ceil(NORMS_TOP + NORMS_BOTTOM + below + max(plot_px, 120))), max(plot_px, 120)


def log_ticks(lo: float, hi: float) -> list:
    """Round values between lo and hi (> 0) for a log scale's labels: powers of ten, or 1-3 or
    1-2-5 steps in each decade when fewer than three powers fall in between (at least two)."""
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    best = []
    for steps in ((1,), (1, 3), (1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        best = [m * 10.0 ** k for k in decades for m in steps if lo <= m * 10.0 ** k <= hi]
        if len(best) >= 3:
            break
    return best if len(best) >= 2 else [lo, hi]


def real_units(v: float) -> str:
    """A tick label in the norm's own units: 0.5, 2, 30, 700, 2k, 20k."""
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def norms_heatmap(norms, tokens: list, stages: list) -> str:
    """Size (Euclidean norm) of the residual stream: a row per token, a column per stage, on a
    log colour scale (log10 of the norm, the colour bar labelled in norms): one token's norm can
    be a thousand times the others' (SmolLM2's first token reaches ~20,000 where the rest stay
    under ~800), and on a linear scale every other row was white. Hovering any cell names its
    token and its norm. A long prompt's rows are labelled every k-th (the labels one per 18 px
    at most)."""
    norms = np.asarray(norms, dtype=np.float64)
    rows = list(range(norms.shape[0]))
    names = _token_ticks(tokens)
    height, plot_px = norms_layout_px(len(rows), stages)
    every = every_kth(len(rows), plot_px)
    positive = norms[norms > 0]
    lo, hi = (float(positive.min()), float(positive.max())) if positive.size else (1.0, 10.0)
    hi = max(hi, lo * 1.01)
    ticks = log_ticks(lo, hi)
    z = np.log10(np.maximum(norms, lo)).astype(np.float32)
    heatmap = dict(
        type="heatmap", z=typed_array(z), x=stages, y=rows,
        colorscale=SEQUENTIAL, zmin=float(np.log10(lo)), zmax=float(np.log10(hi)),
        meta=dict(scale="log10"),         # z is log10 of a norm (> 0), not a signed value
        # the colour bar along the bottom edge (beside the plot it would take a third of a
        # phone's width), the plot's width, untitled: its title sat on the bar, and beside it
        # took the room its labels need on a phone; the figure's title says what it shows
        colorbar=dict(orientation="h", thickness=10, yref="container", y=0, yanchor="bottom",
                      ypad=6, tickangle=0, tickmode="array",
                      tickvals=[float(np.log10(t)) for t in ticks],
                      ticktext=[real_units(t) for t in ticks]),
        customdata=[[[n, round(float(v), 3)] for v in row]
                    for n, row in zip(names, norms, strict=True)],
        hovertemplate="token %{customdata[0]}, %{x}: norm %{customdata[1]:,.3f}"
                      "<extra></extra>")
    return figure_json([heatmap], base_layout(
        # one line, which static/figure-style.js wraps on a phone (a title with a <br> it leaves
        # alone, cut); it names the colour bar's quantity and scale and the norms' real range
        title=dict(text="Residual-stream norm per token and stage (colour: the norm, log "
                        f"scale, {real_units(float(f'{lo:.2g}'))} to {hi:,.0f})",
                   font=dict(size=13), x=0, xanchor="left"),
        # vertical labels: each takes one line's width, so they never overlap on a phone
        xaxis=dict(title=dict(text="stage", standoff=8), tickangle=-90),
        yaxis=dict(title=dict(text="token"), tickmode="array", tickvals=rows[::every],
                   ticktext=names[::every], autorange="reversed"),
        margin=dict(l=10, r=10, t=NORMS_TOP, b=NORMS_BOTTOM), height=height))


LENS_ALL_TICKS = 13      # up to this many read-outs every one is named on the axis


def lens_ticks(n_stages: int) -> tuple:
    """(tickvals, ticktext, tickangle) of the logit lens's axis: x = k is the stream after k
    blocks (0: the embeddings only). Every stage named when they fit, else the embeddings, every
    fifth block (from 5: 0 would touch "emb.") and the last one, written level (they never
    collide on a phone)."""
    x = list(range(n_stages))
    if n_stages <= LENS_ALL_TICKS:
        return x, ["embeddings"] + [f"{k} block{'s' if k != 1 else ''}"
                                    for k in range(1, n_stages)], -90
    # x = k: after k blocks (counted from 1, the last is N of N)
    blocks = [k for k in range(1, n_stages - 1) if k % 5 == 0 and k < n_stages - 4] \
        + [n_stages - 1]
    return [0] + blocks, ["emb."] + [str(k) for k in blocks], 0


def lens_figure(final_p: list, final_text: str, stages: list, final_rank: list = None,
                p_text: list = None) -> str:
    """Probability of the model's final guess, read out after each block (logit lens), and
    (final_rank) its rank among the whole vocabulary there, in a panel below: where the answer
    surfaces before it wins. Hovering a point names the stage whole, with the probability as
    the table writes it (p_text: a tiny one in scientific notation, not "0.00%")."""
    x = list(range(len(stages)))
    tickvals, ticktext, angle = lens_ticks(len(stages))
    texts = p_text or [f"{100 * float(p):.2f}%" for p in final_p]
    line = dict(type="scatter", x=x, y=[float(p) for p in final_p], mode="lines+markers",
                line=dict(color=ACCENT), marker=dict(size=9 if len(x) <= LENS_ALL_TICKS else 6),
                meta=roles("HIGHLIGHT"),
                customdata=[[s, t] for s, t in zip(stages, texts, strict=True)], name="probability",
                hovertemplate="%{customdata[0]}: %{customdata[1]}<extra></extra>")
    traces = [line]
    xaxis = dict(tickmode="array", tickvals=tickvals, ticktext=ticktext, tickangle=angle,
                 range=[-0.6, len(x) - 0.4])
    after = "read out after" if len(x) <= LENS_ALL_TICKS else "read out after this many blocks"
    layout = dict(
        title=dict(text=f"“{label(final_text)}” after each block", font=dict(size=13), x=0,
                   xanchor="left"),
        yaxis=dict(title=dict(text="probability"), range=[0, 1.02], tickformat=".0%"))
    if final_rank is None:
        layout["xaxis"] = dict(xaxis, title=dict(text=after, standoff=8))
        return figure_json(traces, base_layout(**layout))
    traces.append(dict(
        type="scatter", x=x, y=[int(r) for r in final_rank], mode="lines+markers",
        line=dict(color=INK), marker=dict(size=9 if len(x) <= LENS_ALL_TICKS else 6),
        meta=roles("INK"),
        customdata=stages, name="rank", xaxis="x2", yaxis="y2",
        hovertemplate="%{customdata}: rank %{y:,}<extra></extra>"))
    top = max(1, int(max(final_rank)))
    layout.update(
        showlegend=False, height=460,
        xaxis=dict(xaxis, showticklabels=False, matches="x2", anchor="y"),
        yaxis=dict(layout["yaxis"], domain=[0.5, 1]),
        xaxis2=dict(xaxis, title=dict(text=after, standoff=8), anchor="y2"),
        # rank 1 at the top, a log scale: from tens of thousands down to first place
        yaxis2=dict(title=dict(text="rank"), type="log", domain=[0, 0.4], anchor="x2",
                    range=[np.log10(top * 1.5), -0.1]))
    return figure_json(traces, base_layout(**layout))


# each part of the model in its role's colour (not the orange of a highlight)
SHARES = (("embedding", "embeddings", "EMBEDDING"),     # with positions and an untied unembedding
          ("attention", "attention (q, k, v, o)", "ATTENTION"),
          ("ffn", "feed-forward", "FEED_FORWARD"),
          ("norms", "norms", "NORMS"))


def shares_figure(rows: list) -> str:
    """Where the parameters go: each model's total split into components, as percentages.
    Long names are written on several lines, the rows far enough apart for them."""
    wrapped = [wrap_name(r["name"]) for r in rows]
    names = ["<br>".join(label(line) for line in lines) for lines in wrapped]
    lines = max(len(w) for w in wrapped)
    row_px = max(30, 9 * (lines + 1) + 4)        # a row of n lines beside rows of one line
    traces = []
    for key, name, role in SHARES:
        pct = [100 * r[key] / r["total"] for r in rows]
        traces.append(dict(
            type="bar", y=names, x=pct, name=name, orientation="h", marker=dict(color=ROLES[role]),
            meta=roles(role),
            customdata=[[r[key], label(r["name"])] for r in rows],
            hovertemplate="%{customdata[1]}: %{x:.1f}% (%{customdata[0]:,} parameters)<extra>"
            + name + "</extra>"))
    return figure_json(traces, base_layout(
        title=dict(text="Where the parameters go"),
        barmode="stack", legend=dict(orientation="h", y=-0.15),
        xaxis=dict(title=dict(text="% of parameters"), range=[0, 100]),
        yaxis=dict(title=dict(text="model"), autorange="reversed", type="category"),
        height=200 + row_px * len(rows)))
