"""Figures of the positions section."""
import numpy as np

from web.figures import (
    ACCENT,
    DIVERGING,
    INK,
    MUTED,
    base_layout,
    figure_json,
    label,
    roles,
    signed_colours,
    typed_array,
)

# a cyclic scale (an angle of 180 degrees meets -180), as plotly.js has no named cyclic scale:
# plotly.colors.cyclical.Twilight
TWILIGHT_COLOURS = ("#e2d9e2", "#9ebbc9", "#6785be", "#5e43a5", "#421257", "#471340",
                    "#8e2c50", "#ba6657", "#ceac94", "#e2d9e2")
TWILIGHT = [[i / (len(TWILIGHT_COLOURS) - 1), c] for i, c in enumerate(TWILIGHT_COLOURS)]


# A heatmap's colour bar along the bottom edge: beside the plot it took a third of a phone's
# width (the angle heatmap's plot was 35 px wide at 390 px). COLORBAR_BOTTOM: px kept for it.
COLORBAR_BOTTOM = 56


def _colorbar_below(**kw) -> dict:
    """A horizontal colour bar at the figure's bottom edge, untitled (the figure's title names
    the values; on a short figure a bar's title ran over the bar): a unit goes in kw's
    ticksuffix."""
    return dict(orientation="h", thickness=10, yref="container", y=0, yanchor="bottom", ypad=6,
                nticks=7, tickangle=0, **kw)


TOKEN_TICK_CHARS = 8     # a token's text in a row label at most this long (hover names it all)


def _row_label(i: int, token: str) -> str:
    short = token if len(token) <= TOKEN_TICK_CHARS else token[:TOKEN_TICK_CHARS - 1] + "…"
    return f"{i}: {label(short)}"


def rope_wavelengths(inv_freq, n_ctx: int) -> str:
    """Positions per full turn of each RoPE pair (2 pi / frequency), log scale."""
    wavelengths = 2 * np.pi / np.asarray(inv_freq, dtype=np.float64)
    data = [
        dict(type="bar", x=list(range(len(wavelengths))), y=wavelengths.tolist(),
             marker=dict(color=MUTED), name="positions per turn", showlegend=False,
             meta=roles("CONTEXT"),
             hovertemplate="pair %{x}: one turn every %{y:,.1f} positions<extra></extra>"),
        dict(type="scatter", x=[-0.5, len(wavelengths) - 0.5], y=[n_ctx, n_ctx], mode="lines",
             line=dict(color=ACCENT, dash="dash"), name=f"context window ({n_ctx})",
             meta=roles("HIGHLIGHT"),
             hoverinfo="skip"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="How fast each pair turns"),
        xaxis=dict(title=dict(text="dimension pair j")),
        yaxis=dict(title=dict(text="positions per full turn"), type="log"),
        # the legend names only the line (the bars are the y axis' title), so that it is one
        # short row above the short bars on the left, even on a phone
        showlegend=True,
        legend=dict(x=0.01, y=0.99, bgcolor="rgba(255,255,255,0.85)"), height=280))


def position_table(table) -> str:
    """A learned position table: one row per position, one column per dimension."""
    t = np.asarray(table, dtype=np.float32)
    limit = float(np.abs(t).max()) or 1.0
    heatmap = dict(
        type="heatmap", z=typed_array(np.round(t, 4)), **signed_colours(limit),
        hovertemplate="position %{y}, dimension %{x}: %{z:.4f}<extra></extra>",
        colorbar=_colorbar_below())
    return figure_json([heatmap], base_layout(
        title=dict(text=f"Learned position table ({t.shape[0]} x {t.shape[1]})"),
        margin=dict(l=10, r=10, t=48, b=COLORBAR_BOTTOM),
        xaxis=dict(title=dict(text="dimension", standoff=4)),
        yaxis=dict(title=dict(text="position (token)"), autorange="reversed"), height=420))


def position_similarity(similarity) -> str:
    """Cosine similarity between the learned vectors of every two positions."""
    heatmap = dict(
        type="heatmap", z=typed_array(np.round(similarity, 4).astype(np.float32)),
        **signed_colours(1.0),
        hovertemplate="positions %{y} and %{x}: cosine %{z:.3f}<extra></extra>",
        colorbar=_colorbar_below())
    return figure_json([heatmap], base_layout(
        title=dict(text="Cosine similarity between positions"),
        margin=dict(l=10, r=10, t=48, b=COLORBAR_BOTTOM),
        xaxis=dict(title=dict(text="position (token)", standoff=4)),
        yaxis=dict(title=dict(text="position (token)"), autorange="reversed", scaleanchor="x"),
        height=420))


def sinusoid_heatmap(pe, base: int) -> str:
    """Sinusoidal encodings, one row per position: the sine dimensions (0, 2, 4, ...) above and
    the cosine dimensions (1, 3, 5, ...) below, each by its frequency index i, so each shows
    its waves slowing from left to right instead of interleaving. Stacked, each the figure's
    whole width (side by side, each had under 100 px of a phone's width)."""
    pe = np.round(np.asarray(pe), 3).astype(np.float32)
    halves = [(pe[:, 0::2], "sin", "x", "y"), (pe[:, 1::2], "cos", "x2", "y2")]
    data = [dict(type="heatmap", z=typed_array(np.ascontiguousarray(z)), xaxis=xa, yaxis=ya,
                 coloraxis="coloraxis",
                 hovertemplate=f"position %{{y}}, {name} of frequency i = %{{x}} "
                               "(dimension " + ("2i" if name == "sin" else "2i+1")
                               + "): %{z:.3f}<extra></extra>")
            for z, name, xa, ya in halves]
    return figure_json(data, base_layout(
        title=dict(text=f"Sine waves, base {base:,}"),
        coloraxis=dict(colorscale=DIVERGING, cmid=0, cmin=-1, cmax=1,
                       colorbar=_colorbar_below()),
        margin=dict(l=10, r=10, t=48, b=COLORBAR_BOTTOM),
        xaxis=dict(title=dict(text="sin: frequency i", standoff=4), anchor="y"),
        xaxis2=dict(title=dict(text="cos: frequency i", standoff=4), anchor="y2", matches="x"),
        yaxis=dict(title=dict(text="position"), autorange="reversed", domain=[0.56, 1]),
        yaxis2=dict(title=dict(text="position"), autorange="reversed", anchor="x2",
                    matches="y", domain=[0, 0.44]),
        height=620))


def rope_angles_heatmap(angles, labels: list, q_at: int) -> str:
    """The angle RoPE turns each pair by at each position of the prompt, in degrees. A plain
    figure dict: redrawn for every prompt and choice. The colour bar is under the plot and the
    row labels short (a long token cut, hover names it), so that the plot keeps most of a
    phone's width."""
    deg = np.degrees(np.asarray(angles, dtype=np.float64)).astype(np.float32)
    heatmap = dict(
        type="heatmap", z=typed_array(deg), zmin=-180, zmax=180, colorscale=TWILIGHT,
        customdata=[[label(t)] * deg.shape[1] for t in labels],
        hovertemplate="position %{y} (%{customdata}), pair %{x}: turned %{z:.1f}°<extra></extra>",
        colorbar=_colorbar_below(ticksuffix="°"))
    outline = dict(type="rect", x0=-0.5, x1=deg.shape[1] - 0.5, y0=q_at - 0.5, y1=q_at + 0.5,
                   line=dict(color=INK, width=2))
    return figure_json([heatmap], base_layout(
        title=dict(text="Angle of each pair, ±180°"),
        margin=dict(l=10, r=10, t=48, b=COLORBAR_BOTTOM),
        xaxis=dict(title=dict(text="dimension pair j", standoff=4)),
        yaxis=dict(title=dict(text="prompt token"), tickmode="array",
                   tickvals=list(range(len(labels))),
                   ticktext=[_row_label(i, t) for i, t in enumerate(labels)],
                   autorange="reversed"),
        shapes=[outline], height=170 + 20 * len(labels)))


def score_axis_title(rule: dict) -> str:
    """The score as the running model makes it from q.k (pipeline.attention_analysis.score_rule):
    over the root of the head width, or of Gemma's query_pre_attn_scalar, then Gemma 2's
    soft-cap. "score q·k / √16 (16: the head width)"."""
    root = f"{rule['under_root']:g}"
    score = f"q·k / √{root}"
    if rule["softcap"]:
        cap = f"{rule['softcap']:g}"
        score = f"{cap}·tanh({score} / {cap})"
    why = ("query_pre_attn_scalar" if rule["gemma"]
           else "the head width" if rule["under_root"] == rule["head_dim"] else "the scale")
    return f"score {score} ({root}: {why})"


def score_by_distance(offsets, curve, offset: int, rule: dict) -> str:
    """The q.k score with q placed `distance` positions after k, at each of `offsets` (sorted;
    the prompt's `offset` among them); `rule` (score_rule) names the scale on the y-axis."""
    offsets = np.asarray(offsets, dtype=np.int32)
    curve = np.asarray(curve, dtype=np.float32)
    line = dict(type="scatter", x=typed_array(offsets),
                y=typed_array(curve), mode="lines", line=dict(color=MUTED), name="score",
                meta=roles("CONTEXT"),
                hovertemplate="distance %{x}: score %{y:.4f}<extra></extra>")
    at = int(np.searchsorted(offsets, offset))
    here = dict(type="scatter", x=[offset], y=[float(curve[at])], mode="markers",
                marker=dict(size=12, color=ACCENT), name="in the prompt", meta=roles("HIGHLIGHT"),
                hovertemplate="distance %{x} (the prompt's): %{y:.4f}<extra></extra>")
    return figure_json([line, here], base_layout(
        title=dict(text="q·k by distance"),
        xaxis=dict(title=dict(text="distance m − n"),
                   automargin=True),
        yaxis=dict(title=dict(text=score_axis_title(rule)), automargin=True),
        showlegend=False))


def word_order_figure(rows: list) -> str:
    """Max difference of the residual at the compared positions, per layer, log scale. x = k:
    the stream after k blocks (0: the embeddings), labelled as the logit lens's axis."""
    from web.figures.block import lens_ticks
    names = [r["layer"] for r in rows]
    x = list(range(len(rows)))
    tickvals, ticktext, angle = lens_ticks(len(rows))
    tiny = 1e-9          # a log axis cannot show 0: exact zeros are drawn at this floor

    def ys(key):
        return [max(r[key], tiny) for r in rows]

    data = [
        dict(type="scatter", x=x, y=ys("with_pos"), mode="lines+markers",
             name="with positions", line=dict(color=ACCENT), meta=roles("HIGHLIGHT"),
             customdata=[[n, r["with_pos"]] for n, r in zip(names, rows, strict=True)],
             hovertemplate="%{customdata[0]}: %{customdata[1]:.3g}<extra>with positions</extra>"),
        dict(type="scatter", x=x, y=ys("without"), mode="lines+markers",
             name="without positions", line=dict(color=MUTED, dash="dot"), meta=roles("CONTEXT"),
             customdata=[[n, r["without"]] for n, r in zip(names, rows, strict=True)],
             hovertemplate="%{customdata[0]}: %{customdata[1]:.3g}"
                           "<extra>without positions</extra>"),
    ]
    # at most about 5 labelled powers of ten: superscript labels need room
    values = [y for key in ("with_pos", "without") for y in ys(key)]
    decades = np.log10(max(values)) - np.log10(min(values))
    return figure_json(data, base_layout(
        # the title at the very top and the legend under it, above the plot (below the plot it
        # met the slanted layer names on a phone, where it takes two rows)
        title=dict(text="How the orders differ", yref="container", y=1, yanchor="top",
                   pad=dict(t=8)),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        margin=dict(l=10, r=10, t=90, b=10), height=400,
        xaxis=dict(title=dict(text="residual stream after this many blocks"), tickmode="array",
                   tickvals=tickvals, ticktext=ticktext, tickangle=angle),
        yaxis=dict(title=dict(text="max |difference| (residual units)"), type="log",
                   exponentformat="power", dtick=max(1, int(np.ceil(decades / 5))))))
