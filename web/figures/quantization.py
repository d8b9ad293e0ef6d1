"""Figures of the quantization section."""
import numpy as np
import plotly.graph_objects as go

from web.figures import base_layout, to_json

ACCENT, MUTED = "#b4451f", "#7a8ba6"


def levels_histogram(weights, levels, title: str, subtitle: str, bins: int = 60,
                     ticks: bool = False) -> str:
    """A histogram of real weights with the values the quantized format can hold drawn as
    vertical lines: every weight is stored as the nearest line. ticks=True draws the levels as
    short ticks under the bars instead (255 full-height lines would hide them)."""
    weights = np.asarray(weights, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    lo, hi = min(weights.min(), levels.min()), max(weights.max(), levels.max())
    counts, edges = np.histogram(weights, bins=bins, range=(lo, hi))
    top = max(int(counts.max()), 1)
    xs, ys = [], []
    low, high = (-0.12 * top, 0) if ticks else (0, top * 1.08)
    for level in levels:                        # one trace of segments: cheap even for 255
        xs += [float(level), float(level), None]
        ys += [low, high, None]
    fig = go.Figure([
        go.Bar(x=((edges[:-1] + edges[1:]) / 2).tolist(), y=counts.tolist(),
               width=float(edges[1] - edges[0]), marker_color=MUTED, name="weights",
               hovertemplate="weights near %{x:.4f}: %{y}<extra></extra>"),
        go.Scatter(x=xs, y=ys, mode="lines", name="quantization levels",
                   line=dict(color=ACCENT, width=1), hoverinfo="skip"),
    ])
    fig.update_layout(**base_layout(
        title=dict(text=f"{title}<br><sup>{subtitle}</sup>"),
        margin=dict(l=10, r=10, t=70, b=10), bargap=0, height=380,
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
        xaxis=dict(title=dict(text="weight value")),
        yaxis=dict(title=dict(text="weights"), range=[low * 1.05, top * 1.1])))
    return to_json(fig)
