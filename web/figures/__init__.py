"""Figure builders: pure functions from pipeline results to Plotly figures (as JSON).

The only place that imports Plotly. Text that came from a user or a tokenizer is HTML-escaped
before it goes into a label, because Plotly renders a little HTML in text and hover labels.
"""
import html

import plotly.graph_objects as go

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
