"""Figure of the roofline section: published chips' roofs and this server's, the chosen model's
phases at their arithmetic intensity, and the live model's measured points."""
import numpy as np

from web.figures import ACCENT, INK, SERIES, TEXT_SIZE, base_layout, figure_json, label, roles

# the published chips' roofs (a series each), then this server's in ACCENT like its measured
# stars (the reader's machine: the highlight)
ROOF_COLOURS = SERIES[:5] + (ACCENT,)
# the phases' labels: placed apart on a phone's plot, the narrowest (px across); a label's two
# lines take ROW_PX in height, a character about LABEL_PX_PER_CHAR across
PLOT_PX, ROW_PX, LABEL_PX_PER_CHAR = 250, 36, 8.0


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
                 meta=roles("HIGHLIGHT" if ROOF_COLOURS[i % len(ROOF_COLOURS)] == ACCENT
                            else "SERIES"),
                 hovertemplate=label(name) + ": %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte"
                                             "<extra></extra>")
            for i, (name, xs, ys) in enumerate(roofs)]
    # the measured points: one legend entry, each point named in its hover
    data.append(dict(type="scatter", x=[x for _, x, _ in machine_points],
                     y=[y for _, _, y in machine_points], mode="markers", name=label(stars_name),
                     text=[label(text) for text, _, _ in machine_points],
                     marker=dict(size=14, color=ACCENT, symbol="star"), meta=roles("HIGHLIGHT"),
                     hovertemplate="%{text}: %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte"
                                   "<extra>measured</extra>"))
    # the x range is the roofs' (fixed: plotly would widen it to fit the labels' text)
    xs = [x for _, xs, _ in roofs for x in xs] + [x for _, x in points]
    lo, hi = float(np.log10(min(xs))), float(np.log10(max(xs)))
    shapes, annotations = [], []
    # The phases' labels stand in a band above the plot, each at the top of its dotted line,
    # so that no label covers a roof, a star or another label: labels that would touch on a
    # phone's plot (the narrowest, PLOT_PX across) go on rows of their own.
    rows = []                      # per row: the (left, right) px extents taken
    for text, intensity in sorted(points, key=lambda p: p[1]):
        shapes.append(dict(type="line", x0=intensity, x1=intensity, xref="x", y0=0, y1=1,
                           yref="paper", line=dict(color=INK, width=1, dash="dot")))
        head, _, tail = text.partition(" ")
        head = head.rstrip(",")
        at = (np.log10(intensity) - lo) / (hi - lo) * PLOT_PX
        width = LABEL_PX_PER_CHAR * max(len(head), len(tail)) + 6
        # to the right of its line, or to its left where the plot ends first
        right = at + width > PLOT_PX
        extent = (at - width, at) if right else (at, at + width)
        row = next((r for r, taken in enumerate(rows)
                    if all(extent[1] + 4 < a or extent[0] > b + 4 for a, b in taken)), None)
        if row is None:
            rows.append([])
            row = len(rows) - 1
        rows[row].append(extent)
        # the dotted line goes on up through the band to its label (px above the plot)
        shapes.append(dict(type="line", x0=intensity, x1=intensity, xref="x", yref="paper",
                           ysizemode="pixel", yanchor=1, y0=0, y1=4 + ROW_PX * (row + 1) - 4,
                           line=dict(color=INK, width=1, dash="dot")))
        annotations.append(dict(
            x=float(np.log10(intensity)), xref="x", y=1, yref="paper",
            yshift=4 + ROW_PX * row, text=label(head) + "<br>" + label(tail), showarrow=False,
            align="right" if right else "left", xanchor="right" if right else "left",
            yanchor="bottom", xshift=-3 if right else 3,
            font=dict(size=TEXT_SIZE, color=INK)))
    # one label per power of ten, with SI prefixes up to P (plotly writes 10^15 past T)
    ys = [y for _, _, ys in roofs for y in ys] + [y for _, _, y in machine_points]
    powers = range(int(np.floor(np.log10(min(ys)))), int(np.ceil(np.log10(max(ys)))) + 1)
    prefixes = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
    ticktext = [f"{10 ** (e % 3)}{prefixes.get(e - e % 3, 'e%d' % (e - e % 3))}" for e in powers]
    band = 8 + ROW_PX * max(1, len(rows))
    return figure_json(data, base_layout(
        height=330 + band, margin=dict(l=10, r=10, t=band, b=10),
        shapes=shapes, annotations=annotations,
        xaxis=dict(title=dict(text="intensity (FLOP per byte moved)"), type="log",
                   exponentformat="SI", range=[lo, hi]),
        yaxis=dict(title=dict(text="FLOP per second"), type="log",
                   tickmode="array", tickvals=[10.0 ** e for e in powers], ticktext=ticktext),
        # under the plot, below the axis title, however many lines it takes: the band above
        # the plot is the phases'
        legend=dict(orientation="h", x=0, xref="container", y=0, yref="container",
                    yanchor="bottom")))
