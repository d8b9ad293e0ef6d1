"""Figures of the speculative-decoding section."""
import plotly.graph_objects as go

from web.figures import base_layout, to_json

PARTS = (("prefill", "both models read the prompt", "#c9d3e3"),
         ("draft", "draft proposes", "#7a8ba6"),
         ("target", "target verifies (one pass a round)", "#b4451f"),
         ("other", "accept / reject, drawing tokens", "#e0b25b"))


def time_figure(alone_seconds: float, n_alone: int, spec_parts: dict, n_spec: int) -> str:
    """Measured wall time, in milliseconds: the target alone vs speculative decoding, the
    latter split into where its time went."""
    rows = [f"target alone<br>{n_alone} tokens", f"speculative<br>{n_spec} tokens"]
    traces = [go.Bar(y=[rows[0]], x=[1000 * alone_seconds], orientation="h",
                     name="target alone, token by token", marker_color="#3d5a80",
                     hovertemplate="%{x:.1f} ms<extra>target alone</extra>")]
    for key, name, color in PARTS:
        traces.append(go.Bar(y=[rows[1]], x=[1000 * spec_parts[key]], orientation="h",
                             name=name, marker_color=color,
                             hovertemplate="%{x:.1f} ms<extra>" + name + "</extra>"))
    fig = go.Figure(traces)
    fig.update_layout(**base_layout(
        title=dict(text="Wall time, measured"), barmode="stack", height=300,
        legend=dict(orientation="h", yanchor="top", y=-0.25, x=0),
        xaxis=dict(title=dict(text="milliseconds"), rangemode="tozero"),
        yaxis=dict(autorange="reversed", automargin=True)))
    return to_json(fig)
