"""The overview's two small figures: the embedding rows of the last tokens as a labelled strip,
and one attention head's pattern as a small heatmap. Both draw arrays of the pass as they are."""
import numpy as np

from web.figures import SEQUENTIAL, base_layout, figure_json, label, signed_colours, typed_array

ROW_PX = 16                    # one token's row of the embedding strip: room for its 14 px label


def _text(chip) -> str:
    return "".join(text for _, text in chip.pieces)


def _short(text: str, n: int = 8) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def embeddings_thumbnail(rows, chips: list, first: int) -> str:
    """rows [n, d]: the embedding rows of the last n tokens (hook_embed), one heatmap row per
    token, labelled with the token (positions first .. first + n - 1), one column per
    dimension; hovering names the token, the dimension and the value."""
    z = np.ascontiguousarray(rows, dtype=np.float32)
    bound = float(np.abs(z).max()) if z.size else 1.0
    names = [label(_short(_text(c))) for c in chips]
    heatmap = dict(type="heatmap", z=typed_array(z), **signed_colours(bound), showscale=False,
                   y=list(range(first, first + len(chips))),
                   customdata=[[label(_text(c))] * z.shape[1] for c in chips],
                   hovertemplate="position %{y} (%{customdata}), dimension %{x}: "
                                 "%{z:.3f}<extra></extra>")
    return figure_json([heatmap], base_layout(
        height=10 + ROW_PX * len(chips), margin=dict(l=4, r=4, t=5, b=5),
        xaxis=dict(visible=False, showgrid=False, zeroline=False),
        yaxis=dict(showgrid=False, zeroline=False, autorange="reversed",
                   tickmode="array", tickvals=list(range(first, first + len(chips))),
                   ticktext=names, ticks="", title=None)))


def attention_thumbnail(pattern, row_positions: list, col_chips: list, first_col: int,
                        layer: int, head) -> str:
    """pattern [rows, cols]: one head's attention weights (or the mean of a layer's heads) for
    the query positions `row_positions` over the key positions first_col .. first_col + cols - 1
    (col_chips: their tokens). Cells a query may not see (the causal mask) are left blank."""
    z = np.ascontiguousarray(pattern, dtype=np.float32).copy()
    cols = list(range(first_col, first_col + z.shape[1]))
    for i, q in enumerate(row_positions):
        z[i, [j for j, k in enumerate(cols) if k > q]] = np.nan      # masked: not drawn
    names = [label(_text(c)) for c in col_chips]
    which = "mean of its heads" if head is None else f"head {head}"
    heatmap = dict(type="heatmap", z=typed_array(z), x=cols, y=list(row_positions),
                   colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0, showscale=False,
                   customdata=[names] * len(row_positions), hoverongaps=False,
                   hovertemplate=f"layer {layer}, {which}: position %{{y}} attends to "
                                 "%{x} (%{customdata}): %{z:.3f}<extra></extra>")
    return figure_json([heatmap], base_layout(
        height=max(44, min(84, 20 + 3 * len(row_positions))),
        margin=dict(l=2, r=2, t=0, b=16), plot_bgcolor="#e8ebf0",
        xaxis=dict(showgrid=False, zeroline=False, nticks=4, ticks="",
                   title=None),
        yaxis=dict(visible=False, showgrid=False, autorange="reversed")))
