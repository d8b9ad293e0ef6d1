"""Figures of the generation-loop section (plain Plotly JSON: drawn on every render)."""
from web.figures import MUTED, ROLES, base_layout, figure_json, roles

# prefill and decode in their roles (the speculative section's "read the prompt" and "target
# alone, token by token" are the same two); a prefill's share per token is context
PREFILL, DECODE, PER_TOKEN = ROLES["PREFILL"], ROLES["DECODE"], MUTED


def prefill_decode_figure(sweep: list, n_prompt: int, prefill_s: float, decode_s) -> str:
    """Measured times vs prompt length: a whole prefill, a prefill divided by its tokens, and
    one decode step at that context; the current prompt marked."""
    n = [r["n"] for r in sweep]
    ms = 1000.0
    marker = dict(size=13, symbol="diamond", line=dict(width=2, color="white"))
    data = [
        dict(type="scatter", x=n, y=[r["prefill_s"] * ms for r in sweep], mode="lines+markers",
             name="prefill: the whole prompt, one pass", line=dict(color=PREFILL),
             meta=roles("PREFILL"),
             hovertemplate="%{x} prompt tokens: prefill %{y:.2f} ms<extra></extra>"),
        dict(type="scatter", x=n, y=[r["decode_s"] * ms for r in sweep], mode="lines+markers",
             name="decode: one new token", line=dict(color=DECODE), meta=roles("DECODE"),
             hovertemplate="%{x} tokens in the cache: decode %{y:.2f} ms per token"
                           "<extra></extra>"),
        dict(type="scatter", x=n, y=[r["prefill_s"] * ms / r["n"] for r in sweep],
             mode="lines+markers", name="prefill ÷ prompt tokens",
             line=dict(color=PER_TOKEN, dash="dot"), meta=roles("CONTEXT"),
             hovertemplate="%{x} prompt tokens: %{y:.3f} ms per prompt token<extra></extra>"),
        dict(type="scatter", x=[n_prompt], y=[prefill_s * ms], mode="markers",
             name="your prompt", marker=dict(marker, color=PREFILL), meta=roles("PREFILL"),
             hovertemplate="your prompt, %{x} tokens: prefill %{y:.2f} ms<extra></extra>"),
    ]
    if decode_s is not None:
        data.append(dict(
            type="scatter", x=[n_prompt], y=[decode_s * ms], mode="markers", showlegend=False,
            marker=dict(marker, color=DECODE), meta=roles("DECODE"),
            hovertemplate="your prompt: decode %{y:.2f} ms per token<extra></extra>"))
    layout = base_layout(
        # the title at the top, the legend under it, above the plot: below the plot, on a
        # phone, the legend (four rows) met the x axis's title (two lines there)
        title=dict(text="Prefill vs decode, measured", yref="container", y=1, yanchor="top",
                   pad=dict(t=12)),
        height=420, margin=dict(l=10, r=10, t=48, b=10),
        legend=dict(orientation="h", yref="container", y=1 - 40 / 420, yanchor="top", x=0,
                    xanchor="left"),
        xaxis=dict(title=dict(text="tokens (prompt, or cache for decode)"),
                   rangemode="tozero"),
        # a log scale: a whole prefill (tens of ms) and a token's cost (a few ms, or less)
        # differ tenfold and more; on a linear axis the per-token lines lay flat at 0
        yaxis=dict(title=dict(text="time (ms, log scale)"), type="log"))
    return figure_json(data, layout)
