"""Figures of the attention-tiling and roofline sections."""
import math

import numpy as np
import plotly.graph_objects as go

from pipeline.tiling import tiled_traffic
from web.figures import base_layout, label, to_json

ACCENT, MUTED, INK, SKIP = "#b4451f", "#7a8ba6", "#14213d", "#e3e7ee"


def tiles_figure(pattern, tokens, bq, bk, row) -> str:
    """The head's attention pattern with the tile grid on top: tiles above the diagonal are
    never computed; the followed query row is outlined."""
    T = pattern.shape[0]
    names = [f"{i}: {label(t)}" for i, t in enumerate(tokens)]
    z = np.where(np.tril(np.ones((T, T), bool)), np.round(pattern, 4), np.nan)
    fig = go.Figure(go.Heatmap(
        z=z.tolist(), colorscale="Blues", zmin=0, zmax=1, hoverongaps=False,
        customdata=[[[names[i], names[j]] for j in range(T)] for i in range(T)],
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>"
                      "weight %{z:.4f}<extra></extra>",
        colorbar=dict(title=dict(text="weight"))))
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
    fig.update_layout(**base_layout(
        title=dict(text=f"Tiles of {bq} query rows x {bk} key rows (grey: skipped)"),
        shapes=shapes, height=min(560, 160 + 14 * T),
        xaxis=dict(title=dict(text="key position"), constrain="domain"),
        yaxis=dict(title=dict(text="query position"), autorange="reversed",
                   scaleanchor="x")))
    return to_json(fig)


def traffic_by_tile_figure(T, hd, sizes, plain_bytes, current) -> str:
    """Bytes moved for this prompt and head (fp32) as the square tile grows, vs plain."""
    tiled = [tiled_traffic(T, hd, b, b).total * 4 for b in sizes]
    fig = go.Figure([
        go.Scatter(x=sizes, y=tiled, mode="lines+markers", name="tiled (FlashAttention)",
                   line=dict(color=ACCENT),
                   hovertemplate="tiles of %{x} x %{x}: %{y:,} bytes<extra></extra>"),
        go.Scatter(x=[sizes[0], sizes[-1]], y=[plain_bytes, plain_bytes], mode="lines",
                   name="plain (scores stored)", line=dict(color=MUTED, dash="dash"),
                   hovertemplate="plain: %{y:,} bytes<extra></extra>"),
    ])
    if current in sizes:
        fig.add_trace(go.Scatter(x=[current], y=[tiled[sizes.index(current)]], mode="markers",
                                 name="your tiles", marker=dict(size=13, color=ACCENT),
                                 hovertemplate="your tiles: %{y:,} bytes<extra></extra>"))
    fig.update_layout(**base_layout(
        title=dict(text=f"Slow-memory traffic for this prompt ({T} tokens, one head)"),
        xaxis=dict(title=dict(text="tile size (rows of queries = rows of keys)"), type="log"),
        yaxis=dict(title=dict(text="bytes moved (fp32)"), rangemode="tozero"),
        legend=dict(orientation="h", y=-0.25)))
    return to_json(fig)


def traffic_by_length_figure(lengths, plain, tiled, n, name, tile) -> str:
    """Formula at real scale: bytes moved by one head's attention vs sequence length."""
    fig = go.Figure([
        go.Scatter(x=lengths, y=plain, mode="lines+markers", name="plain: 4Td + 4T² elements",
                   line=dict(color=MUTED, dash="dash"),
                   hovertemplate="T=%{x:,}: %{y:.3s}B<extra>plain</extra>"),
        go.Scatter(x=lengths, y=tiled, mode="lines+markers",
                   name=f"tiled, {tile} x {tile} tiles", line=dict(color=ACCENT),
                   hovertemplate="T=%{x:,}: %{y:.3s}B<extra>tiled</extra>"),
    ])
    fig.add_vline(x=n, line=dict(color=INK, width=1, dash="dot"))
    fig.update_layout(**base_layout(
        title=dict(text=f"One head of {label(name)}, bf16: bytes moved vs length"),
        xaxis=dict(title=dict(text="sequence length T (tokens)"), type="log"),
        yaxis=dict(title=dict(text="bytes to and from HBM"), type="log"),
        legend=dict(orientation="h", y=-0.25)))
    return to_json(fig)


def roofline_figure(roofs, points, machine_points) -> str:
    """Log-log roofline. roofs: [(name, peak, bandwidth)]; points: [(label, intensity,
    {hardware name: attainable flops})] for the chosen model; machine_points: measured."""
    xs = np.logspace(-1, 4, 60)
    fig = go.Figure()
    colors = ["#7a8ba6", "#2a9d8f", "#264653", "#e76f51", "#6d597a", "#b4451f"]
    for (name, peak, bw), color in zip(roofs, colors):
        fig.add_trace(go.Scatter(
            x=xs.tolist(), y=np.minimum(peak, xs * bw).tolist(), mode="lines",
            name=label(name), line=dict(color=color),
            hovertemplate=label(name) + ": %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte<extra></extra>"))
    symbols = ["circle", "diamond", "square", "triangle-up"]
    for (text, intensity), symbol in zip(points, symbols):
        fig.add_vline(x=intensity, line=dict(color=INK, width=1, dash="dot"))
        fig.add_annotation(x=math.log10(intensity), y=1, yref="paper", text=label(text),
                           showarrow=False, textangle=-90, xanchor="right", yanchor="top",
                           font=dict(size=12))
    for text, intensity, achieved in machine_points:
        fig.add_trace(go.Scatter(
            x=[intensity], y=[achieved], mode="markers", name=label(text),
            marker=dict(size=13, color=ACCENT, symbol="star"),
            hovertemplate=label(text) + ": %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte"
                                        "<extra>measured</extra>"))
    fig.update_layout(**base_layout(
        title=dict(text="Roofline: attainable FLOP/s vs arithmetic intensity"), height=480,
        xaxis=dict(title=dict(text="arithmetic intensity (FLOP per byte moved)"), type="log"),
        yaxis=dict(title=dict(text="FLOP/s"), type="log"),
        legend=dict(orientation="h", y=-0.2)))
    return to_json(fig)
