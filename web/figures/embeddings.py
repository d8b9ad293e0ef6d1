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


def vocabulary_base(coords, labels: tuple, explained, far_ids=()) -> tuple:
    """Every token of the vocabulary as a grey dot at its PCA position, the rows that stand
    apart by their length (`far_ids`, embedding_space.far_rows) in their own colour, built once
    per model: (the traces' JSON, the layout's JSON), joined with the prompt's trace by
    vocabulary_map."""
    far = np.zeros(len(coords), dtype=bool)
    far[list(far_ids)] = True

    def dots(mask, **style):
        ids = np.flatnonzero(mask)
        return dict(
            type="scatter", x=typed_array(np.round(coords[ids, 0], 4).astype(np.float32)),
            y=typed_array(np.round(coords[ids, 1], 4).astype(np.float32)), mode="markers",
            customdata=[[label(labels[i]), int(i)] for i in ids],
            hovertemplate="%{customdata[0]}<br>id %{customdata[1]}<extra></extra>", **style)
    traces = [dots(~far, marker=dict(size=4, color=MUTED, opacity=0.55),
                   name=f"vocabulary ({int((~far).sum()):,})")]
    if far.any():
        traces.append(dots(far, marker=dict(size=5, color=PALETTE[3], opacity=0.8,
                                            symbol="x"),
                           name=f"long rows, likely never inputs ({int(far.sum()):,})"))
    layout = base_layout(
        title=dict(text=f"All {len(labels):,} tokens, placed by PCA"),
        xaxis=dict(title=dict(text=f"PC 1 ({explained[0]:.1%} of the variance)"),
                   zeroline=False),
        yaxis=dict(title=dict(text=f"PC 2 ({explained[1]:.1%} of the variance)"),
                   zeroline=False),
        legend=dict(orientation="h", y=-0.22), height=540)
    whole = json.loads(figure_json(traces, layout))
    return ",".join(json.dumps(t) for t in whole["data"]), json.dumps(whole["layout"])


def vocabulary_map(base: tuple, coords, ids: list, labels: list) -> str:
    """The cached vocabulary scatter plus the prompt's tokens, highlighted and labelled."""
    distinct = list(dict.fromkeys(ids))
    text = {i: t for i, t in zip(ids, labels)}
    span = coords.max(axis=0) - coords.min(axis=0)
    shown = set(labels_apart(coords[distinct], [text[i] for i in distinct], span,
                              MAP_PLOT_PX))
    prompt = dict(
        type="scatter", x=typed_array(coords[distinct, 0].astype(np.float32)),
        y=typed_array(coords[distinct, 1].astype(np.float32)),
        mode="markers+text", name="the prompt's tokens",
        marker=dict(size=10, color=ACCENT, line=dict(color="white", width=1)),
        text=[label(text[i]) if n in shown else "" for n, i in enumerate(distinct)],
        textposition="top center", textfont=dict(size=14, color=ACCENT),
        customdata=[[i, label(text[i])] for i in distinct],
        hovertemplate="%{customdata[1]}<br>id %{customdata[0]}<extra>prompt</extra>")
    trace, layout = base
    return '{"data":[' + trace + "," + json.dumps(prompt) + '],"layout":' + layout + "}"
