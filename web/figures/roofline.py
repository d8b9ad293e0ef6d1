"""Figure of the roofline section: published chips' roofs and this server's, the chosen model's
phases at their arithmetic intensity, and the live model's measured points."""
import itertools

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
    # so that no label covers a roof, a star or another label, and no dotted line runs up
    # through another phase's label, on a phone's plot (the narrowest, PLOT_PX across):
    # place_labels chooses each label's row and side.
    phases = []
    for text, intensity in sorted(points, key=lambda p: p[1]):
        head, _, tail = text.partition(" ")
        head = head.rstrip(",")
        phases.append((intensity, head, tail,
                       (np.log10(intensity) - lo) / (hi - lo) * PLOT_PX,
                       LABEL_PX_PER_CHAR * max(len(head), len(tail)) + 6))
    placed = place_labels([(at, width) for _, _, _, at, width in phases])
    n_rows = 1 + max((row for row, _ in placed), default=0)
    for (intensity, head, tail, _, _), (row, side) in zip(phases, placed, strict=True):
        shapes.append(dict(type="line", x0=intensity, x1=intensity, xref="x", y0=0, y1=1,
                           yref="paper", line=dict(color=INK, width=1, dash="dot")))
        # the dotted line goes on up through the band (px above the plot): beside its label
        # to the top of its row, or to just under a label centred on it
        top = ROW_PX * row + 3 if side == "center" else ROW_PX * (row + 1)
        shapes.append(dict(type="line", x0=intensity, x1=intensity, xref="x", yref="paper",
                           ysizemode="pixel", yanchor=1, y0=0, y1=top,
                           line=dict(color=INK, width=1, dash="dot")))
        annotations.append(dict(
            x=float(np.log10(intensity)), xref="x", y=1, yref="paper",
            yshift=4 + ROW_PX * row, text=label(head) + "<br>" + label(tail), showarrow=False,
            align=side, xanchor=side, yanchor="bottom",
            xshift={"left": 3, "right": -3, "center": 0}[side],
            font=dict(size=TEXT_SIZE, color=INK)))
    # one label per power of ten, with SI prefixes up to P (plotly writes 10^15 past T)
    ys = [y for _, _, ys in roofs for y in ys] + [y for _, _, y in machine_points]
    powers = range(int(np.floor(np.log10(min(ys)))), int(np.ceil(np.log10(max(ys)))) + 1)
    prefixes = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
    ticktext = [f"{10 ** (e % 3)}{prefixes.get(e - e % 3, 'e%d' % (e - e % 3))}" for e in powers]
    # the y range starts half a decade under the lowest label, so that label never sits in the
    # corner on the x axis's first one (plotly's own range follows the lowest point, and a
    # measured star a little above a power of ten put its label there)
    top = float(np.log10(max(ys)))
    y_range = [powers[0] - 0.5, top + 0.05 * (top - powers[0] + 0.5)]
    band = 8 + ROW_PX * n_rows
    return figure_json(data, base_layout(
        height=330 + band, margin=dict(l=10, r=10, t=band, b=10),
        shapes=shapes, annotations=annotations,
        xaxis=dict(title=dict(text="intensity (FLOP per byte moved)"), type="log",
                   exponentformat="SI", range=[lo, hi]),
        yaxis=dict(title=dict(text="FLOP per second"), type="log",
                   tickmode="array", tickvals=[10.0 ** e for e in powers], ticktext=ticktext,
                   range=y_range),
        # under the plot, below the axis title, however many lines it takes: the band above
        # the plot is the phases'
        legend=dict(orientation="h", x=0, xref="container", y=0, yref="container",
                    yanchor="bottom")))


def place_labels(items, plot_px=PLOT_PX, gap=4):
    """items: [(px across of a phase's line, its label's width in px)] on a plot plot_px
    across. Each label: (row above the plot, side: "left" of its line's end, i.e. starting at
    the line, "right": ending at it, or "center" over it). Chosen so that labels on a row do
    not touch, no line crosses a label on its row or below (a line runs up to its own row),
    every label stays on the plot; the fewest rows, then the most labels centred. Few
    phases (three): every choice is tried."""
    def extent(at, width, side):
        return {"left": (at, at + width), "right": (at - width, at),
                "center": (at - width / 2, at + width / 2)}[side]

    options = []
    for at, width in items:
        sides = [s for s in ("center", "left", "right")
                 if extent(at, width, s)[0] >= 0 and extent(at, width, s)[1] <= plot_px]
        options.append(sides or ["right" if at + width > plot_px else "left"])
    n = len(items)
    best = None
    for choice in () if n > 4 else itertools.product(*[[(r, s) for r in range(n) for s in sides]
                                      for sides in options]):
        ext = [extent(at, width, s) for (at, width), (_, s) in zip(items, choice, strict=True)]
        ok = all(
            not (choice[i][0] == choice[j][0]
                 and ext[i][0] - gap < ext[j][1] and ext[j][0] - gap < ext[i][1])
            and not (choice[i][0] <= choice[j][0]
                     and ext[i][0] - gap <= items[j][0] <= ext[i][1] + gap)
            for i in range(n) for j in range(n) if i != j)
        if ok:
            key = (max(r for r, _ in choice), sum(s != "center" for _, s in choice),
                   sum(r for r, _ in choice))
            if best is None or key < best[0]:
                best = (key, list(choice))
    if best is not None:
        return best[1]
    # nothing clears every line (many phases close together): a row each, beside the line
    return [(i, options[i][0]) for i in range(n)]
