"""Figures of the speculative-decoding section."""
from web.figures import PALETTE, base_layout, figure_json

PARTS = (("prefill", "both models read the prompt", "#c9d3e3"),
         ("draft", "draft proposes", "#7a8ba6"),
         ("target", "target verifies (one pass a round)", "#b4451f"),
         ("other", "accept / reject, drawing tokens", "#e0b25b"))


def time_figure(alone_seconds: float, n_alone: int, spec_parts: dict, n_spec: int) -> str:
    """Measured wall time, in milliseconds: the target alone vs speculative decoding, the
    latter split into where its time went."""
    rows = [f"target alone<br>{n_alone} tokens", f"speculative<br>{n_spec} tokens"]
    traces = [dict(type="bar", y=[rows[0]], x=[1000 * alone_seconds], orientation="h",
                   name="target alone, token by token", marker=dict(color=PALETTE[0]),
                   hovertemplate="%{x:.1f} ms<extra>target alone</extra>")]
    for key, name, color in PARTS:
        traces.append(dict(type="bar", y=[rows[1]], x=[1000 * spec_parts[key]],
                           orientation="h", name=name, marker=dict(color=color),
                           hovertemplate="%{x:.1f} ms<extra>" + name + "</extra>"))
    # the legend sits above the bars (no title there), clear of the axis title below however
    # many lines it wraps to
    return figure_json(traces, base_layout(
        barmode="stack", height=300, margin=dict(l=10, r=10, t=10, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, traceorder="normal"),
        xaxis=dict(title=dict(text="wall time, measured (ms)"), rangemode="tozero"),
        yaxis=dict(autorange="reversed", type="category")))
