"""Figures of the tokenization section."""
from web.figures import ACCENT, MUTED, base_layout, figure_json, label, roles, wrap_name


def pair_counts_figure(pair_rows: list, n_done: int) -> str:
    """Horizontal bars: how often each adjacent pair occurs now; the top one is merged next."""
    rows = list(reversed(pair_rows))                      # most frequent at the top
    names = [f"{label(r['left'])} + {label(r['right'])}" for r in rows]
    bars = dict(
        type="bar", x=[r["count"] for r in rows], y=list(range(len(rows))), orientation="h",
        marker=dict(color=[ACCENT if i == len(rows) - 1 else MUTED for i in range(len(rows))]),
        meta=roles("HIGHLIGHT", "CONTEXT"),
        text=[r["count"] for r in rows], textposition="auto", textfont=dict(size=14),
        hovertext=[f"{n}: {r['count']} times" for n, r in zip(names, rows, strict=True)],
        hoverinfo="text")
    return figure_json([bars], base_layout(
        title=dict(text=f"Pair counts after {n_done} merges"),
        xaxis=dict(title=dict(text="occurrences in the text"), rangemode="tozero"),
        yaxis=dict(title=dict(text="adjacent pair"), tickmode="array",
                   tickvals=list(range(len(rows))), ticktext=names),
        height=110 + 34 * len(rows)))


def token_count_figure(counts: list, n_done: int) -> str:
    """Tokens in the text after 0, 1, 2 ... merges, measured by segmenting it each time."""
    data = [
        dict(type="scatter", x=list(range(len(counts))), y=list(counts), mode="lines+markers",
             line=dict(color=MUTED), marker=dict(size=5), name="tokens", meta=roles("CONTEXT"),
             hovertemplate="after %{x} merges: %{y} tokens<extra></extra>"),
        dict(type="scatter", x=[n_done], y=[counts[n_done]], mode="markers", name="now",
             marker=dict(size=14, color=ACCENT), meta=roles("HIGHLIGHT"),
             hovertemplate="after %{x} merges: %{y} tokens<extra></extra>"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="Tokens in the text vs merges"), showlegend=False,
        xaxis=dict(title=dict(text="merges learned"), rangemode="tozero"),
        yaxis=dict(title=dict(text="tokens"), rangemode="tozero")))


def encodings_figure(rows: list) -> str:
    """Token count of the same prompt under each tokenizer that loaded: [(name, count)]. A long
    name (a GGUF file's) is written on several lines: in one it covered the axis title on a
    phone."""
    wrapped = [wrap_name(name) for name, _ in rows]
    lines = max(len(w) for w in wrapped)
    row_px = max(40, 9 * (lines + 1) + 8)
    bars = dict(
        type="bar", x=[n for _, n in rows], y=["<br>".join(label(x) for x in w) for w in wrapped],
        orientation="h", marker=dict(color=[ACCENT] + [MUTED] * (len(rows) - 1)),
        meta=roles("HIGHLIGHT", "CONTEXT"),
        text=[n for _, n in rows], textposition="auto", textfont=dict(size=14),
        customdata=[label(name) for name, _ in rows],
        hovertemplate="%{customdata}: %{x} tokens<extra></extra>")
    return figure_json([bars], base_layout(
        title=dict(text="Tokens for this prompt"),
        xaxis=dict(title=dict(text="tokens"), rangemode="tozero"),
        yaxis=dict(title=dict(text="tokenizer"), autorange="reversed", type="category"),
        height=130 + row_px * len(rows)))
