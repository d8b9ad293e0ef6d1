"""Figures of the sampling section: the model's distribution against the one drawn from, and N
draws against the prediction (the distribution after each stage is drawn as bars in its table:
web.sections.sampling.stage_bars)."""
from web.figures import ROLES, base_layout, figure_json, label, roles

# the model's own probability, the one drawn from after the controls, a removed token's, the draws
MODEL, FINAL, GONE, DRAWN = (ROLES[r] for r in ("MODEL_P", "SAMPLER_P", "REMOVED", "DRAWS"))
OTHERS = "all other tokens"


def model_vs_final_figure(names, model_probs, final_probs, final_kept) -> str:
    """The section's headline: for the shown tokens, the model's own probability next to the
    probability the sampler draws with after all five controls. A token the controls removed
    has only its model bar, in grey. One pair of bar traces on one axis: a slider's answer
    redraws little."""
    x = [label(n) for n in names]
    ticks = list(range(len(x)))
    data = [
        dict(type="bar", name="the model's own", x=ticks, y=[float(p) for p in model_probs],
             marker=dict(color=[MODEL if k else GONE for k in final_kept]),
             meta=roles("MODEL_P", "REMOVED"),
             hovertext=[f"{t}: model {100 * p:.2f}%" + ("" if k else " (removed)")
                        for t, p, k in zip(x, model_probs, final_kept, strict=True)],
             hoverinfo="text"),
        dict(type="bar", name="after the controls: drawn from", x=ticks,
             y=[float(p) if k else 0.0 for p, k in zip(final_probs, final_kept, strict=True)],
             marker=dict(color=FINAL), meta=roles("SAMPLER_P"),
             hovertext=[f"{t}: {100 * p:.2f}% after the controls" if k else f"{t}: removed"
                        for t, p, k in zip(x, final_probs, final_kept, strict=True)],
             hoverinfo="text"),
    ]
    return figure_json(data, base_layout(
        barmode="group", bargap=0.2, height=250,
        legend=dict(orientation="h", x=0, y=1.0, xanchor="left", yanchor="bottom"),
        margin=dict(l=10, r=10, t=0, b=10),
        xaxis=dict(tickmode="array", tickvals=ticks, ticktext=x, tickangle=-45),
        yaxis=dict(title=dict(text="probability", standoff=10), tickformat=".0%",
                   rangemode="tozero", nticks=5)))


def draws_figure(names, many) -> str:
    """Each shown token's share of the draws (`many`, web.sections.sampling.ManyDraws) next to
    its predicted probability: horizontal bars, most probable token on top, so that the token
    names never crowd a narrow column."""
    n, counts, other_count = many.n, many.counts, many.other
    x = [label(t) for t in names] + [OTHERS]
    observed = [c / n for c in counts] + [other_count / n]
    predicted = list(many.probs) + [many.other_p]
    rows = list(range(len(x)))
    data = [
        dict(type="bar", orientation="h", name="predicted probability", y=rows,
             x=[float(p) for p in predicted], marker=dict(color=FINAL), meta=roles("SAMPLER_P"),
             hovertext=[f"{t}: predicted {100 * p:.2f}%"
                        for t, p in zip(x, predicted, strict=True)],
             hoverinfo="text"),
        dict(type="bar", orientation="h", name=f"share of {n:,} seeded draws", y=rows,
             x=[float(o) for o in observed], marker=dict(color=DRAWN), meta=roles("DRAWS"),
             hovertext=[f"{t}: drawn {c:,} times ({100 * o:.2f}%)"
                        for t, c, o in zip(x, counts + [other_count], observed, strict=True)],
             hoverinfo="text"),
    ]
    return figure_json(data, base_layout(
        barmode="group", bargap=0.25, height=120 + 26 * len(x),
        legend=dict(orientation="h", x=0, y=1.0, xanchor="left", yanchor="bottom",
                    traceorder="normal"),
        margin=dict(l=10, r=10, t=10, b=10),
        yaxis=dict(tickmode="array", tickvals=rows, ticktext=x, autorange="reversed"),
        xaxis=dict(title=dict(text="share of draws, or probability"), tickformat=".0%",
                   rangemode="tozero", nticks=6)))
