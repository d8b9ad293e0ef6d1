"""Figures of the quantization section."""
import numpy as np

from web.figures import ACCENT, MUTED, base_layout, figure_json, roles


def levels_histogram(counts, edges, levels, title: str, subtitle: str) -> str:
    """Bars of the weights' histogram (counts between edges, from
    pipeline.quantize.levels_histogram) with the values the quantized format can hold drawn as
    vertical lines: every weight is stored as the nearest line. levels=None draws no lines
    (int8's 255 levels would merge into a band; the subtitle gives their step instead)."""
    edges = np.asarray(edges, dtype=np.float64)
    top = max(int(np.max(counts)), 1)
    # the x range is the edges' (a histogram drawn beside another is given the same edges'
    # range: web.sections.quantization), half a bin's room each side
    pad = 0.5 * float(edges[1] - edges[0])
    x_range = [float(edges[0]) - pad, float(edges[-1]) + pad]
    xs, ys = [], []
    for level in np.asarray(levels if levels is not None else [], dtype=np.float64):
        xs += [float(level), float(level), None]
        ys += [0, top * 1.08, None]
    data = [
        dict(type="bar", x=((edges[:-1] + edges[1:]) / 2).tolist(),
             y=np.asarray(counts).tolist(), width=float(edges[1] - edges[0]),
             marker=dict(color=MUTED), name="weights", meta=roles("CONTEXT"),
             hovertemplate="weights near %{x:.4f}: %{y}<extra></extra>"),
    ]
    if xs:
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines", name="quantization levels",
                         line=dict(color=ACCENT, width=1), hoverinfo="skip",
                         meta=roles("HIGHLIGHT")))
    return figure_json(data, base_layout(
        title=dict(text=f"{title}<br><sup>{subtitle}</sup>"),
        # no legend: the subtitle names the lines
        margin=dict(l=10, r=10, t=64, b=10), bargap=0, height=280, showlegend=False,
        xaxis=dict(title=dict(text="weight value (float)"), range=x_range),
        yaxis=dict(title=dict(text="weights (count)"), range=[0, top * 1.1])))
