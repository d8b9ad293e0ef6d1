"""Figure of the roofline section: published chips' roofs and this server's, the chosen model's
phases at their arithmetic intensity, and the live model's measured points."""
import numpy as np

from web.figures import ACCENT, INK, PALETTE, TEXT_SIZE, base_layout, figure_json, label

# the published chips' roofs, then this server's in ACCENT like its measured stars
ROOF_COLOURS = tuple(PALETTE[i] for i in (0, 2, 3, 5, 6)) + (ACCENT,)


def short_name(name: str) -> str:
    """A chip's name in the legend: without its vendor, at most two words."""
    return " ".join(name.removeprefix("NVIDIA ").removeprefix("AMD ").split()[:2])


def roofline_figure(roofs, points, machine_points, stars_name="measured") -> str:
    """Log-log roofline. roofs: [(name, intensities, attainable FLOP/s)], each computed by
    pipeline.roofline.roof_curve; points: [(label, intensity)] of the chosen model's phases,
    drawn as dotted verticals labelled across the foot of the plot; machine_points: [(label,
    intensity, measured FLOP/s)], one legend entry named stars_name."""
    # the legend names a chip by its first two words without its vendor ("A100 SXM 80GB":
    # "A100 SXM"), short enough for two entries to a line on a phone; its hover keeps the full
    # name
    data = [dict(type="scatter", x=np.asarray(xs).tolist(), y=np.asarray(ys).tolist(),
                 mode="lines", name=label(short_name(name)),
                 line=dict(color=ROOF_COLOURS[i % len(ROOF_COLOURS)], width=2),
                 hovertemplate=label(name) + ": %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte"
                                             "<extra></extra>")
            for i, (name, xs, ys) in enumerate(roofs)]
    # the measured points: one legend entry, each point named in its hover
    data.append(dict(type="scatter", x=[x for _, x, _ in machine_points],
                     y=[y for _, _, y in machine_points], mode="markers", name=label(stars_name),
                     text=[label(text) for text, _, _ in machine_points],
                     marker=dict(size=14, color=ACCENT, symbol="star"),
                     hovertemplate="%{text}: %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte"
                                   "<extra>measured</extra>"))
    # the x range is the roofs' (fixed: plotly would widen it to fit the labels' text)
    xs = [x for _, xs, _ in roofs for x in xs] + [x for _, x in points]
    lo, hi = float(np.log10(min(xs))), float(np.log10(max(xs)))
    shapes, annotations = [], []
    for i, (text, intensity) in enumerate(sorted(points, key=lambda p: p[1])):
        shapes.append(dict(type="line", x0=intensity, x1=intensity, xref="x", y0=0, y1=1,
                           yref="paper", line=dict(color=INK, width=1, dash="dot")))
        # horizontal labels, each a step higher than the one to its left, so none overlap;
        # to the right of its line (to the left in the plot's right part), on two lines
        # ("decode" over "16 sequences"), narrow enough for a phone's plot
        right = (np.log10(intensity) - lo) / (hi - lo) > 0.6
        head, _, tail = text.partition(" ")
        annotations.append(dict(
            x=float(np.log10(intensity)), xref="x", y=0.03 + 0.25 * i, yref="paper",
            text=label(head.rstrip(",")) + "<br>" + label(tail), showarrow=False,
            align="right" if right else "left", xanchor="right" if right else "left",
            yanchor="bottom", xshift=-4 if right else 4,
            font=dict(size=TEXT_SIZE, color=INK), bgcolor="rgba(255,255,255,0.85)"))
    # one label per power of ten, with SI prefixes up to P (plotly writes 10^15 past T)
    ys = [y for _, _, ys in roofs for y in ys] + [y for _, _, y in machine_points]
    powers = range(int(np.floor(np.log10(min(ys)))), int(np.ceil(np.log10(max(ys)))) + 1)
    prefixes = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
    ticktext = [f"{10 ** (e % 3)}{prefixes.get(e - e % 3, 'e%d' % (e - e % 3))}" for e in powers]
    return figure_json(data, base_layout(
        height=330, margin=dict(l=10, r=10, t=10, b=10),
        shapes=shapes, annotations=annotations,
        xaxis=dict(title=dict(text="intensity (FLOP per byte moved)"), type="log",
                   exponentformat="SI", range=[lo, hi]),
        yaxis=dict(title=dict(text="FLOP per second"), type="log",
                   tickmode="array", tickvals=[10.0 ** e for e in powers], ticktext=ticktext),
        # above the plot (it has no title), clear of the axis title however many lines it takes
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom")))
