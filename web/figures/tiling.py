"""Figures of the attention-tiling section: the tile grid on the head's pattern, and the bytes
moved (counted by pipeline.tiling) as the tiles and the sequence grow."""
import numpy as np

from web.figures import (
    ACCENT,
    FONT,
    INK,
    MUTED,
    SEQUENTIAL,
    base_layout,
    figure_json,
    label,
    roles,
    text_px,
    typed_array,
)

SKIP = "#e3e7ee"
KEY_TITLE, QUERY_TITLE = "key position (token)", "query position (token)"
TILES_TOP = 64                          # px: the title and its subtitle


def tiles_height() -> int:
    """The tile figure's height: its square plot at least as tall as the vertical y-axis title
    (a short prompt's plot, 9 px a token, was shorter than it, and that title ran into the x
    axis's and the figure's titles), plus the title above and the tick labels and the x-axis
    title below."""
    plot_px = text_px([QUERY_TITLE]) * FONT["size"] / 14 + 24
    return int(TILES_TOP + 10 + 24 + 28 + plot_px)


def tiles_figure(pattern, tokens, bq, bk, row, done, total) -> str:
    """The head's attention pattern with the tile grid on top: tiles above the diagonal are
    never computed (grey); the followed query row is outlined. The title counts the `done` of
    `total` tiles computed."""
    T = pattern.shape[0]
    names = [f"{i}: {label(t)}" for i, t in enumerate(tokens)]
    z = np.where(np.tril(np.ones((T, T), bool)), np.round(pattern, 4), np.nan)
    heatmap = dict(
        type="heatmap", z=typed_array(z.astype(np.float32)), colorscale=SEQUENTIAL, zmin=0,
        zmax=1, hoverongaps=False,
        customdata=[[[names[i], names[j]] for j in range(T)] for i in range(T)],
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>"
                      "weight %{z:.4f}<extra></extra>",
        colorbar=dict(title=dict(text="weight"), thickness=12))
    shapes = []
    for q0 in range(0, T, bq):
        for k0 in range(0, T, bk):
            skipped = k0 > min(q0 + bq, T) - 1
            shapes.append(dict(type="rect", x0=k0 - 0.5, x1=min(k0 + bk, T) - 0.5,
                               y0=q0 - 0.5, y1=min(q0 + bq, T) - 0.5,
                               line=dict(color=MUTED if skipped else INK, width=1),
                               fillcolor=SKIP if skipped else "rgba(0,0,0,0)",
                               layer="below" if skipped else "above"))
    shapes.append(dict(type="rect", x0=-0.5, x1=row + 0.5, y0=row - 0.5, y1=row + 0.5,
                       line=dict(color=ACCENT, width=3)))
    return figure_json([heatmap], base_layout(
        title=dict(text=f"{bq} queries × {bk} keys a tile<br><sup>{done} of {total} tiles "
                        "computed; grey: skipped</sup>"),
        margin=dict(l=10, r=10, t=TILES_TOP, b=10),
        shapes=shapes, height=max(min(340, 136 + 9 * T), tiles_height()),
        xaxis=dict(title=dict(text=KEY_TITLE), constrain="domain"),
        yaxis=dict(title=dict(text=QUERY_TITLE), autorange="reversed",
                   scaleanchor="x", constrain="domain")))


def traffic_by_tile_figure(T, sizes, tiled_bytes, plain_bytes, current) -> str:
    """Bytes moved for this prompt and head as the square tile grows (tiled_bytes[i] for
    tiles of sizes[i]), vs the plain algorithm's plain_bytes; the reader's tile size marked."""
    data = [
        dict(type="scatter", x=list(sizes), y=list(tiled_bytes), mode="lines+markers",
             name="tiled (FlashAttention)", line=dict(color=ACCENT), meta=roles("HIGHLIGHT"),
             hovertemplate="tiles of %{x} x %{x}: %{y:,} bytes<extra></extra>"),
        dict(type="scatter", x=[sizes[0], sizes[-1]], y=[plain_bytes, plain_bytes],
             mode="lines", name="plain (scores stored)", line=dict(color=MUTED, dash="dash"),
             meta=roles("CONTEXT"),
             hovertemplate="plain: %{y:,} bytes<extra></extra>"),
    ]
    if current in sizes:
        data.append(dict(type="scatter", x=[current], y=[tiled_bytes[list(sizes).index(current)]],
                         mode="markers", name="your tiles", marker=dict(size=13, color=ACCENT),
                         meta=roles("HIGHLIGHT"),
                         hovertemplate="your tiles: %{y:,} bytes<extra></extra>"))
    # the legend sits above the plot (no title there), clear of the axis title below
    return figure_json(data, base_layout(
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(title=dict(text="tile size (query rows = key rows)"), type="log",
                   tickmode="array", tickvals=list(sizes), ticktext=[str(s) for s in sizes]),
        yaxis=dict(title=dict(text=f"bytes moved, {T} tokens (fp32)"), rangemode="tozero"),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0)))


def traffic_by_length_figure(lengths, plain, tiled, n, name, tile) -> str:
    """Formula at real scale: bytes moved by one head's attention vs sequence length."""
    data = [
        dict(type="scatter", x=list(lengths), y=list(plain), mode="lines+markers",
             name="plain: 4Td + 4T² elements", line=dict(color=MUTED, dash="dash"),
             meta=roles("CONTEXT"),
             hovertemplate="T=%{x:,}: %{y:.3s}B<extra>plain</extra>"),
        dict(type="scatter", x=list(lengths), y=list(tiled), mode="lines+markers",
             name=f"tiled, {tile} x {tile} tiles", line=dict(color=ACCENT), meta=roles("HIGHLIGHT"),
             hovertemplate="T=%{x:,}: %{y:.3s}B<extra>tiled</extra>"),
    ]
    mark = dict(type="line", x0=n, x1=n, xref="x", y0=0, y1=1, yref="paper",
                line=dict(color=INK, width=1, dash="dot"))
    return figure_json(data, base_layout(
        title=dict(text="One head, bf16"),
        shapes=[mark],
        xaxis=dict(title=dict(text="sequence length T (tokens)"), type="log",
                   exponentformat="SI"),
        yaxis=dict(title=dict(text="bytes to and from HBM"), type="log",
                   exponentformat="SI"),
        legend=dict(orientation="h", y=-0.3)))
