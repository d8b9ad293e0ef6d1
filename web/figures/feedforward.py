"""Figures of the feed-forward section: the non-linearity with one token's real values on it,
and the histogram of that token's activations. Plain Plotly JSON (web.figures.figure_json)."""
import numpy as np

from web.figures import (
    ACCENT,
    INK,
    MUTED,
    base_layout,
    figure_json,
    labels_apart,
    roles,
    typed_array,
)

CURVE, POINTS, TOP = INK, MUTED, ACCENT     # the function, every neuron, the top ones
# the curve's plot area in px (across, up) on a phone, its narrowest: the neurons' numbers are
# chosen so that they do not collide there, so not on a wider screen either
CURVE_PLOT_PX = (250.0, 190.0)


def activation_figure(curve_x, curve_y, xs, ys, top, function: str, layer: int, token: int) -> str:
    """The curve y = function(x), and one point (xs[n], ys[n]) per neuron; the `top` neurons
    marked and numbered. Every neuron is drawn, as an SVG scatter: the page's plotly.js is the
    cartesian bundle, which has no WebGL traces (no scattergl)."""
    f32 = lambda a: typed_array(np.asarray(a, dtype=np.float32))  # noqa: E731
    top = np.asarray(top)
    # numbers only where they do not crowd another marked neuron (the rest: hover)
    span = (float(np.ptp(curve_x)), float(np.ptp(curve_y)))
    named = set(labels_apart(np.stack([np.asarray(xs)[top], np.asarray(ys)[top]], 1),
                             [str(int(n)) for n in top], span, CURVE_PLOT_PX, beside=True))
    data = [
        dict(type="scatter", mode="lines", x=f32(curve_x), y=f32(curve_y), name=function,
             line=dict(color=CURVE, width=2), hoverinfo="skip", meta=roles("INK")),
        dict(type="scatter", mode="markers",
             x=f32(xs), y=f32(ys), name="neurons of this token",
             customdata=typed_array(np.arange(len(xs), dtype=np.int32)),
             marker=dict(color=POINTS, size=6, opacity=0.55), meta=roles("CONTEXT"),
             hovertemplate=f"neuron %{{customdata}}<br>input %{{x:.4f}}<br>{function}(input) "
                           "%{y:.4f}<extra></extra>"),
        dict(type="scatter", mode="markers+text", x=f32(xs[top]), y=f32(ys[top]),
             name="most active", text=[str(int(n)) if k in named else ""
                                       for k, n in enumerate(top)],
             customdata=[int(n) for n in top], textposition="middle right",
             textfont=dict(color=TOP, size=14),
             marker=dict(color=TOP, size=10, line=dict(color="white", width=1)),
             meta=roles("HIGHLIGHT"),
             hovertemplate="neuron %{customdata}<br>input %{x:.4f}<br>" + function
                           + "(input) %{y:.4f}<extra></extra>"),
    ]
    layout = base_layout(
        title=dict(text=f"{function}: token {token}, layer {layer}"),
        height=300, showlegend=True, margin=dict(l=10, r=10, t=48, b=10),
        legend=dict(x=0.01, y=0.98, bgcolor="rgba(255,255,255,0.8)"),
        xaxis=dict(title=dict(text="input (pre-activation)"), zeroline=True,
                   zerolinecolor="#cfd6e3", automargin=True),
        yaxis=dict(title=dict(text=f"{function}(input)"), zeroline=True,
                   zerolinecolor="#cfd6e3", automargin=True))
    return figure_json(data, layout)


def histogram_figure(counts, edges, layer: int, token: int) -> str:
    """Bars of np.histogram's counts between its edges."""
    edges = np.asarray(edges, dtype=np.float64)
    data = [dict(type="bar", x=((edges[:-1] + edges[1:]) / 2).round(5).tolist(),
                 width=np.diff(edges).round(6).tolist(), y=np.asarray(counts).tolist(),
                 customdata=np.stack([edges[:-1], edges[1:]], 1).round(4).tolist(),
                 marker=dict(color=POINTS, line=dict(color="white", width=0.5)),
                 meta=roles("CONTEXT"),
                 hovertemplate="%{customdata[0]} to %{customdata[1]}: %{y} neurons"
                               "<extra></extra>")]
    layout = base_layout(
        title=dict(text=f"post: token {token}, layer {layer}"),
        bargap=0, xaxis=dict(title=dict(text="post-activation value"), automargin=True),
        yaxis=dict(title=dict(text="neurons"), rangemode="tozero", automargin=True))
    return figure_json(data, layout)
