"""Figures of the embeddings section."""
import json

import numpy as np

from web.figures import (
    ACCENT,
    INK,
    MUTED,
    ROLES,
    base_layout,
    figure_json,
    label,
    roles,
    signed_colours,
    typed_array,
)

FAR, NEIGHBOUR = ROLES["FAR"], ROLES["NEIGHBOUR"]
# the vocabulary map's plot area in px (across, up) on a phone, its narrowest: the prompt's
# labels are chosen so that they do not collide there, so not on a wider screen either
MAP_PLOT_PX = (280.0, 380.0)


def _token_axis(labels: list) -> dict:
    """A categorical axis by position: two equal tokens must not fold into one row."""
    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[f"{i}: {label(t)}" for i, t in enumerate(labels)],
                autorange="reversed", automargin=True)


def token_vectors_heatmap(vectors, labels: list) -> str:
    """One row per prompt token: its embedding vector, one column per dimension. A plain figure
    dict (redrawn for every prompt)."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    limit = float(np.abs(v).max()) or 1.0
    heatmap = dict(
        type="heatmap", z=typed_array(v), **signed_colours(limit),
        hovertemplate="token %{y}, dimension %{x}: %{z:.4f}<extra></extra>",
        colorbar=dict(thickness=12))
    return figure_json([heatmap], base_layout(
        title=dict(text=f"{v.shape[0]} tokens × {v.shape[1]} numbers"),
        xaxis=dict(title=dict(text="dimension"), showgrid=False, automargin=True),
        yaxis=dict(title=dict(text="prompt token"), **_token_axis(labels)),
        height=110 + 22 * v.shape[0]))


def cosine_matrix_heatmap(sims, labels: list) -> str:
    """The prompt's tokens against each other: the cosine similarity of their embedding rows
    (1 on the diagonal and wherever a token repeats)."""
    s = np.ascontiguousarray(sims, dtype=np.float32)
    n = s.shape[0]
    heatmap = dict(
        type="heatmap", z=typed_array(s), **signed_colours(1.0),
        hovertemplate="%{y} and %{x}: %{z:.3f}<extra></extra>",
        # three ticks: on a short prompt's short bar, Plotly's five overlapped
        colorbar=dict(thickness=12, title=dict(text="cosine"), tickvals=[-1, 0, 1]))
    return figure_json([heatmap], base_layout(
        title=dict(text="Cosine similarity of the tokens"),
        # across: the token's place only (its text is on the row of the same number); plotly
        # chooses how many places to write, so they never collide on a narrow screen
        xaxis=dict(title=dict(text="token (its place in the prompt)"), showgrid=False,
                   tickangle=0, tickformat="d"),
        yaxis=dict(_token_axis(labels), showgrid=False),
        margin=dict(l=10, r=10, t=40, b=10), height=min(600, max(COSINE_MIN_HEIGHT, 90 + 15 * n))))


COSINE_MIN_HEIGHT = 260      # px: a 5-token prompt's squares still readable, its colour bar too


# Up to this many tokens the map draws one dot per token (the Austen model's 4,096); a bigger
# vocabulary (SmolLM2's 49,152) is drawn as a density: an SVG scatter of 49k points takes
# seconds to draw and ships megabytes, and its dots cover each other anyway.
MAX_DOTS = 10_000
DENSITY_BINS = (90, 60)       # cells across and up of the density map
DENSITY_EXAMPLES = 3          # tokens named in a cell's hover text


def density_grid(coords, bins=DENSITY_BINS):
    """Counts of the rows of `coords` [V, 2] in a grid of `bins` cells over their extent:
    (counts [up, across] int, x centres, y centres, cell of each row (row, column) [V, 2])."""
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    size = (hi - lo) / np.asarray(bins)
    cell = np.minimum(((coords - lo) / size).astype(np.int64), np.asarray(bins) - 1)  # [V, 2]
    counts = np.zeros((bins[1], bins[0]), dtype=np.int64)
    np.add.at(counts, (cell[:, 1], cell[:, 0]), 1)
    xs = lo[0] + size[0] * (np.arange(bins[0]) + 0.5)
    ys = lo[1] + size[1] * (np.arange(bins[1]) + 0.5)
    return counts, xs, ys, cell[:, ::-1]


def _density_trace(coords, labels, ids) -> dict:
    """The rows `ids` as a heatmap of how many tokens fall in each cell (log colour scale), the
    first few tokens of a cell (lowest ids: BPE's earliest, most common pieces) in its hover."""
    counts, xs, ys, cell = density_grid(coords[ids])
    examples = {}
    for n in np.lexsort((ids, cell[:, 1], cell[:, 0])):       # by cell, then id
        names = examples.setdefault(tuple(cell[n]), [])
        if len(names) < DENSITY_EXAMPLES:
            names.append(label(labels[ids[n]]))
    text = [["" if not counts[r, c] else
             f"{counts[r, c]:,} token{'s' if counts[r, c] > 1 else ''}: "
             + ", ".join(f"“{t}”" for t in examples[(r, c)])
             + (", …" if counts[r, c] > DENSITY_EXAMPLES else "")
             for c in range(counts.shape[1])] for r in range(counts.shape[0])]
    z = np.where(counts > 0, np.log10(np.maximum(counts, 1)), np.nan).astype(np.float32)
    top = int(np.ceil(np.log10(max(int(counts.max()), 10))))
    return dict(
        type="heatmap", x=typed_array(xs.astype(np.float32)),
        y=typed_array(ys.astype(np.float32)), z=typed_array(z), text=text,
        colorscale=[[0.0, "#dfe4ec"], [0.5, "#8593ab"], [1.0, "#2b3a55"]],
        zmin=0, zmax=top, hoverongaps=False, name=f"vocabulary ({len(ids):,})",
        meta=dict(count=int(counts.sum())),
        # narrow (a phone's plot is 280 px across): short tick labels, no title
        colorbar=dict(thickness=10, len=0.6, y=0.5, tickvals=list(range(top + 1)),
                      ticktext=[f"{10 ** k:,}".replace(",000", "k") for k in range(top + 1)]),
        hovertemplate="%{text}<extra></extra>")


def vocabulary_base(coords, labels: tuple, explained, far_ids=()) -> tuple:
    """Every token of the vocabulary at its PCA position, built once per model: a grey dot each
    (up to MAX_DOTS tokens) or, for a bigger vocabulary, a density of how many tokens fall in
    each cell; the rows that stand apart by their length (`far_ids`, embedding_space.far_rows)
    as dots in their own colour. Returns (the traces' JSON, the layout's JSON), joined with the
    prompt's trace by vocabulary_map."""
    far = np.zeros(len(coords), dtype=bool)
    far[list(far_ids)] = True
    dense = len(coords) > MAX_DOTS

    def dots(mask, **style):
        ids = np.flatnonzero(mask)
        return dict(
            type="scatter", x=typed_array(np.round(coords[ids, 0], 4).astype(np.float32)),
            y=typed_array(np.round(coords[ids, 1], 4).astype(np.float32)), mode="markers",
            customdata=[[label(labels[i]), int(i)] for i in ids],
            hovertemplate="%{customdata[0]}<br>id %{customdata[1]}<extra></extra>", **style)
    if dense:
        traces = [_density_trace(coords, labels, np.flatnonzero(~far))]
    else:
        traces = [dots(~far, marker=dict(size=4, color=MUTED, opacity=0.45),
                       meta=roles("CONTEXT"),     # faint: 50,000 dots under the prompt's
                       name=f"vocabulary ({int((~far).sum()):,})")]
    if far.any():
        traces.append(dots(far, marker=dict(size=5, color=FAR, opacity=0.8,
                                            symbol="x"), meta=roles("FAR"),
                           name=f"long rows, likely never inputs ({int(far.sum()):,})"))
    layout = base_layout(
        title=dict(text=f"All {len(labels):,} tokens, placed by PCA"
                   + (" (shade: tokens per cell)" if dense else "")),
        xaxis=dict(title=dict(text=f"PC 1 ({explained[0]:.1%} of the variance)"),
                   zeroline=False),
        yaxis=dict(title=dict(text=f"PC 2 ({explained[1]:.1%} of the variance)"),
                   zeroline=False),
        legend=dict(orientation="h", y=-0.22), height=540)
    for axis, (lo, hi) in zip(("xaxis", "yaxis"), bulk_range(coords, far), strict=True):
        if lo is not None:
            layout[axis]["range"] = [lo, hi]
    whole = json.loads(figure_json(traces, layout))
    return ",".join(json.dumps(t) for t in whole["data"]), json.dumps(whole["layout"]), far


# The map shows the bulk of the vocabulary: along an axis where the long rows (far_rows: the
# tokens training never read, one tight cluster far out along PC 1) lie beyond the rest and
# would squeeze it into a corner, the axis shows the other rows between these quantiles,
# padded by BULK_PAD of that span each side. The rows beyond an edge are counted in a note
# with an arrow at that edge (vocabulary_map).
BULK_QUANTILES, BULK_PAD = (0.005, 0.995), 0.08


def bulk_range(coords, far) -> list:
    """[(lo, hi) or (None, None)] per axis of the map: the range that shows the bulk, or None
    where the whole extent is shown (no long rows lie beyond the bulk along that axis)."""
    out = []
    for k in range(2):
        if not far.any() or far.all():
            out.append((None, None))
            continue
        lo, hi = np.quantile(coords[~far, k], BULK_QUANTILES)
        pad = BULK_PAD * (hi - lo)
        lo, hi = float(lo - pad), float(hi + pad)
        beyond = (coords[far, k] < lo) | (coords[far, k] > hi)
        out.append((lo, hi) if beyond.any() else (None, None))
    return out


def _extent(layout: dict, coords, k: int, keep) -> tuple:
    """The axis k's (lo, hi): the layout's range (the bulk), widened to hold the rows `keep`
    (the prompt's tokens and their drawn neighbours, always on the map), or the whole extent."""
    rng = layout.get("xaxis" if k == 0 else "yaxis", {}).get("range")
    full = (float(coords[:, k].min()), float(coords[:, k].max()))
    if not rng:
        pad = 0.04 * (full[1] - full[0])
        return full[0] - pad, full[1] + pad, False
    lo, hi = rng
    if len(keep):
        pad = 0.04 * (hi - lo)
        lo = min(lo, float(coords[keep, k].min()) - pad)
        hi = max(hi, float(coords[keep, k].max()) + pad)
    return lo, hi, True


EDGE_ARROW_PX = 34            # the length of an edge note's arrow
EDGE_FONT = 12


def _edge_notes(coords, far, ranges, marked=()) -> list:
    """An annotation per edge of the map with rows beyond it: an arrow pointing out at the
    edge, and how many rows lie beyond (long rows and other tokens) and how far out; placed
    along its edge where the beyond rows are, or as near there as it covers none of the
    `marked` rows (the prompt's tokens) on a phone's plot."""
    (xlo, xhi, xclip), (ylo, yhi, yclip) = ranges
    notes = []
    sides = []
    if xclip:
        sides += [(0, -1, xlo), (0, 1, xhi)]
    if yclip:
        sides += [(1, -1, ylo), (1, 1, yhi)]
    for k, sign, edge in sides:
        beyond = sign * coords[:, k] > sign * edge
        n = int(beyond.sum())
        if not n:
            continue
        n_far = int((beyond & far).sum())
        parts = ([f"{n_far:,} long row{'s' if n_far > 1 else ''} (×)"] if n_far else []) + \
            ([f"{n - n_far:,} token{'s' if n - n_far > 1 else ''}"] if n > n_far else [])
        furthest = float((coords[beyond, k].min() if sign < 0 else coords[beyond, k].max()))
        text = ("<br>and ".join(parts) + " beyond,<br>"
                + f"out to PC {k + 1} = {furthest:.2f}").replace("-", "\u2212")
        other = 1 - k
        olo, ohi = ranges[other][:2]
        along = float(np.median(coords[beyond, other]))
        along = min(max(along, olo + 0.15 * (ohi - olo)), ohi - 0.15 * (ohi - olo))
        wanted = along
        colour = FAR if n_far * 2 > n else "#4a5568"
        note = dict(text=text, showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.5,
                    arrowcolor=colour, font=dict(size=EDGE_FONT, color=colour),
                    bgcolor="rgba(255,255,255,0.85)", xref="x", yref="y")
        if k == 0:
            note.update(x=edge, y=along, ax=-sign * EDGE_ARROW_PX, ay=0,
                        xanchor="left" if sign < 0 else "right",
                        align="left" if sign < 0 else "right")
        else:
            note.update(x=along, y=edge, ax=0, ay=sign * EDGE_ARROW_PX,
                        yanchor="top" if sign > 0 else "bottom")
        # nearest place along the edge, in steps of a tenth, where it covers no marked row
        lows = np.array([ranges[0][0], ranges[1][0]])
        spans = np.array([ranges[0][1] - ranges[0][0], ranges[1][1] - ranges[1][0]])
        dots = (coords[list(marked)] - lows) / spans * np.asarray(MAP_PLOT_PX) \
            if len(marked) else np.zeros((0, 2))
        for step in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7):
            at = wanted + step * 0.1 * (ohi - olo)
            if not olo + 0.1 * (ohi - olo) <= at <= ohi - 0.1 * (ohi - olo):
                continue
            note["y" if k == 0 else "x"] = at
            left, right, bottom, top = _note_box(note, ranges, MAP_PLOT_PX)
            if not any(left - 6 < x < right + 6 and bottom - 6 < y < top + 6 for x, y in dots):
                break
        else:
            note["y" if k == 0 else "x"] = wanted
        notes.append(note)
    return notes


# where a label may stand beside its point, in the order tried: Plotly's textposition, and the
# label's box (left, right, bottom, top) in px from the point (y up), for a label w px wide
LABEL_SPOTS = (
    ("top center", lambda w: (-w / 2, w / 2, 6, 24)),
    ("bottom center", lambda w: (-w / 2, w / 2, -24, -6)),
    ("middle right", lambda w: (8, 8 + w, -9, 9)),
    ("middle left", lambda w: (-8 - w, -8, -9, 9)),
)


def place_labels(points_px, texts: list, plot_px, taken=(), marker_px=6.0) -> list:
    """Where each point's label goes (a LABEL_SPOTS textposition), or None where it cannot stand
    clear: greedily, in order, the first spot whose box overlaps no label already placed, no
    point's marker (`marker_px` from its centre), no box of `taken`, and stays in the plot."""
    pts = np.asarray(points_px, dtype=np.float64).reshape(-1, 2)
    marks = [(x - marker_px, x + marker_px, y - marker_px, y + marker_px) for x, y in pts]
    boxes = list(taken)
    out = []
    for i, (x, y) in enumerate(pts):
        w = 8.5 * len(texts[i]) + 4
        spot = None
        for name, shape in LABEL_SPOTS:
            left, right, bottom, top = shape(w)
            box = (x + left, x + right, y + bottom, y + top)
            if box[0] < 0 or box[1] > plot_px[0] or box[2] < 0 or box[3] > plot_px[1]:
                continue
            if any(not (box[1] < o[0] or box[0] > o[1] or box[3] < o[2] or box[2] > o[3])
                   for j, o in enumerate(marks + boxes) if j != i):
                continue
            spot = name
            boxes.append(box)
            break
        out.append(spot)
    return out


def _note_box(note, ranges, plot_px) -> tuple:
    """An edge note's box in px on the plot (as place_labels takes it), arrow included."""
    (xlo, xhi, _), (ylo, yhi, _) = ranges
    x = (note["x"] - xlo) / (xhi - xlo) * plot_px[0]
    y = (note["y"] - ylo) / (yhi - ylo) * plot_px[1]
    lines = note["text"].split("<br>")
    w = 7.0 * max(len(t) for t in lines) + 6
    h = 16 * len(lines) + 4
    ax, ay = note["ax"], -note["ay"]           # px, y up
    tx, ty = x + ax, y + ay
    left = tx if note.get("xanchor") == "left" else tx - w if note.get("xanchor") == "right" \
        else tx - w / 2
    bottom = ty - h / 2 if note.get("yanchor") is None else ty - h if note["yanchor"] == "top" \
        else ty
    return (min(left, x), max(left + w, x), min(bottom, y), max(bottom + h, y))


def vocabulary_map(base: tuple, coords, ids: list, labels: list, neighbours=()) -> str:
    """The cached vocabulary map plus the prompt's tokens, highlighted and labelled, and
    `neighbours` ((id, text) of tokens near them by cosine, drawn only on a density map, where
    single tokens cannot be hovered) as small rings, labelled where there is room after the
    prompt's labels. The map shows the bulk of the vocabulary (bulk_range) and every one of
    these tokens; the rows beyond an edge are counted at that edge. A label stands beside its
    point where it covers no other label and no other marked point (place_labels, on a phone's
    plot, the narrowest: on a wider one there is more room)."""
    trace, layout_json, far = base
    layout = json.loads(layout_json)
    distinct = list(dict.fromkeys(ids))
    text = {i: t for i, t in zip(ids, labels, strict=True)}
    near = [(i, t) for i, t in dict(neighbours).items() if i not in text]
    every = distinct + [i for i, _ in near]
    names = [text[i] for i in distinct] + [t for _, t in near]
    ranges = [_extent(layout, coords, k, every) for k in range(2)]
    for axis, (lo, hi, clipped) in zip(("xaxis", "yaxis"), ranges, strict=True):
        if clipped:
            layout[axis]["range"] = [lo, hi]
    notes = _edge_notes(coords, np.asarray(far, dtype=bool), ranges, every)
    if notes:
        layout["annotations"] = layout.get("annotations", []) + notes
    lows = np.array([ranges[0][0], ranges[1][0]])
    spans = np.array([ranges[0][1] - ranges[0][0], ranges[1][1] - ranges[1][0]])
    px = (coords[every] - lows) / spans * np.asarray(MAP_PLOT_PX)
    spots = place_labels(px, names, MAP_PLOT_PX,
                         taken=[_note_box(n, ranges, MAP_PLOT_PX) for n in notes])
    halo = "auto"                 # the paper's colour around the letters, over the dots
    traces = []
    if near:
        nids = [i for i, _ in near]
        nspots = spots[len(distinct):]
        traces.append(dict(
            type="scatter", x=typed_array(coords[nids, 0].astype(np.float32)),
            y=typed_array(coords[nids, 1].astype(np.float32)),
            mode="markers+text", name="their nearest neighbours (cosine)",
            marker=dict(size=8, color="white", line=dict(color=NEIGHBOUR, width=2)),
            meta=roles("NEIGHBOUR"),
            text=[label(t) if nspots[n] else "" for n, (_, t) in enumerate(near)],
            textposition=[p or "top center" for p in nspots],
            textfont=dict(size=13, color=INK, shadow=halo),
            customdata=[[i, label(t)] for i, t in near],
            hovertemplate="%{customdata[1]}<br>id %{customdata[0]}<extra>neighbour</extra>"))
    pspots = spots[:len(distinct)]
    traces.append(dict(
        type="scatter", x=typed_array(coords[distinct, 0].astype(np.float32)),
        y=typed_array(coords[distinct, 1].astype(np.float32)),
        mode="markers+text", name="the prompt's tokens",
        marker=dict(size=10, color=ACCENT, line=dict(color="white", width=1)),
        meta=roles("HIGHLIGHT"),
        text=[label(text[i]) if pspots[n] else "" for n, i in enumerate(distinct)],
        textposition=[p or "top center" for p in pspots],
        textfont=dict(size=14, color=ACCENT, shadow=halo),
        customdata=[[i, label(text[i])] for i in distinct],
        hovertemplate="%{customdata[1]}<br>id %{customdata[0]}<extra>prompt</extra>"))
    return ('{"data":[' + trace + "," + ",".join(json.dumps(t) for t in traces)
            + '],"layout":' + json.dumps(layout) + "}")
