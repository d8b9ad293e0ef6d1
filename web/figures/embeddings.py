"""Figures of the embeddings section."""
import json

import numpy as np

from web.figures import ACCENT, base_layout, figure_json, label, signed_colours, typed_array

MUTED = "#9aa7bd"             # lighter than the palette's: 50,000 dots under the prompt's


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
        title=dict(text=f"Token vectors: {v.shape[0]} tokens x {v.shape[1]} dimensions"),
        xaxis=dict(title=dict(text="dimension"), showgrid=False, automargin=True),
        yaxis=dict(title=dict(text="prompt token"), **_token_axis(labels)),
        height=110 + 22 * v.shape[0]))


def vocabulary_base(coords, labels: tuple, explained) -> tuple:
    """Every token of the vocabulary as a grey dot at its PCA position, built once per model:
    (the trace's JSON, the layout's JSON), joined with the prompt's trace by vocabulary_map."""
    trace = dict(
        type="scatter", x=typed_array(np.round(coords[:, 0], 4).astype(np.float32)),
        y=typed_array(np.round(coords[:, 1], 4).astype(np.float32)), mode="markers",
        marker=dict(size=4, color=MUTED, opacity=0.55), name="vocabulary",
        customdata=[[label(t)] for t in labels],
        hovertemplate="%{customdata[0]}<br>id %{pointNumber}<extra></extra>")
    layout = base_layout(
        title=dict(text=f"All {len(labels):,} tokens on their 2 principal components"),
        xaxis=dict(title=dict(text=f"PC 1 ({explained[0]:.1%} of the variance)"),
                   zeroline=False),
        yaxis=dict(title=dict(text=f"PC 2 ({explained[1]:.1%} of the variance)"),
                   zeroline=False),
        legend=dict(orientation="h", y=-0.2), height=520)
    whole = json.loads(figure_json([trace], layout))
    return json.dumps(whole["data"][0]), json.dumps(whole["layout"])


def vocabulary_map(base: tuple, coords, ids: list, labels: list) -> str:
    """The cached vocabulary scatter plus the prompt's tokens, highlighted and labelled."""
    distinct = list(dict.fromkeys(ids))
    text = {i: t for i, t in zip(ids, labels)}
    prompt = dict(
        type="scatter", x=typed_array(coords[distinct, 0].astype(np.float32)),
        y=typed_array(coords[distinct, 1].astype(np.float32)),
        mode="markers+text", name="the prompt's tokens",
        marker=dict(size=10, color=ACCENT, line=dict(color="white", width=1)),
        text=[label(text[i]) for i in distinct], textposition="top center",
        textfont=dict(size=14, color=ACCENT),
        customdata=[[i] for i in distinct],
        hovertemplate="%{text}<br>id %{customdata[0]}<extra>prompt</extra>")
    trace, layout = base
    return '{"data":[' + trace + "," + json.dumps(prompt) + '],"layout":' + layout + "}"
