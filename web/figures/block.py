"""Figures of the transformer-block section.

Plain figure dicts (`web.figures.figure_json`): these sections re-render on every prompt change.
"""
import numpy as np

from web.figures import (ACCENT, INK, MUTED, PALETTE, SEQUENTIAL, base_layout, figure_json,
                         label, signed_colours, typed_array)


def _token_ticks(tokens: list) -> list:
    return [f"{i}: {label(t)}" for i, t in enumerate(tokens)]


def tensor_heatmap(matrix, tokens: list, columns, title: str) -> str:
    """One tensor from the cache: a row per token (columns: its dimensions, or named tokens).
    -inf (masked attention scores) is left blank."""
    z = np.where(np.isfinite(matrix), matrix, np.nan).astype(np.float32)
    rows = list(range(z.shape[0]))
    finite = z[np.isfinite(z)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    diverging = finite.size and finite.min() < 0
    colours = signed_colours(bound) if diverging else dict(colorscale=SEQUENTIAL, zmin=0,
                                                           zmax=bound)
    heatmap = dict(
        # the colour bar lies along the bottom edge: beside a narrow plot it would take a
        # third of the width
        type="heatmap", z=typed_array(z), y=rows, **colours,
        colorbar=dict(orientation="h", thickness=10, yref="container", y=0, yanchor="bottom",
                      ypad=6, nticks=5, tickangle=0),
        hovertemplate="token %{y}, column %{x}: %{z:.4g}<extra></extra>")
    xaxis = dict(title=dict(text="dimension"), nticks=5, tickangle=0)
    if columns is not None:
        # named columns are categories, labelled vertically: Plotly names as many as the
        # drawn width has room for (a name that repeats gets its column number)
        names = [label(c) for c in columns]
        if len(set(names)) < len(names):
            names = [f"{n} ({i})" for i, n in enumerate(names)]
        heatmap["x"] = names
        xaxis = dict(title=dict(text="token (column)", standoff=8), type="category",
                     tickangle=-90)
    return figure_json([heatmap], base_layout(
        # automargin: a title that wraps on a narrow plot pushes the plot down, never covers it
        title=dict(text=label(title), font=dict(size=13), automargin=True, yref="paper", y=1,
                   yanchor="bottom", pad=dict(b=8)),
        xaxis=xaxis,
        yaxis=dict(title=dict(text="token"), tickmode="array", tickvals=rows,
                   ticktext=_token_ticks(tokens), autorange="reversed"),
        margin=dict(l=10, r=10, t=48, b=60), height=max(300, 140 + 17 * len(rows))))


def norms_heatmap(norms, tokens: list, stages: list) -> str:
    """Size (Euclidean norm) of the residual stream: a row per token, a column per stage."""
    rows = list(range(norms.shape[0]))
    heatmap = dict(
        type="heatmap", z=typed_array(norms.astype(np.float32)), x=stages, y=rows,
        colorscale=SEQUENTIAL,
        # the colour bar along the bottom edge: beside the plot it would take a third of a
        # phone's width
        colorbar=dict(title=dict(text="norm", side="top"), orientation="h", thickness=10,
                      yref="container", y=0, yanchor="bottom", ypad=6, nticks=5, tickangle=0),
        hovertemplate="token %{y}, %{x}: norm %{z:.3f}<extra></extra>")
    return figure_json([heatmap], base_layout(
        # a small title from the left edge fits a phone's width
        title=dict(text="Residual-stream norm per token and stage", font=dict(size=13), x=0,
                   xanchor="left"),
        # vertical labels: each takes one line's width, so they never overlap on a phone
        xaxis=dict(title=dict(text="stage", standoff=8), tickangle=-90),
        yaxis=dict(title=dict(text="token"), tickmode="array", tickvals=rows,
                   ticktext=_token_ticks(tokens), autorange="reversed"),
        margin=dict(l=10, r=10, t=48, b=80), height=max(300, 230 + 18 * len(rows))))


def lens_figure(final_p: list, final_text: str, stages: list) -> str:
    """Probability of the model's final guess, read out after each block (logit lens).
    The axis names each stage short ("embeddings", "block k"); hovering a point gives it whole."""
    x = list(range(len(stages)))
    line = dict(type="scatter", x=x, y=[float(p) for p in final_p], mode="lines+markers",
                line=dict(color=ACCENT), marker=dict(size=9), customdata=stages,
                hovertemplate="%{customdata}: %{y:.2%}<extra></extra>")
    return figure_json([line], base_layout(
        title=dict(text=f"Probability of “{label(final_text)}” after each block",
                   font=dict(size=13), x=0, xanchor="left"),
        # padded range: the last stage's label (the model's output) is not cut at the edge
        xaxis=dict(title=dict(text="read out after", standoff=8), tickmode="array", tickvals=x,
                   range=[-0.4, len(x) - 0.6], tickangle=-90,
                   ticktext=["embeddings"] + [f"block {k}" for k in range(len(stages) - 1)]),
        yaxis=dict(title=dict(text="probability"), range=[0, 1], tickformat=".0%")))


SHARES = (("embedding", "embeddings", MUTED),     # with positions and an untied unembedding
          ("attention", "attention (q, k, v, o)", ACCENT),
          ("ffn", "feed-forward", INK),
          ("norms", "norms", PALETTE[4]))


def shares_figure(rows: list) -> str:
    """Where the parameters go: each model's total split into components, as percentages."""
    names = [label(r["name"]) for r in rows]
    traces = []
    for key, name, color in SHARES:
        pct = [100 * r[key] / r["total"] for r in rows]
        traces.append(dict(
            type="bar", y=names, x=pct, name=name, orientation="h", marker=dict(color=color),
            customdata=[r[key] for r in rows],
            hovertemplate="%{y}: %{x:.1f}% (%{customdata:,} parameters)<extra>" + name
            + "</extra>"))
    return figure_json(traces, base_layout(
        title=dict(text="Where the parameters go"),
        barmode="stack", legend=dict(orientation="h", y=-0.15),
        xaxis=dict(title=dict(text="% of parameters"), range=[0, 100]),
        yaxis=dict(title=dict(text="model"), autorange="reversed", type="category"),
        height=200 + 30 * len(rows)))
