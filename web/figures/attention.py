"""Figures of the attention section: every head at a glance, one head large (its pattern and its
scores), and the measured behaviour of every head.

Masked cells (a query cannot see later keys) are drawn grey, never as a 0 weight: in the large
views they are gaps (NaN) over a grey layer drawn underneath (not the plot background, which the
dark theme recolours); in the grid, whose weights travel as whole percents in one byte each to
keep the figure small, they are the value MASK, which the colour scale paints grey.

Written as plain Plotly JSON (web.figures.figure_json), 32 heatmap traces and all.
"""
import numpy as np

from web.figures import (ACCENT, FONT, PALETTE, SEQUENTIAL, base_layout, every_kth, figure_json,
                         label, signed_colours, text_px, typed_array)

MASKED = "#c9ccd3"            # grey of masked cells: in neither colour scale
CHOSEN = ACCENT               # outline of the clicked token's row
WEIGHTS = SEQUENTIAL          # weights are in [0, 1]; scores are signed (signed_colours)
GRID_GAP = 2                  # empty cells between two panels of the grid
MASK = -100                   # grid value of a masked cell (its base64 has no "/" to escape)


def _grid_colorscale():
    """WEIGHTS on percents 0..100, and everything below 0 (the MASK) grey: a sharp step at 0."""
    cut = -MASK / (100 - MASK)
    return ([[0.0, MASKED], [cut * 0.999, MASKED]]
            + [[cut + (1 - cut) * p, c] for p, c in WEIGHTS])


# A model with more layers than this has its grid drawn with the layers across (a 30-layer
# model's 30 rows of panels were 1,800 px tall beside the token view).
LAYERS_DOWN_MAX = 12


def layers_across(n_layers: int) -> bool:
    return n_layers > LAYERS_DOWN_MAX


def head_grid_figure(grid) -> str:
    """Small multiples: grid [L, H, n, n] of attention weights (NaN = masked), one panel per
    head: layers down and heads across, or for a deep model (layers_across) layers across and
    heads down. Each panel's `meta` is [layer, head]: the page's script chooses that head when
    it is clicked. It depends on the prompt alone (no outline of the chosen head), so choosing a
    head never redraws its panels."""
    L, H, n, _ = grid.shape
    percent = np.where(np.isnan(grid), MASK, np.rint(np.nan_to_num(grid) * 100)).astype(np.int8)
    step = n + GRID_GAP
    across = layers_across(L)

    def place(layer, h):            # (column, row) of a panel
        return (layer, h) if across else (h, layer)

    data = [dict(type="heatmap", z=typed_array(percent[layer, h]),
                 x0=place(layer, h)[0] * step, dx=1, y0=place(layer, h)[1] * step, dy=1,
                 coloraxis="coloraxis", meta=[layer, h],
                 hovertemplate=f"layer {layer}, head {h} (click to show it large)<extra></extra>")
            for layer in range(L) for h in range(H)]
    n_cols, n_rows = (L, H) if across else (H, L)
    # layers across: every fifth layer numbered (30 numbers collide on a phone; hover names all)
    labelled = [c for c in range(n_cols) if not across or c % 5 == 0 or c == n_cols - 1]
    col_names = [str(c) for c in labelled]
    row_names = [f"head {i}" if across else f"layer {i}" for i in range(n_rows)]
    layout = base_layout(
        height=50 + (30 if across else 40) * n_rows, margin=dict(l=70, r=10, t=36, b=10),
        coloraxis=dict(cmin=MASK, cmax=100, colorscale=_grid_colorscale(), showscale=False),
        xaxis=dict(tickvals=[c * step + (n - 1) / 2 for c in labelled],
                   ticktext=col_names, side="top", showgrid=False,
                   title=dict(text="layer" if across else "head", standoff=4), tickangle=0,
                   zeroline=False, range=[-1, n_cols * step - GRID_GAP]),
        yaxis=dict(tickvals=[r * step + (n - 1) / 2 for r in range(n_rows)],
                   ticktext=row_names, autorange="reversed",
                   showgrid=False, zeroline=False))
    return figure_json(data, layout)


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
        # a small title from the left edge fits a phone's width
        title=dict(text=title, font=dict(size=13), x=0, xanchor="left"),
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
                marker=dict(color=PALETTE[layer % (2 if deep else len(PALETTE))]),
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
