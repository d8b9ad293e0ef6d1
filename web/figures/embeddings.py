"""Figures of the embeddings section."""
import json

import numpy as np
import plotly.graph_objects as go
import plotly.utils

from web.figures import base_layout, label, to_json

ACCENT, MUTED = "#b4451f", "#9aa7bd"


def _token_axis(labels: list) -> dict:
    """A categorical axis by position: two equal tokens must not fold into one row."""
    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[f"{i}: {label(t)}" for i, t in enumerate(labels)],
                autorange="reversed", automargin=True)


def token_vectors_heatmap(vectors, labels: list) -> str:
    """One row per prompt token: its embedding vector, one column per dimension."""
    v = np.asarray(vectors, dtype=np.float32)
    limit = float(np.abs(v).max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=np.round(v, 4), zmid=0, zmin=-limit, zmax=limit, colorscale="RdBu", reversescale=True,
        customdata=[[label(t)] * v.shape[1] for t in labels],
        hovertemplate="token %{y} (%{customdata})<br>dimension %{x}: %{z:.4f}<extra></extra>",
        colorbar=dict(thickness=12)))
    fig.update_layout(**base_layout(
        title=dict(text=f"Token vectors: {v.shape[0]} tokens x {v.shape[1]} dimensions"),
        xaxis=dict(title=dict(text="dimension"), showgrid=False),
        yaxis=_token_axis(labels),
        height=110 + 22 * v.shape[0]))
    return to_json(fig)


def vocabulary_base(coords, labels: tuple, explained) -> dict:
    """Every token of the vocabulary as a grey dot at its PCA position (built once per model)."""
    fig = go.Figure(go.Scatter(
        x=np.round(coords[:, 0], 4), y=np.round(coords[:, 1], 4), mode="markers",
        marker=dict(size=4, color=MUTED, opacity=0.55), name="vocabulary",
        customdata=[[label(t)] for t in labels],
        hovertemplate="%{customdata[0]}<br>id %{pointNumber}<extra></extra>"))
    fig.update_layout(**base_layout(
        title=dict(text=f"All {len(labels):,} tokens, projected on their 2 principal components"),
        xaxis=dict(title=dict(text=f"PC 1 ({explained[0]:.1%} of the variance)"),
                   zeroline=False),
        yaxis=dict(title=dict(text=f"PC 2 ({explained[1]:.1%} of the variance)"),
                   zeroline=False),
        legend=dict(orientation="h", y=-0.18), height=520))
    return json.loads(fig.to_json())


def vocabulary_map(base: dict, coords, ids: list, labels: list) -> str:
    """The cached vocabulary scatter plus the prompt's tokens, highlighted and labelled."""
    distinct = list(dict.fromkeys(ids))
    text = {i: t for i, t in zip(ids, labels)}
    prompt = go.Scatter(
        x=np.round(coords[distinct, 0], 4), y=np.round(coords[distinct, 1], 4),
        mode="markers+text", name="the prompt's tokens",
        marker=dict(size=10, color=ACCENT, line=dict(color="white", width=1)),
        text=[label(text[i]) for i in distinct], textposition="top center",
        textfont=dict(size=13, color=ACCENT),
        customdata=[[i] for i in distinct],
        hovertemplate="%{text}<br>id %{customdata[0]}<extra>prompt</extra>")
    fig = {"data": base["data"] + [prompt.to_plotly_json()], "layout": base["layout"]}
    return json.dumps(fig, cls=plotly.utils.PlotlyJSONEncoder)
