"""The overview's one small figure: the embedding rows of the sequence as a thumbnail heatmap."""
import numpy as np

from web.figures import base_layout, figure_json, label, signed_colours, typed_array


def _text(chip) -> str:
    return "".join(text for _, text in chip.pieces)


def embeddings_thumbnail(rows, chips: list, first: int) -> str:
    """rows [n, d]: the embedding rows of the last n tokens (hook_embed), one heatmap row per
    token (positions first .. first + n - 1), one column per dimension. No axes: a picture of the
    tensor; hovering names the token, the dimension and the value."""
    z = np.ascontiguousarray(rows, dtype=np.float32)
    bound = float(np.abs(z).max()) if z.size else 1.0
    names = [f"{first + i}: {label(_text(c))}" for i, c in enumerate(chips)]
    heatmap = dict(type="heatmap", z=typed_array(z), **signed_colours(bound), showscale=False,
                   y=names,
                   hovertemplate="token %{y}, dimension %{x}: %{z:.3f}<extra></extra>")
    return figure_json([heatmap], base_layout(
        height=96, margin=dict(l=0, r=0, t=0, b=0),
        xaxis=dict(visible=False, showgrid=False), yaxis=dict(visible=False, showgrid=False,
                                                               autorange="reversed",
                                                               type="category")))
