"""Figures of the sampling section: the distribution after each stage, and N draws against
the prediction."""
from web.figures import ACCENT, MUTED, PALETTE, base_layout, figure_json, label

KEPT, GONE = PALETTE[0], "#d3d8e0"
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
             marker=dict(color=[MUTED if k else GONE for k in final_kept]),
             hovertext=[f"{t}: model {100 * p:.2f}%" + ("" if k else " (removed)")
                        for t, p, k in zip(x, model_probs, final_kept)],
             hoverinfo="text"),
        dict(type="bar", name="after the controls: drawn from", x=ticks,
             y=[float(p) if k else 0.0 for p, k in zip(final_probs, final_kept)],
             marker=dict(color=ACCENT),
             hovertext=[f"{t}: {100 * p:.2f}% after the controls" if k else f"{t}: removed"
                        for t, p, k in zip(x, final_probs, final_kept)],
             hoverinfo="text"),
    ]
    return figure_json(data, base_layout(
        barmode="group", bargap=0.2, height=250,
        legend=dict(orientation="h", x=0, y=1.0, xanchor="left", yanchor="bottom"),
        margin=dict(l=10, r=10, t=0, b=10),
        xaxis=dict(tickmode="array", tickvals=ticks, ticktext=x, tickangle=-45),
        yaxis=dict(title=dict(text="probability", standoff=10), tickformat=".0%",
                   rangemode="tozero", nticks=5)))


def stages_figure(stages, names) -> str:
    """One row per stage given (the page passes those that changed the distribution), the same
    tokens in every row. A survivor's bar is its probability
    after the stage (renormalised); a token the stage removed keeps a grey bar of the
    probability it had just before. The row's title says how many tokens are left (the table
    below the figure has the mass of the tokens not shown). Every row has the same y range (the
    tallest bar of any row, plus a little room): with a range per row, every row's tallest bar
    would fill its row and a stage that sharpens or flattens the distribution would look the
    same as one that does nothing. Written as a plain figure dict: Plotly's graph objects cost
    ~150 ms for six rows."""
    x = [label(n) for n in names]
    n_rows = len(stages)
    # Rows and the room for each row's title are fixed in pixels: the bottom margin is kept for
    # the token labels (rotated on a phone), so the plot area, and a title's room, never shrinks.
    row_px, title_px, top_px, bottom_px = 72, 28, 30, 110
    area = n_rows * row_px + (n_rows - 1) * title_px
    gap, height = title_px / area, row_px / area
    data, layout = [], dict(height=area + top_px + bottom_px, bargap=0.25, showlegend=False,
                            margin=dict(l=10, r=10, t=top_px, b=bottom_px), annotations=[])
    before, rows = None, []
    for st in stages:
        heights, colours, hover = [], [], []
        for i, name in enumerate(x):
            if st.kept[i]:
                heights.append(st.probs[i])
                colours.append(None)           # a survivor: its row's colour, set below
                hover.append(f"{name}: {100 * st.probs[i]:.2f}%")
            elif before is not None and before.kept[i]:
                heights.append(before.probs[i])
                colours.append(GONE)
                hover.append(f"{name}: removed here (had {100 * before.probs[i]:.2f}%)")
            else:
                heights.append(0.0)
                colours.append(GONE)
                hover.append(f"{name}: removed earlier")
        rows.append((st, heights, colours, hover))
        before = st
    # one y range for every row: the tallest bar drawn in any of them
    top_p = max((h for _, heights, _, _ in rows for h in heights), default=0.0) or 1.0
    y_range = [0.0, 1.05 * top_p]
    for row, (st, heights, colours, hover) in enumerate(rows):
        colour = ACCENT if row == n_rows - 1 else KEPT
        colours = [colour if c is None else c for c in colours]
        axis = "" if row == 0 else str(row + 1)
        data.append(dict(type="bar", x=list(range(len(x))), y=heights, xaxis="x",
                         yaxis="y" + axis, marker=dict(color=colours), hovertext=hover,
                         hoverinfo="text"))
        top = 1 - row * (height + gap)
        layout["yaxis" + axis] = dict(domain=[max(0.0, top - height), top], tickformat=".0%",
                                      range=y_range, anchor="x", nticks=3)
        layout["annotations"].append(dict(
            text=_title(st), x=0, xref="paper", xanchor="left", y=top, yref="paper",
            yanchor="bottom", showarrow=False, font=dict(size=14)))
    layout["xaxis"] = dict(title=dict(text="token"), tickmode="array",
                           tickvals=list(range(len(x))), ticktext=x,
                           anchor="y" + str(n_rows))
    return figure_json(data, base_layout(**layout))


def _title(st) -> str:
    """A row's title, short enough for a phone: the stage, its setting, what it removed."""
    head = st.name if not st.param else f"{st.name} = {st.setting}"
    if not st.active:
        head += " (off)"
    elif st.removed:
        head += f": {st.survivors:,} left"
    elif st.param:
        head += ": reshaped"
    else:
        head += f": {st.survivors:,} tokens"
    return head


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
             x=[float(p) for p in predicted], marker=dict(color=KEPT),
             hovertext=[f"{t}: predicted {100 * p:.2f}%" for t, p in zip(x, predicted)],
             hoverinfo="text"),
        dict(type="bar", orientation="h", name=f"share of {n:,} seeded draws", y=rows,
             x=[float(o) for o in observed], marker=dict(color=ACCENT),
             hovertext=[f"{t}: drawn {c:,} times ({100 * o:.2f}%)"
                        for t, c, o in zip(x, counts + [other_count], observed)],
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
