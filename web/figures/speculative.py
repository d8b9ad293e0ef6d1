"""Figures of the speculative-decoding section."""
from web.figures import ROLES, base_layout, figure_json, roles

# The target alone decodes token by token (DECODE, as the generation loop's decode); its
# verifying passes are TARGET: not the orange that highlights the reader's setting elsewhere,
# nor the green of "accepted" (ACCEPTED, the round chips' outline). Each part is its role's.
TARGET, ALONE = ROLES["TARGET"], ROLES["DECODE"]
PARTS = (("prefill", "both models read the prompt", "PREFILL"),
         ("draft", "draft proposes", "DRAFT"),
         ("target", "target verifies (one pass a round)", "TARGET"),
         ("other", "accept / reject, drawing tokens", "OVERHEAD"))
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
                   # decoding token by token: its own colour, not the verifying passes'
                   marker=dict(color=ALONE), meta=roles("DECODE"),
                   hovertemplate="%{x:.1f} ms<extra>target alone</extra>")]
    for key, name, role in PARTS:
        name = (names or {}).get(key, name)
        traces.append(dict(type="bar", y=[rows[1]], x=[1000 * spec_parts[key]],
                           orientation="h", name=name, marker=dict(color=ROLES[role]),
                           meta=roles(role),
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
    labels = [f"{passes[n] / step:.2f} steps" if n > 1 else "1 step" for n in sizes]
    # a plain decode step (the target alone's, DECODE) as the reference; the passes that verify
    # several tokens, the target's verifying passes (TARGET)
    colors = [ALONE if n == 1 else TARGET for n in sizes]
    trace = dict(type="bar", x=[str(n) for n in sizes], y=ms, marker=dict(color=colors),
                 meta=roles("DECODE", "TARGET"),
                 text=labels, textposition="outside", cliponaxis=False,
                 hovertemplate="a pass over %{x} tokens: %{y:.1f} ms<extra></extra>")
    return figure_json([trace], base_layout(
        height=280, margin=dict(l=10, r=10, t=24, b=10), showlegend=False,
        xaxis=dict(title=dict(text="tokens read in one pass"), type="category"),
        yaxis=dict(title=dict(text="one pass (ms)"), rangemode="tozero",
                   range=[0, 1.2 * max(ms)])))
