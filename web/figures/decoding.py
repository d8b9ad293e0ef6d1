"""Figure of the decoding section: the beam-search tree."""
from web.figures import CHOICE, HIGHLIGHT, INK, MUTED, ROLES, base_layout, figure_json, label, roles

# greedy's path: the model's choice each step (CHOICE, not the green that means "accepted" in
# the speculative section); the best beam: the search's answer, highlighted (HIGHLIGHT); the
# tree in ink (a finished beam a square), what the search pruned REMOVED
KEPT, PRUNED, FINISHED, GREEDY, BEST = INK, ROLES["REMOVED"], INK, CHOICE, HIGHLIGHT
ROLE_OF = {KEPT: "INK", PRUNED: "REMOVED", GREEDY: "CHOICE", BEST: "HIGHLIGHT"}
TOKEN_SIZE, TOTAL_SIZE = 13, 11    # px: a box's token and its total
RANK_PX = 46                       # px between two ranks: a box is about 35 px tall, so two
#                                    boxes one rank apart keep a clear gap
PAD = "\u202f"                     # a narrow space each side of a line, inside its box
TREE_MIN_PX = 740                  # the tree's narrowest plot (static/style.css: .dec-tree-scroll
#                                    draws it at least 48rem wide, and scrolls on a phone)
CHAR_PX = 7.5                      # about, for a token in its box (TOKEN_SIZE)


def bottom_row(gathered: dict, y: float, names: dict) -> dict:
    """One faded dot per step for the pruned proposals ranked below the plot's rows (`gathered`:
    step -> its nodes, best first), hovered with how many it holds and the best of them."""
    steps = sorted(gathered)
    hover = []
    for s in steps:
        group = sorted(gathered[s], key=lambda nd: (-nd.total, nd.id))
        best = group[0]
        hover.append(f"{len(group)} pruned proposals ranked lower<br>the best: "
                     f"{label(names[best.id])}, total = {best.total:.3f}<br>the worst: total = "
                     f"{group[-1].total:.3f}")
    return dict(type="scatter", mode="markers", name="pruned, ranked lower", x=steps,
                y=[y] * len(steps), customdata=[len(gathered[s]) for s in steps],
                opacity=0.6, marker=dict(color=PRUNED, size=6), hovertext=hover,
                meta=roles("REMOVED"),
                hoverinfo="text")


def tree_figure(search, names, greedy_nodes, best_nodes) -> str:
    """x = step, y = rank of the proposal's total log-probability within its step. Every
    proposal is a node joined to the beam it extends; pruned ones are faded dots, kept and
    finished ones boxes holding their token and total; greedy's path and the best final beam
    are drawn over the edges. A plain figure dict (Plotly's graph objects would cost more than
    the search)."""
    by_step = {}
    for node in search.nodes:
        by_step.setdefault(node.step, []).append(node)
    rank = {}
    for _step, nodes in by_step.items():
        for r, node in enumerate(sorted(nodes, key=lambda nd: (-nd.total, nd.id))):
            rank[node.id] = r
    depth = max(1, max(rank.values(), default=0))
    # The kept beams are the top ranks; the best pruned proposal sits just below them. The plot
    # shows those ranks with room for their labels; the proposals ranked lower are gathered on
    # one row at the bottom, a dot per step with how many it holds, so that no edge runs out of
    # the plot.
    shown = min(depth, search.width)
    lower = shown + 1                  # the bottom row's rank, if any proposal is below `shown`
    y = {i: -min(r, lower) for i, r in rank.items()}
    hidden = {}
    for i, r in rank.items():
        if r > shown:
            hidden[search.nodes[i].step] = hidden.get(search.nodes[i].step, 0) + 1
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
                    line=dict(color=colour, width=width), showlegend=bool(name),
                    meta=roles(ROLE_OF[colour]))

    def nodes(node_ids, colour, size, name, symbol="circle", opacity=1.0):
        pts = [search.nodes[i] for i in node_ids]
        return dict(type="scatter", mode="markers", name=name,
                    x=[p.step for p in pts], y=[y[p.id] for p in pts], opacity=opacity,
                    marker=dict(color=colour, size=size, symbol=symbol),
                    meta=roles(ROLE_OF[colour]),
                    hovertext=[f"{label(names[p.id])}<br>log p = {p.logprob:.3f}<br>"
                               f"total = {p.total:.3f}<br>{p.status}" for p in pts],
                    hoverinfo="text")

    # a token longer than its step's room is cut in its box (…); its hover is whole
    room = max(4, min(14, int((TREE_MIN_PX / (search.steps + 1) - 16) / CHAR_PX)))

    def short(text):
        return text if len(text) <= room else text[:room - 1] + "…"

    def boxes(node_ids, colour):
        """A kept or finished proposal as a box on its node: its token over the path's total
        log p so far. Boxes are drawn over the edges, so no edge runs through a label."""
        return [dict(x=search.nodes[i].step, y=y[i], xref="x", yref="y", showarrow=False,
                     text=(f"{PAD}{label(short(names[i]))}{PAD}<br><span style='font-size:"
                           f"{TOTAL_SIZE}px'>{PAD}{search.nodes[i].total:.2f}{PAD}</span>"),
                     font=dict(size=TOKEN_SIZE, color=INK), align="center",
                     bgcolor="white", bordercolor=colour, borderwidth=1.5, borderpad=1)
                for i in node_ids]

    # the pruned proposals on the bottom row lie on one spot per step: one dot each step stands
    # for them all (its hover names the best of them), not one SVG marker per proposal
    pruned = [n.id for n in search.nodes if n.status == "pruned" and rank[n.id] <= shown]
    gathered = {}
    for n in search.nodes:
        if n.status == "pruned" and rank[n.id] > shown:
            gathered.setdefault(n.step, []).append(n)
    kept = [n.id for n in search.nodes if n.status == "kept"]
    finished = [n.id for n in search.nodes if n.status == "finished"]
    data = [
        edges(pruned, PRUNED, 1, None),
        edges(kept + finished, KEPT, 1.5, None),
        edges(greedy_nodes, GREEDY, 5, "greedy path"),
        edges(best_nodes, BEST, 3, "best beam"),
        nodes(pruned, PRUNED, 6, "pruned", opacity=0.6),
        nodes(kept, KEPT, 9, "kept"),
        nodes(finished, FINISHED, 11, "finished (end of text)", symbol="square"),
        bottom_row(gathered, -lower, names),
        dict(type="scatter", mode="markers", x=[-1], y=[root_y],     # the x axis names it
             marker=dict(color=INK, size=12), hoverinfo="skip", showlegend=False,
             meta=roles("INK")),
    ]
    if hidden:
        # how many proposals each step's bottom dot stands for, beside it
        steps = sorted(hidden)
        data.append(dict(type="scatter", mode="text", x=steps, y=[-lower] * len(steps),
                         text=[f"+{hidden[s]}" for s in steps], textposition="middle right",
                         textfont=dict(size=TOTAL_SIZE, color=MUTED), hoverinfo="skip",
                         showlegend=False))
    note = ("every proposal" if not hidden else
            f"top {shown + 1} of {depth + 1} per step; the lower ones on the bottom row")
    # A box is centred on its node: half a box above rank 0, the pruned row's dots at the
    # bottom; RANK_PX per rank leaves a gap between two boxes one rank apart.
    bottom = lower if hidden else shown
    span = bottom + 0.3 + 0.6
    layout = base_layout(
        height=round(54 + RANK_PX * span), hovermode="closest", showlegend=False,
        xaxis=dict(tickmode="array",
                   tickvals=list(range(-1, search.steps)),
                   ticktext=["prompt"] + [str(s + 1) for s in range(search.steps)],
                   range=[-1.5, search.steps - 0.5], zeroline=False),
        yaxis=dict(title=dict(text="rank"), range=[-bottom - 0.3, 0.6],
                   showticklabels=False, zeroline=False),
        annotations=[dict(text=f"rank by total log p ({note}); a box: token over total log p "
                          "so far", xref="paper", yref="paper", x=0, y=1, xanchor="left",
                          yanchor="bottom", showarrow=False, font=dict(size=12, color=MUTED))]
        + boxes(kept, KEPT) + boxes(finished, FINISHED),
        margin=dict(l=10, r=10, t=24, b=10))
    return figure_json(data, layout)
