"""Figures of the speculative-decoding section."""
from web.figures import MUTED, PALETTE, base_layout, figure_json

# The target model's passes are the target's colour (TARGET, as "target alone"), not the orange
# that highlights the reader's setting elsewhere, nor the green of "accepted" (ACCEPTED, the
# round chips' outline).
TARGET = PALETTE[0]
ALONE_PATTERN = dict(shape="/", fgcolor="white", size=8, solidity=0.3)
PARTS = (("prefill", "both models read the prompt", "#c9d3e3"),
         ("draft", "draft proposes", MUTED),
         ("target", "target verifies (one pass a round)", TARGET),
         ("other", "accept / reject, drawing tokens", PALETTE[7]))
# the same parts when the draft is prompt lookup (no draft model)
LOOKUP_NAMES = {"prefill": "the target reads the prompt", "draft": "lookups in the text",
                "target": "target verifies (one pass a round)",
                "other": "accept / reject, drawing tokens"}


def time_figure(alone_seconds: float, n_alone: int, spec_parts: dict, n_spec: int,
                names: dict = None) -> str:
    """Measured wall time, in milliseconds: the target alone vs speculative decoding, the
    latter split into where its time went (`names`: the parts' legend entries)."""
    rows = [f"target alone<br>{n_alone} tokens", f"speculative<br>{n_spec} tokens"]
    traces = [dict(type="bar", y=[rows[0]], x=[1000 * alone_seconds], orientation="h",
                   name="target alone, token by token",
                   # the target's colour, hatched: its own swatch beside "target verifies"
                   marker=dict(color=TARGET, pattern=ALONE_PATTERN),
                   hovertemplate="%{x:.1f} ms<extra>target alone</extra>")]
    for key, name, color in PARTS:
        name = (names or {}).get(key, name)
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


def pass_figure(passes: dict) -> str:
    """Measured time of one pass of the target over n tokens (n = 1: a plain decode step), in
    milliseconds, each bar labelled with its cost in decode steps."""
    sizes = sorted(passes)
    step = passes[1]
    ms = [1000 * passes[n] for n in sizes]
    labels = [f"{passes[n] / step:.1f} steps" if n > 1 else "1 step" for n in sizes]
    # a plain decode step as the reference; the passes that verify several tokens, the target's
    colors = [MUTED if n == 1 else TARGET for n in sizes]
    trace = dict(type="bar", x=[str(n) for n in sizes], y=ms, marker=dict(color=colors),
                 text=labels, textposition="outside", cliponaxis=False,
                 hovertemplate="a pass over %{x} tokens: %{y:.1f} ms<extra></extra>")
    return figure_json([trace], base_layout(
        height=280, margin=dict(l=10, r=10, t=24, b=10), showlegend=False,
        xaxis=dict(title=dict(text="tokens read in one pass"), type="category"),
        yaxis=dict(title=dict(text="one pass (ms)"), rangemode="tozero",
                   range=[0, 1.2 * max(ms)])))
