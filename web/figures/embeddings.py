"""Figures of the embeddings section."""
import json

import numpy as np

from web.figures import (ACCENT, PALETTE, base_layout, figure_json, label, labels_apart,
                         signed_colours, typed_array)

MUTED = "#9aa7bd"             # lighter than the palette's: 50,000 dots under the prompt's
# the vocabulary map's plot area in px (across, up) on a phone, its narrowest: the prompt's
# labels are chosen so that they do not collide there, so not on a wider screen either
MAP_PLOT_PX = (280.0, 380.0)


def _token_axis(labels: list) -> dict:
    """A categorical axis by position: two equal tokens must not fold into one row."""
    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[f"{i}: {label(t)}" for i, t in enumerate(labels)],
                autorange="reversed", automargin=True)


def token_vectors_heatmap(vectors, labels: list) -> str:
    """One row per prompt token: its embedding vector, one column per dimension. A plain figure
    dict (redrawn for every prompt)."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    limit = float(np.abs(v).max()) or 1.0
    heatmap = dict(
        type="heatmap", z=typed_array(v), **signed_colours(limit),
        hovertemplate="token %{y}, dimension %{x}: %{z:.4f}<extra></extra>",
        colorbar=dict(thickness=12))
    return figure_json([heatmap], base_layout(
        title=dict(text=f"{v.shape[0]} tokens × {v.shape[1]} numbers"),
        xaxis=dict(title=dict(text="dimension"), showgrid=False, automargin=True),
        yaxis=dict(title=dict(text="prompt token"), **_token_axis(labels)),
        height=110 + 22 * v.shape[0]))


def cosine_matrix_heatmap(sims, labels: list) -> str:
    """The prompt's tokens against each other: the cosine similarity of their embedding rows
    (1 on the diagonal and wherever a token repeats)."""
    s = np.ascontiguousarray(sims, dtype=np.float32)
    n = s.shape[0]
    heatmap = dict(
        type="heatmap", z=typed_array(s), **signed_colours(1.0),
        hovertemplate="%{y} and %{x}: %{z:.3f}<extra></extra>",
        colorbar=dict(thickness=12, title=dict(text="cosine")))
    return figure_json([heatmap], base_layout(
        title=dict(text="Cosine similarity of the tokens"),
        # across: the token's place only (its text is on the row of the same number); plotly
        # chooses how many places to write, so they never collide on a narrow screen
        xaxis=dict(title=dict(text="token (its place in the prompt)"), showgrid=False,
                   tickangle=0, tickformat="d"),
        yaxis=dict(_token_axis(labels), showgrid=False),
        margin=dict(l=10, r=10, t=40, b=10), height=min(600, 90 + 15 * n)))


# Up to this many tokens the map draws one dot per token (the Austen model's 4,096); a bigger
# vocabulary (SmolLM2's 49,152) is drawn as a density: an SVG scatter of 49k points takes
# seconds to draw and ships megabytes, and its dots cover each other anyway.
MAX_DOTS = 10_000
DENSITY_BINS = (90, 60)       # cells across and up of the density map
DENSITY_EXAMPLES = 3          # tokens named in a cell's hover text


def density_grid(coords, bins=DENSITY_BINS):
    """Counts of the rows of `coords` [V, 2] in a grid of `bins` cells over their extent:
    (counts [up, across] int, x centres, y centres, cell of each row (row, column) [V, 2])."""
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    size = (hi - lo) / np.asarray(bins)
    cell = np.minimum(((coords - lo) / size).astype(np.int64), np.asarray(bins) - 1)  # [V, 2]
    counts = np.zeros((bins[1], bins[0]), dtype=np.int64)
    np.add.at(counts, (cell[:, 1], cell[:, 0]), 1)
    xs = lo[0] + size[0] * (np.arange(bins[0]) + 0.5)
    ys = lo[1] + size[1] * (np.arange(bins[1]) + 0.5)
    return counts, xs, ys, cell[:, ::-1]


def _density_trace(coords, labels, ids) -> dict:
    """The rows `ids` as a heatmap of how many tokens fall in each cell (log colour scale), the
    first few tokens of a cell (lowest ids: BPE's earliest, most common pieces) in its hover."""
    counts, xs, ys, cell = density_grid(coords[ids])
    examples = {}
    for n in np.lexsort((ids, cell[:, 1], cell[:, 0])):       # by cell, then id
        names = examples.setdefault(tuple(cell[n]), [])
        if len(names) < DENSITY_EXAMPLES:
            names.append(label(labels[ids[n]]))
    text = [["" if not counts[r, c] else
             f"{counts[r, c]:,} token{'s' if counts[r, c] > 1 else ''}: "
             + ", ".join(f"“{t}”" for t in examples[(r, c)])
             + (", …" if counts[r, c] > DENSITY_EXAMPLES else "")
             for c in range(counts.shape[1])] for r in range(counts.shape[0])]
    z = np.where(counts > 0, np.log10(np.maximum(counts, 1)), np.nan).astype(np.float32)
    top = int(np.ceil(np.log10(max(int(counts.max()), 10))))
    return dict(
        type="heatmap", x=typed_array(xs.astype(np.float32)),
        y=typed_array(ys.astype(np.float32)), z=typed_array(z), text=text,
        colorscale=[[0.0, "#dfe4ec"], [0.5, "#8593ab"], [1.0, "#2b3a55"]],
        zmin=0, zmax=top, hoverongaps=False, name=f"vocabulary ({len(ids):,})",
        meta=dict(count=int(counts.sum())),
        # narrow (a phone's plot is 280 px across): short tick labels, no title
        colorbar=dict(thickness=10, len=0.6, y=0.5, tickvals=list(range(top + 1)),
                      ticktext=[f"{10 ** k:,}".replace(",000", "k") for k in range(top + 1)]),
        hovertemplate="%{text}<extra></extra>")


def vocabulary_base(coords, labels: tuple, explained, far_ids=()) -> tuple:
    """Every token of the vocabulary at its PCA position, built once per model: a grey dot each
    (up to MAX_DOTS tokens) or, for a bigger vocabulary, a density of how many tokens fall in
    each cell; the rows that stand apart by their length (`far_ids`, embedding_space.far_rows)
    as dots in their own colour. Returns (the traces' JSON, the layout's JSON), joined with the
    prompt's trace by vocabulary_map."""
    far = np.zeros(len(coords), dtype=bool)
    far[list(far_ids)] = True
    dense = len(coords) > MAX_DOTS

    def dots(mask, **style):
        ids = np.flatnonzero(mask)
        return dict(
            type="scatter", x=typed_array(np.round(coords[ids, 0], 4).astype(np.float32)),
            y=typed_array(np.round(coords[ids, 1], 4).astype(np.float32)), mode="markers",
            customdata=[[label(labels[i]), int(i)] for i in ids],
            hovertemplate="%{customdata[0]}<br>id %{customdata[1]}<extra></extra>", **style)
    if dense:
        traces = [_density_trace(coords, labels, np.flatnonzero(~far))]
    else:
        traces = [dots(~far, marker=dict(size=4, color=MUTED, opacity=0.55),
                       name=f"vocabulary ({int((~far).sum()):,})")]
    if far.any():
        traces.append(dots(far, marker=dict(size=5, color=PALETTE[3], opacity=0.8,
                                            symbol="x"),
                           name=f"long rows, likely never inputs ({int(far.sum()):,})"))
    layout = base_layout(
        title=dict(text=f"All {len(labels):,} tokens, placed by PCA"
                   + (" (shade: tokens per cell)" if dense else "")),
        xaxis=dict(title=dict(text=f"PC 1 ({explained[0]:.1%} of the variance)"),
                   zeroline=False),
        yaxis=dict(title=dict(text=f"PC 2 ({explained[1]:.1%} of the variance)"),
                   zeroline=False),
        legend=dict(orientation="h", y=-0.22), height=540)
    whole = json.loads(figure_json(traces, layout))
    return ",".join(json.dumps(t) for t in whole["data"]), json.dumps(whole["layout"])


def vocabulary_map(base: tuple, coords, ids: list, labels: list, neighbours=()) -> str:
    """The cached vocabulary map plus the prompt's tokens, highlighted and labelled, and
    `neighbours` ((id, text) of tokens near them by cosine, drawn only on a density map, where
    single tokens cannot be hovered) as small rings, labelled where there is room after the
    prompt's labels."""
    distinct = list(dict.fromkeys(ids))
    text = {i: t for i, t in zip(ids, labels)}
    near = [(i, t) for i, t in dict(neighbours).items() if i not in text]
    span = coords.max(axis=0) - coords.min(axis=0)
    every = distinct + [i for i, _ in near]
    names = [text[i] for i in distinct] + [t for _, t in near]
    shown = set(labels_apart(coords[every], names, span, MAP_PLOT_PX))
    traces = []
    if near:
        nids = [i for i, _ in near]
        traces.append(dict(
            type="scatter", x=typed_array(coords[nids, 0].astype(np.float32)),
            y=typed_array(coords[nids, 1].astype(np.float32)),
            mode="markers+text", name="their nearest neighbours (cosine)",
            marker=dict(size=8, color="white", line=dict(color=PALETTE[5], width=2)),
            text=[label(t) if len(distinct) + n in shown else "" for n, (_, t) in
                  enumerate(near)],
            textposition="top center", textfont=dict(size=13, color=PALETTE[0]),
            customdata=[[i, label(t)] for i, t in near],
            hovertemplate="%{customdata[1]}<br>id %{customdata[0]}<extra>neighbour</extra>"))
    traces.append(dict(
        type="scatter", x=typed_array(coords[distinct, 0].astype(np.float32)),
        y=typed_array(coords[distinct, 1].astype(np.float32)),
        mode="markers+text", name="the prompt's tokens",
        marker=dict(size=10, color=ACCENT, line=dict(color="white", width=1)),
        text=[label(text[i]) if n in shown else "" for n, i in enumerate(distinct)],
        textposition="top center", textfont=dict(size=14, color=ACCENT),
        customdata=[[i, label(text[i])] for i in distinct],
        hovertemplate="%{customdata[1]}<br>id %{customdata[0]}<extra>prompt</extra>"))
    trace, layout = base
    return ('{"data":[' + trace + "," + ",".join(json.dumps(t) for t in traces)
            + '],"layout":' + layout + "}")
