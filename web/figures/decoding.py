"""Figure of the decoding section: the beam-search tree."""
from web.figures import ACCENT, INK, MUTED, PALETTE, base_layout, figure_json, label

KEPT, PRUNED, FINISHED, GREEDY, BEST = PALETTE[0], "#c3cad6", PALETTE[3], PALETTE[2], ACCENT


def tree_figure(search, names, greedy_nodes, best_nodes) -> str:
    """x = step, y = rank of the proposal's total log-probability within its step. Every
    proposal is a node joined to the beam it extends; pruned ones are faded, kept ones labelled
    with their token; greedy's path and the best final beam are drawn over them. A plain figure
    dict (Plotly's graph objects would cost more than the search)."""
    by_step = {}
    for node in search.nodes:
        by_step.setdefault(node.step, []).append(node)
    y = {}
    for step, nodes in by_step.items():
        for rank, node in enumerate(sorted(nodes, key=lambda nd: (-nd.total, nd.id))):
            y[node.id] = -rank
    root_y = 0

    def xy(node_id):
        if node_id == -1:
            return -1, root_y
        return search.nodes[node_id].step, y[node_id]

    def edges(node_ids, colour, width, name):
        xs, ys = [], []
        for i in node_ids:
            (x0, y0), (x1, y1) = xy(search.nodes[i].parent), xy(i)
            xs += [x0, x1, None]
            ys += [y0, y1, None]
        return dict(type="scatter", mode="lines", x=xs, y=ys, name=name, hoverinfo="skip",
                    line=dict(color=colour, width=width), showlegend=bool(name))

    def nodes(node_ids, colour, size, name, text=False, symbol="circle", opacity=1.0):
        pts = [search.nodes[i] for i in node_ids]
        trace = dict(type="scatter", mode="markers+text" if text else "markers", name=name,
                     x=[p.step for p in pts], y=[y[p.id] for p in pts], opacity=opacity,
                     marker=dict(color=colour, size=size, symbol=symbol),
                     hovertext=[f"{label(names[p.id])}<br>log p = {p.logprob:.3f}<br>"
                                f"total = {p.total:.3f}<br>{p.status}" for p in pts],
                     hoverinfo="text")
        if text:       # token, then its log-probability | the path's total so far
            trace.update(text=[f"{label(names[p.id])}<br>{p.logprob:.2f} | {p.total:.2f}"
                               for p in pts], textposition="top center",
                         textfont=dict(size=13))
        return trace

    pruned = [n.id for n in search.nodes if n.status == "pruned"]
    kept = [n.id for n in search.nodes if n.status == "kept"]
    finished = [n.id for n in search.nodes if n.status == "finished"]
    data = [
        edges(pruned, PRUNED, 1, None),
        edges(kept + finished, KEPT, 1.5, None),
        edges(greedy_nodes, GREEDY, 5, "greedy path"),
        edges(best_nodes, BEST, 3, "best beam"),
        nodes(pruned, PRUNED, 6, "pruned", opacity=0.6),
        nodes(kept, KEPT, 9, "kept", text=True),
        nodes(finished, FINISHED, 11, "finished (end of text)", text=True, symbol="square"),
        dict(type="scatter", mode="markers+text", x=[-1], y=[root_y], text=["prompt"],
             textposition="middle left", marker=dict(color=INK, size=12),
             hoverinfo="skip", showlegend=False),
    ]
    depth = max(1, max((-v for v in y.values()), default=0))
    # The kept beams are the top ranks; the best pruned proposal sits just below them. The plot
    # shows those ranks with room for their labels; the rest run off the bottom (pan to see them).
    shown = min(depth, search.width)
    note = ("every proposal" if shown == depth else f"top {shown + 1} of {depth + 1} per step")
    layout = base_layout(
        height=86 + 38 * shown, hovermode="closest", showlegend=False,
        xaxis=dict(tickmode="array",
                   tickvals=list(range(-1, search.steps)),
                   ticktext=["prompt"] + [str(s + 1) for s in range(search.steps)],
                   range=[-1.8, search.steps - 0.4], zeroline=False),
        yaxis=dict(title=dict(text="rank"), range=[-shown - 0.15, 1.05],
                   showticklabels=False, zeroline=False),
        annotations=[dict(text=f"rank by total log p ({note}); labels: token, log p | total so far", xref="paper",
                          yref="paper", x=0, y=1, xanchor="left", yanchor="bottom",
                          showarrow=False, font=dict(size=12, color=MUTED))],
        margin=dict(l=10, r=10, t=24, b=10))
    return figure_json(data, layout)
