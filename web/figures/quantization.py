"""Figures of the quantization section."""
import numpy as np

from web.figures import ACCENT, MUTED, base_layout, figure_json


def levels_histogram(counts, edges, levels, title: str, subtitle: str,
                     ticks: bool = False) -> str:
    """Bars of the weights' histogram (counts between edges, from
    pipeline.quantize.levels_histogram) with the values the quantized format can hold drawn as
    vertical lines: every weight is stored as the nearest line. ticks=True draws the levels as
    short ticks under the bars instead (255 full-height lines would hide them)."""
    edges = np.asarray(edges, dtype=np.float64)
    top = max(int(np.max(counts)), 1)
    xs, ys = [], []
    low, high = (-0.12 * top, 0) if ticks else (0, top * 1.08)
    for level in np.asarray(levels, dtype=np.float64):   # one trace of segments: cheap for 255
        xs += [float(level), float(level), None]
        ys += [low, high, None]
    data = [
        dict(type="bar", x=((edges[:-1] + edges[1:]) / 2).tolist(),
             y=np.asarray(counts).tolist(), width=float(edges[1] - edges[0]),
             marker=dict(color=MUTED), name="weights",
             hovertemplate="weights near %{x:.4f}: %{y}<extra></extra>"),
        dict(type="scatter", x=xs, y=ys, mode="lines", name="quantization levels",
             line=dict(color=ACCENT, width=1), hoverinfo="skip"),
    ]
    return figure_json(data, base_layout(
        title=dict(text=f"{title}<br><sup>{subtitle}</sup>"),
        margin=dict(l=10, r=10, t=76, b=10), bargap=0, height=400,
        legend=dict(orientation="h", yanchor="top", y=-0.25, x=0),
        xaxis=dict(title=dict(text="weight value (float)")),
        yaxis=dict(title=dict(text="weights (count)"), range=[low * 1.05, top * 1.1])))
