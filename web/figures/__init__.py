"""Figure builders: pure functions from pipeline results to Plotly figures (as JSON).

The only place that imports Plotly. Text that came from a user or a tokenizer is HTML-escaped
before it goes into a label, because Plotly renders a little HTML in text and hover labels.
"""
import base64
import html

import numpy as np
import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

FONT = dict(family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size=15)


def label(text: str) -> str:
    """Token text made safe for Plotly's HTML-ish labels. Quotes become numeric references:
    plotly.js decodes those, but among named ones only a few (amp, lt, gt, nbsp, ...), so
    `&quot;` would be drawn literally."""
    return html.escape(text, quote=False).replace('"', "&#34;").replace("'", "&#39;")


def base_layout(**kw) -> dict:
    layout = dict(font=FONT, margin=dict(l=10, r=10, t=48, b=10), height=340,
                  paper_bgcolor="white", plot_bgcolor="white")
    layout.update(kw)
    return layout


def to_json(fig: go.Figure) -> str:
    return fig.to_json()


# --- plain Plotly JSON for large figures (attention, feed-forward) -----------------------------
# graph_objects validates every attribute of every trace: ~35 ms for a 32-heatmap grid. Figures
# that are many traces or many numbers are written as plain dicts instead (the same JSON), with
# arrays as plotly.js typed arrays: {"dtype", "bdata": base64 of the bytes, "shape"}.
DTYPES = {np.dtype(np.int8): "i1", np.dtype(np.float32): "f4", np.dtype(np.int32): "i4"}


def typed_array(a) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": DTYPES[a.dtype], "bdata": base64.b64encode(a.tobytes()).decode("ascii"),
            "shape": ", ".join(str(n) for n in a.shape)}


def figure_json(data: list, layout: dict) -> str:
    return to_json_plotly({"data": data, "layout": layout})
