"""Figures of the attention section: every head at a glance, one head large (its pattern and its
scores), and the measured behaviour of every head.

Masked cells (a query cannot see later keys) are drawn grey, never as a 0 weight: in the large
views they are gaps (NaN) over a grey layer drawn underneath (not the plot background, which the
dark theme recolours); in the thumbnails of every head, small PNG images whose pixels are the
weights in whole percents (one byte a cell), they are the palette's grey entry THUMB_MASKED.

The large views are plain Plotly JSON (web.figures.figure_json).
"""
import base64
import io

import numpy as np
from PIL import Image

from web.figures import (
    ACCENT,
    FONT,
    SEQUENTIAL,
    SERIES,
    base_layout,
    every_kth,
    figure_json,
    label,
    roles,
    signed_colours,
    text_px,
    typed_array,
)

MASKED = "#c9ccd3"            # grey of masked cells: in neither colour scale
CHOSEN = ACCENT               # outline of the clicked token's row
WEIGHTS = SEQUENTIAL          # weights are in [0, 1]; scores are signed (signed_colours)
# A model with more layers than this has its thumbnails in a box that scrolls (a 30-layer
# model's 270 thumbnails, at a readable size, are thousands of px tall), and its bar charts of
# measures numbered every fifth layer in two tones.
LAYERS_DOWN_MAX = 12


def layers_across(n_layers: int) -> bool:
    return n_layers > LAYERS_DOWN_MAX


def _png(indices, palette) -> bytes:
    """An 8-bit indexed PNG of `indices` [h, w] (uint8) with `palette` [(r, g, b), ...], written
    by Pillow: one pixel a cell, scaled up by the page (CSS image-rendering: pixelated keeps the
    cells sharp)."""
    cells = np.ascontiguousarray(indices, np.uint8)
    image = Image.frombytes("P", (cells.shape[1], cells.shape[0]), cells.tobytes())
    image.putpalette([c for rgb in palette for c in rgb])
    out = io.BytesIO()
    # Pillow's default compression: optimize=True took twice as long (SmolLM2's 270 thumbnails
    # a prompt) for the same bytes on these few-hundred-byte images
    image.save(out, format="PNG")
    return out.getvalue()


def _rgb(hex_colour: str) -> tuple:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def _weight_palette() -> list:
    """Palette entries 0..100: the weight p/100 in WEIGHTS, the scale of the large views;
    entry THUMB_MASKED: the grey of masked cells."""
    stops = np.array([p for p, _ in WEIGHTS])
    rgb = np.array([_rgb(c) for _, c in WEIGHTS], dtype=np.float64)
    at = np.arange(101) / 100
    ramp = np.stack([np.interp(at, stops, rgb[:, k]) for k in range(3)], axis=1)
    return [tuple(int(round(v)) for v in row) for row in ramp] + [_rgb(MASKED)]


THUMB_MASKED = 101            # palette index of a masked cell in a thumbnail
THUMB_PALETTE = _weight_palette()


def thumbnail_percents(pattern):
    """A head's pattern [n, n] (NaN = masked) as palette indices: whole percents 0..100 of the
    weight, THUMB_MASKED where masked."""
    return np.where(np.isnan(pattern), THUMB_MASKED,
                    np.rint(np.nan_to_num(pattern) * 100)).astype(np.uint8)


def head_thumbnails(grid) -> list:
    """Small multiples as images: grid [L, H, n, n] of attention weights (NaN = masked) ->
    for each layer, for each head, a PNG data URI of its pattern (query rows down, key columns
    across, one pixel a cell, whole percents in WEIGHTS, masked cells grey). The page lays them
    out in a grid that wraps to its width (fewer a row on a phone) and marks the chosen head."""
    L, H = grid.shape[:2]
    return [["data:image/png;base64," + base64.b64encode(
        _png(thumbnail_percents(grid[layer, h]), THUMB_PALETTE)).decode("ascii")
        for h in range(H)] for layer in range(L)]


def _token_axis(labels, every):
    idx = list(range(0, len(labels), every))
    return dict(tickmode="array", tickvals=idx, ticktext=[f"{label(labels[i])} ·{i}" for i in idx],
                showgrid=False, zeroline=False)


QUERY_TITLE = "query token (looking)"
MATRIX_TOP, MATRIX_BOTTOM = 48, 80      # px: the title above; the colour bar below
MATRIX_ROWS_MAX = 580                   # px of plot a long prompt's rows share at most


def token_matrix_height(T: int, keys: list) -> tuple:
    """(figure height, plot height) of a [T, T] matrix: 20 px a row up to MATRIX_ROWS_MAX, and
    never shorter than the vertical y-axis title (on a short prompt a plot shorter than it had
    the title run up into the figure's title), plus the room the vertical key labels and the
    x-axis title take below the plot."""
    plot_px = max(min(20 * T, MATRIX_ROWS_MAX), text_px([QUERY_TITLE]) * FONT["size"] / 14 + 16)
    below = text_px(keys) + 8 + 24                 # the key labels, the standoff, the x title
    return int(np.ceil(MATRIX_TOP + MATRIX_BOTTOM + below + plot_px)), plot_px


def token_matrix_figure(matrix, labels, title, row, *, kind) -> str:
    """One head's [T, T] matrix, query tokens down, key tokens across; NaN = masked (grey).

    kind "pattern": weights in [0, 1]; kind "scores": scaled scores, the diverging scale.
    The row of the clicked query token is outlined. Every query token is named (the figure
    grows with T). Across, the key tokens are categories, labelled vertically: Plotly names
    as many as the drawn width has room for, so the labels never overlap on a phone."""
    T = len(labels)
    keys = [f"{label(labels[i])} ·{i}" for i in range(T)]
    height, plot_px = token_matrix_height(T, keys)
    every = every_kth(T, plot_px)
    if kind == "pattern":
        colours = dict(colorscale=WEIGHTS, zmin=0.0, zmax=1.0)
        hover = "query %{y} → key %{x}<br>weight %{z:.4f}<extra></extra>"
    else:
        finite = np.abs(np.asarray(matrix, dtype=np.float64))
        finite = finite[np.isfinite(finite)]
        colours = signed_colours(finite.max() if finite.size else 1.0)
        hover = "query %{y} → key %{x}<br>score %{z:.3f}<extra></extra>"
    under = dict(type="heatmap", z=typed_array(np.ones((T, T), dtype=np.int8)), x=keys,
                 colorscale=[[0, MASKED], [1, MASKED]], showscale=False, hoverinfo="skip")
    trace = dict(type="heatmap", z=typed_array(np.asarray(matrix, dtype=np.float32)), x=keys,
                 hoverongaps=False, hovertemplate=hover,
                 # the colour bar along the bottom edge: beside the plot it would take a third
                 # of a phone's width
                 colorbar=dict(title=dict(text="weight" if kind == "pattern" else "score",
                                          side="top"),
                               orientation="h", thickness=10, yref="container", y=0,
                               yanchor="bottom", ypad=6, nticks=5, tickangle=0), **colours)
    outline = dict(type="rect", x0=-0.5, x1=row + 0.5, y0=row - 0.5, y1=row + 0.5,
                   line=dict(color=CHOSEN, width=3))
    layout = base_layout(
        title=dict(text=title),
        height=height, margin=dict(l=10, r=10, t=MATRIX_TOP, b=MATRIX_BOTTOM), shapes=[outline],
        # automargin with a standoff: the axis title goes below the longest vertical label
        xaxis=dict(title=dict(text="key token (looked at)", standoff=8), type="category",
                   tickangle=-90,
                   automargin=True, showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text=QUERY_TITLE), autorange="reversed",
                   **_token_axis(labels, every)))
    return figure_json([under, trace], layout)


MEASURE_TITLES = {"previous": "previous token", "first": "first token",
                  "same": "same token", "induction": "induction"}


def head_measures_figure(measures: dict) -> str:
    """One bar chart per measure, stacked: a bar per head ([L, H] averages), the heads of a
    layer side by side in the layer's colour, so the strongest heads stand out by height."""
    names = [k for k in ("previous", "first", "same", "induction") if measures.get(k) is not None]
    L, H = measures["previous"].shape
    n, gap = len(names), 0.07
    height = (1 - gap * (n - 1)) / n
    x = [layer * (H + 1) + h for layer in range(L) for h in range(H)]      # a gap between layers
    deep = layers_across(L)     # a deep model: no legend of 30 layers; numbered ticks, two tones
    data, layout = [], dict(height=(60 if deep else 90) + 190 * n,
                            margin=dict(l=10, r=10, t=10 if deep else 30, b=10),
                            annotations=[], showlegend=not deep, barmode="overlay",
                            legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"))
    for i, name in enumerate(names):
        ax = "" if i == 0 else str(i + 1)
        values = np.asarray(measures[name], dtype=np.float64)
        for layer in range(L):
            data.append(dict(
                type="bar", x=x[layer * H:(layer + 1) * H],
                y=np.round(values[layer], 3).tolist(), xaxis="x" + ax, yaxis="y" + ax,
                name=f"layer {layer}", legendgroup=f"layer {layer}", showlegend=i == 0,
                marker=dict(color=SERIES[layer % (2 if deep else len(SERIES))]),
                meta=roles("SERIES"),
                customdata=list(range(H)),
                hovertemplate=f"{MEASURE_TITLES[name]}: layer {layer}, head %{{customdata}}: "
                              "%{y:.3f}<extra></extra>"))
        top = 1 - i * (height + gap)
        layout["yaxis" + ax] = dict(domain=[top - height, top], range=[0, 1.05], dtick=0.5,
                                    anchor="x" + ax, title=dict(text=MEASURE_TITLES[name]))
        # one label per layer, under its group of bars (hover a bar for its head)
        layout["xaxis" + ax] = dict(
            anchor="y" + ax, showgrid=False, zeroline=False, range=[-1, L * (H + 1) - 1],
            tickvals=[layer * (H + 1) + (H - 1) / 2 for layer in range(L)],
            ticktext=[(str(layer) if layer % 5 == 0 or layer == L - 1 else "") if deep
                      else f"layer {layer}" for layer in range(L)], tickangle=0)
        if i == n - 1:
            # two short lines: one line of it ran past both edges of a phone's plot
            layout["xaxis" + ax]["title"] = dict(
                text=f"layer (its heads 0–{H - 1} left to right,<br>layers in two tones)" if deep
                else f"heads 0–{H - 1} of each layer,<br>left to right")
    return figure_json(data, base_layout(**layout))
