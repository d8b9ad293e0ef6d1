"""Figures of the tokenization section."""
import plotly.graph_objects as go

from web.figures import base_layout, label, to_json

ACCENT, MUTED = "#b4451f", "#7a8ba6"


def pair_counts_figure(pair_rows: list, n_done: int) -> str:
    """Horizontal bars: how often each adjacent pair occurs now; the top one is merged next."""
    rows = list(reversed(pair_rows))                      # most frequent at the top
    names = [f"{label(r['left'])} + {label(r['right'])}" for r in rows]
    fig = go.Figure(go.Bar(
        x=[r["count"] for r in rows], y=list(range(len(rows))), orientation="h",
        marker_color=[ACCENT if i == len(rows) - 1 else MUTED for i in range(len(rows))],
        text=[r["count"] for r in rows], textposition="auto",
        hovertext=[f"{n}: {r['count']} times" for n, r in zip(names, rows)],
        hoverinfo="text"))
    fig.update_layout(**base_layout(
        title=dict(text=f"Pair counts after {n_done} merges"),
        xaxis=dict(title=dict(text="occurrences in the text"), rangemode="tozero"),
        yaxis=dict(tickmode="array", tickvals=list(range(len(rows))), ticktext=names,
                   automargin=True),
        height=60 + 34 * len(rows)))
    return to_json(fig)


def token_count_figure(counts: list, n_done: int) -> str:
    """Tokens in the text after 0, 1, 2 ... merges, measured by segmenting it each time."""
    fig = go.Figure([
        go.Scatter(x=list(range(len(counts))), y=counts, mode="lines+markers",
                   line=dict(color=MUTED), marker=dict(size=5), name="tokens",
                   hovertemplate="after %{x} merges: %{y} tokens<extra></extra>"),
        go.Scatter(x=[n_done], y=[counts[n_done]], mode="markers", name="now",
                   marker=dict(size=14, color=ACCENT),
                   hovertemplate="after %{x} merges: %{y} tokens<extra></extra>"),
    ])
    fig.update_layout(**base_layout(
        title=dict(text="Tokens in the text vs merges"), showlegend=False,
        xaxis=dict(title=dict(text="merges learned"),
                   rangemode="tozero"),
        yaxis=dict(title=dict(text="tokens"), rangemode="tozero")))
    return to_json(fig)


def encodings_figure(rows: list) -> str:
    """Token count of the same prompt under each tokenizer that loaded: [(name, count)]."""
    fig = go.Figure(go.Bar(
        x=[n for _, n in rows], y=[label(name) for name, _ in rows], orientation="h",
        marker_color=[ACCENT] + [MUTED] * (len(rows) - 1),
        text=[n for _, n in rows], textposition="auto",
        hovertemplate="%{y}: %{x} tokens<extra></extra>"))
    fig.update_layout(**base_layout(
        title=dict(text="Tokens for this prompt"),
        xaxis=dict(title=dict(text="tokens"), rangemode="tozero"),
        yaxis=dict(autorange="reversed", automargin=True),
        height=80 + 40 * len(rows)))
    return to_json(fig)
