"""Figure builders: pure functions from pipeline results to Plotly figures (as JSON).

The only place that knows Plotly. Every figure is plain dicts and lists (plotly.js's JSON), never
`plotly.graph_objects`: a go.Figure validates every property, tens of milliseconds per figure,
where writing the same dicts takes well under one. The builders draw what the pipeline computed;
they do not compute it again.

One style for every figure, through `base_layout`: the page's font, tick labels and axis titles
of at least 14 px, every axis sized to its labels (automargin), every figure's title in one size
and one alignment (TITLE_SIZE, from the left edge), colours with one meaning each (ROLES), one
categorical sequence for lists (SERIES) and one diverging scale for signed values (DIVERGING,
via `signed_colours`).

Text that came from a user or a tokenizer is HTML-escaped before it goes into a label, because
Plotly renders a little HTML in text and hover labels.
"""
import base64
import html
import re

import numpy as np
from plotly.io.json import to_json_plotly

FONT = dict(family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size=15)
TICK_SIZE = 14                # px: tick labels, legend, labels written on the plot
TEXT_SIZE = 14
# A figure's title: one size and one alignment on the whole page (base_layout sets them over the
# figure's own): left, from the figure's left edge, as the page's headings are; a size between
# the body text and a heading, small enough for a phone's width (static/figure-style.js wraps
# a longer one).
TITLE_SIZE = 16
TITLE_ALIGN = dict(x=0, xref="container", xanchor="left")
TITLE_INDENT = 10             # px from the figure's left edge (the figures' own left margin)

# Colours with a meaning, one meaning each, the same in every figure of the page (and in the
# page's CSS where it draws figure-like bars): a colour below means its role and nothing else,
# and a figure draws a role in its colour only (tests/test_web_figure_colours.py checks every
# trace of every section). A trace says which roles it draws (`meta`, see `roles`).
ROLES = {
    # text, a function's curve (GELU), a rank, reference lines and outlines; the beam tree's
    # structure (its root, kept beams, and finished ones as squares)
    "INK": "#14213d",
    # the highlighted series or point: the reader's setting, the current value, the technique
    # the section shows at work (with the cache, tiled, paged), the answer a search found
    # (the best beam); the page's text calls it "orange" (ROLE_NAMES)
    "HIGHLIGHT": "#b4451f",
    # context: the baseline a highlight is compared with (without the cache, plain attention),
    # every other point, the data under a highlighted mark (the weights under the levels)
    "CONTEXT": "#7a8ba6",
    # what a control removed or a search pruned: a token top-k / top-p cut, a pruned beam
    "REMOVED": "#c3cad6",
    # the model's own probability: the softmax of the logits at temperature 1
    "MODEL_P": "#2b3a55",
    # the probability after the sampler's controls (temperature, top-k, top-p...): what a token
    # is drawn with (the overview's thick bars, static/style.css --sampler-p)
    "SAMPLER_P": "#4d8fbf",
    # the probability after one stage of the controls, on the way to SAMPLER_P (the stage table)
    "STAGE_P": "#a9c9e2",
    # what was observed: seeded draws, the class's guesses
    "DRAWS": "#a8436f",
    # the model's choice taken as is, its top token each step (greedy); "gold"
    "CHOICE": "#c08a1e",
    # a guess the target model accepted (speculative decoding; .sp.acc chips); "green"
    "ACCEPTED": "#3c8d5a",
    # the parts of a model, wherever its parameters or time are split by part
    "EMBEDDING": "#8a5fb5",
    "ATTENTION": "#1b8a8a",
    "FEED_FORWARD": "#5f6b3a",
    "NORMS": "#c5b0d5",
    # reading the whole prompt in one pass (prefill)
    "PREFILL": "#6b3e1f",
    # one token a pass, token by token (decode; the target model alone)
    "DECODE": "#4652a8",
    # speculative decoding's parts: the draft's proposals, the target's verifying passes, the
    # accept / reject bookkeeping
    "DRAFT": "#9fb3d1",
    "TARGET": "#17a2b8",
    "OVERHEAD": "#bab0ac",
    # the vocabulary map: the rows that stand apart by their length, and the prompt's tokens'
    # nearest neighbours (rings)
    "FAR": "#6a3d9a",
    "NEIGHBOUR": "#1f5fbf",
}
# The categorical sequence, for series that are only "the i-th of a list" (layers, heads,
# requests, published models, chips): none of the role colours, so a layer never looks like
# "attention" or "the sampler's p". Series past its length repeat it (with their own dash).
SERIES = ("#e377c2", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#e15759")
PALETTE = SERIES             # plotly's colorway: a trace without a colour is a series
INK, MUTED, ACCENT = ROLES["INK"], ROLES["CONTEXT"], ROLES["HIGHLIGHT"]
HIGHLIGHT, CHOICE, ACCEPTED = ROLES["HIGHLIGHT"], ROLES["CHOICE"], ROLES["ACCEPTED"]
# Each role colour the page's text names has that name (ROLE_NAMES).
ROLE_NAMES = {HIGHLIGHT: "orange", CHOICE: "gold", ACCEPTED: "green"}
GRID, ZERO_LINE = "#e3e7ee", "#b9c1cf"
# The figures are built for a white page. In the dark theme static/figure-style.js draws these
# two dark inks (lines, bars, the beam tree's edges) in the page's light ink (CSS --ink), which
# would vanish on the dark paper otherwise; the page names them (templates/page.html).
DARK_INKS = (INK, ROLES["MODEL_P"])


def roles(*names) -> dict:
    """A trace's `meta`: the roles it draws, each in ROLES[name] (one per colour it uses), or
    roles("SERIES"): one of a list, in SERIES."""
    assert all(n in ROLES for n in names) or names == ("SERIES",), names
    return dict(roles=list(names))


def series(i: int) -> str:
    """The i-th colour of the categorical sequence."""
    return SERIES[i % len(SERIES)]


# Values >= 0 (attention weights, norms): white to dark blue.
SEQUENTIAL = [[0.0, "#ffffff"], [0.15, "#c6dbef"], [0.5, "#4a8fc9"], [1.0, "#08306b"]]
# Signed values, always centred on 0 (signed_colours): red below 0, white at 0, blue above,
# the positive half being SEQUENTIAL; the page's shaded chips (web.presentation.shading) use the
# same ends.
DIVERGING = ([[0.0, "#a4161a"], [0.25, "#d6604d"], [0.425, "#fbd0c3"], [0.5, "#ffffff"]]
             + [[0.5 + p / 2, c] for p, c in SEQUENTIAL[1:]])


def label(text: str) -> str:
    """Token text made safe for Plotly's HTML-ish labels. Quotes become numeric references:
    plotly.js decodes those, but among named ones only a few (amp, lt, gt, nbsp, ...), so
    `&quot;` would be drawn literally."""
    return html.escape(text, quote=False).replace('"', "&#34;").replace("'", "&#39;")


def labels_apart(points, texts: list, span, plot_px, beside: bool = False) -> list:
    """Which points get their text written: greedily, in order, those whose label box overlaps
    no label already kept, on a plot of `plot_px` (across, up) showing `span` data units. A
    label is about 8.5 px a character: centred above its point, 8 px wider and 22 px tall, or
    (`beside`) from 7 px right of it, 4 px wider and 20 px tall, centred on it."""
    p = np.asarray(points, dtype=np.float64) * np.asarray(plot_px, dtype=np.float64) / np.maximum(
        np.asarray(span, dtype=np.float64), 1e-9)
    boxes, kept = [], []
    for i, (x, y) in enumerate(p):
        w = 8.5 * len(texts[i])
        box = (x + 7, x + 11 + w, y - 10, y + 10) if beside else \
            (x - (w + 8) / 2, x + (w + 8) / 2, y, y + 22)
        if all(box[1] < b[0] or box[0] > b[1] or box[3] < b[2] or box[2] > b[3] for b in boxes):
            boxes.append(box)
            kept.append(i)
    return kept


# Text sizes for laying a figure out before plotly.js draws it: a character of a 14 px label is at
# most about 8.5 px wide (as labels_apart assumes), a line of one is about 18 px tall.
CHAR_PX, LINE_PX = 8.5, 18


def text_px(texts) -> float:
    """The length in px of the longest of `texts` written in one line (a vertical tick label's
    height, a horizontal one's width): what automargin will take from the plot for them."""
    return CHAR_PX * max((len(str(t)) for t in texts), default=0)


def every_kth(n: int, plot_px: float, line_px: float = LINE_PX) -> int:
    """Label every k-th of n rows of a plot `plot_px` tall so that the labels shown are at most
    one per `line_px` px and so never collide (hover still names every row)."""
    return max(1, int(np.ceil(n * line_px / max(plot_px, 1.0))))


NAME_LINE_CHARS = 18     # a model's name on the parameter bars: lines of at most this many


def wrap_name(name: str, width: int = NAME_LINE_CHARS) -> list:
    """A model's name cut into lines of at most `width` characters where it can be (after a
    "-", "." or space; a longer piece keeps its own line): the running GGUF file's name in one
    line took most of a phone's width from a bar chart and was cut at its left edge."""
    lines = []
    for part in re.split(r" (?=\()", name):          # a remark in brackets on a line of its own
        start = len(lines)
        for piece in re.split(r"(?<=[-. ])", part):
            if len(lines) > start and len(lines[-1]) + len(piece) <= width:
                lines[-1] += piece
            elif piece:
                lines.append(piece)
    return [line.strip() for line in lines if line.strip()]


def signed_colours(bound: float) -> dict:
    """The heatmap colour settings of signed values within [-bound, bound]: DIVERGING, 0 white."""
    bound = float(bound) or 1.0
    return dict(colorscale=DIVERGING, zmid=0, zmin=-bound, zmax=bound)


# Tick labels are never hidden for overflowing the figure: every axis is sized to its labels
# (automargin) and a colour bar takes its labels' room, so none can overflow. plotly.js's default
# for a numeric axis and a colour bar ("hide past div") checks every label's box again as each
# label is placed (n squared measurements, each a layout of the page): a heatmap's row of 26
# token labels took 10 ms of its 30 ms redraw in the page (plotly.js 4.1, axes.drawLabels).
LABELS_FIT = "allow"
SCALED = {"heatmap", "contour", "histogram2d", "histogram2dcontour"}


def _colour_bars_fit(data: list) -> list:
    """The traces, every colour bar (a heatmap's own, a marker's) with LABELS_FIT."""
    out = []
    for trace in data:
        trace = dict(trace)
        if trace.get("type") in SCALED or "colorbar" in trace:
            trace["colorbar"] = dict({"ticklabeloverflow": LABELS_FIT}, **trace.get("colorbar", {}))
        marker = trace.get("marker")
        if isinstance(marker, dict) and ("colorbar" in marker or marker.get("showscale")):
            trace["marker"] = dict(marker, colorbar=dict({"ticklabeloverflow": LABELS_FIT},
                                                         **marker.get("colorbar", {})))
        out.append(trace)
    return out


def _axis(spec: dict) -> dict:
    """One axis in the page's style; the figure's own settings win."""
    axis = dict(automargin=True, gridcolor=GRID, zeroline=False, zerolinecolor=ZERO_LINE,
                linecolor=ZERO_LINE, tickfont=dict(size=TICK_SIZE), ticklabeloverflow=LABELS_FIT)
    if spec.get("type") == "log":
        # one label per power of ten: plotly's minor labels (2, 5) collide on a narrow plot
        axis.update(dtick=1, minor=dict(showgrid=False))
    axis.update(spec)
    axis["automargin"] = True
    axis["tickfont"] = dict(spec.get("tickfont", {}), size=max(
        spec.get("tickfont", {}).get("size", TICK_SIZE), TICK_SIZE))
    title = spec.get("title")
    if title:
        title = dict(title) if isinstance(title, dict) else dict(text=title)
        title["font"] = dict(title.get("font", {}), size=max(
            title.get("font", {}).get("size", FONT["size"]), FONT["size"]))
        axis["title"] = title
    return axis


def base_layout(**kw) -> dict:
    """A figure's layout in the page's style: kw are the figure's own settings (title, axes,
    height, ...). Every x and y axis (xaxis, yaxis2, ...) gets automargin and readable ticks; the
    title (its text, and where it sits vertically, are the figure's) gets TITLE_SIZE and
    TITLE_ALIGN, whatever the figure asked."""
    layout = dict(font=FONT, margin=dict(l=10, r=10, t=48, b=10), height=340,
                  paper_bgcolor="white", plot_bgcolor="white", colorway=list(PALETTE),
                  legend=dict(font=dict(size=TICK_SIZE)),
                  hoverlabel=dict(font=dict(size=TICK_SIZE)))
    layout.update(kw)
    if kw.get("title"):
        title = dict(kw["title"]) if isinstance(kw["title"], dict) else dict(text=kw["title"])
        layout["title"] = dict(title, font=dict(title.get("font", {}), size=TITLE_SIZE),
                               pad=dict(title.get("pad", {}), l=TITLE_INDENT), **TITLE_ALIGN)
    if "legend" in kw:
        layout["legend"] = dict(kw["legend"], font=dict(kw["legend"].get("font", {}),
                                                        size=TICK_SIZE))
    for key in ["xaxis", "yaxis"] + [k for k in kw if k[:5] in ("xaxis", "yaxis")]:
        layout[key] = _axis(layout.get(key) or {})
    return layout


# Arrays of many numbers travel as plotly.js typed arrays: {"dtype", "bdata": base64 of the
# bytes, "shape"}, a quarter of the characters of the decimal list.
DTYPES = {np.dtype(np.int8): "i1", np.dtype(np.float32): "f4", np.dtype(np.int32): "i4"}


def typed_array(a) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": DTYPES[a.dtype], "bdata": base64.b64encode(a.tobytes()).decode("ascii"),
            "shape": ", ".join(str(n) for n in a.shape)}


def figure_json(data: list, layout: dict) -> str:
    """The figure's JSON (NaN and infinities written as null, numpy values as numbers)."""
    return to_json_plotly({"data": _colour_bars_fit(data), "layout": layout})
