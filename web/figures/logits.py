"""Figures of the logits-and-softmax section (plain figure dicts: see web.figures.block)."""
from web.figures import ACCENT, MUTED, ROLES, base_layout, figure_json, label, roles


def probs_figure(texts: list, own, dist, ids) -> str:
    """The highest-scoring tokens' probabilities at temperature 1 (`own`, a
    web.presentation.distribution.Distribution) and at the chosen one (`dist`); ids: the tokens,
    best first."""
    names = [f"{r + 1}. {label(t)}" for r, t in enumerate(texts)]
    temp = dist.temperature
    data = [
        dict(type="bar", x=names, y=[float(v) for v in dist.probs[ids]], name=f"T = {temp:g}",
             marker=dict(color=ROLES["SAMPLER_P"]), meta=roles("SAMPLER_P"),
             hovertemplate="%{x}: %{y:.2%}<extra>T = " + f"{temp:g}" + "</extra>"),
        dict(type="scatter", x=names, y=[float(v) for v in own.probs[ids]],
             name="T = 1 (the model's own)",
             mode="markers", meta=roles("MODEL_P"),
             marker=dict(color=ROLES["MODEL_P"], size=10, symbol="line-ew-open",
                         line=dict(width=3, color=ROLES["MODEL_P"])),
             hovertemplate="%{x}: %{y:.2%}<extra>T = 1</extra>"),
    ]
    return figure_json(data, base_layout(
        xaxis=dict(title=dict(text="token (rank by score)")),
        yaxis=dict(title=dict(text="probability"), range=[0, 1], tickformat=".0%", nticks=6),
        legend=dict(x=1, y=1, xanchor="right", yanchor="top", bgcolor="rgba(255,255,255,0.85)"),
        margin=dict(l=10, r=10, t=10, b=10), height=270))


def entropy_figure(temps: list, entropies: list, dist) -> str:
    """Entropy (bits) of this prompt's next-token distribution as the temperature varies, and
    `dist` (a web.presentation.distribution.Distribution at the chosen temperature) marked on the
    curve."""
    data = [
        dict(type="scatter", x=temps, y=entropies, mode="lines", line=dict(color=MUTED),
             meta=roles("CONTEXT"),
             hovertemplate="T = %{x}: %{y:.2f} bits<extra></extra>", name="entropy"),
        dict(type="scatter", x=[dist.temperature], y=[dist.entropy], mode="markers",
             marker=dict(size=13, color=ACCENT), meta=roles("HIGHLIGHT"),
             hovertemplate="T = %{x}: %{y:.2f} bits<extra>now</extra>", name="now"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="Entropy vs temperature"),
        showlegend=False,
        xaxis=dict(title=dict(text="temperature"), range=[0, 2.05]),
        yaxis=dict(title=dict(text="entropy (bits)"), rangemode="tozero")))
