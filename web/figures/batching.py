"""Figures of the batching section: measured step costs, slot timelines, paged memory."""
from web.figures import ACCENT, INK, MUTED, SERIES, base_layout, figure_json, roles

REQUEST_COLOURS = SERIES         # a request is one of a list


def step_costs_figure(step_ms, samples) -> str:
    """Median ms of one decode_batch step for each number of rows, every timing as a dot."""
    rows = list(range(1, len(step_ms) + 1))
    data = [
        dict(type="scatter", x=[b for b, s in zip(rows, samples, strict=True) for _ in s],
             y=[float(t) for s in samples for t in s], mode="markers", name="each timing",
             marker=dict(color=MUTED, size=6, opacity=0.6), meta=roles("CONTEXT"),
             hovertemplate="%{x} rows: %{y:.2f} ms<extra>one timing</extra>"),
        dict(type="scatter", x=rows, y=[float(t) for t in step_ms], mode="lines+markers",
             name="median", line=dict(color=ACCENT), marker=dict(size=9), meta=roles("HIGHLIGHT"),
             hovertemplate="%{x} rows: %{y:.2f} ms<extra>median</extra>"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="Time of one decode step"),
        xaxis=dict(title=dict(text="sequences in the batch (rows)"), dtick=1),
        yaxis=dict(title=dict(text="time (ms)"), rangemode="tozero"),
        legend=dict(orientation="h", y=-0.3)))


def _segments(schedule):
    """Runs of consecutive steps where a slot holds the same request in the same state:
    (slot, request id, padding, start_ms, end_ms, first step, last step)."""
    out = []
    for slot in range(schedule.n_slots):
        current = None
        for k, step in enumerate(schedule.steps):
            key = (step.slots[slot], step.padding[slot])
            if current and current[0] == key and current[2] == step.start_ms:
                current[2], current[4] = step.end_ms, k
            else:
                if current and current[0][0] is not None:
                    out.append((slot, *current[0], current[1], current[2], current[3],
                                current[4]))
                current = [key, step.start_ms, step.end_ms, k, k]
        if current and current[0][0] is not None:
            out.append((slot, *current[0], current[1], current[2], current[3], current[4]))
    return out


def timeline_figure(schedule, title: str, end_ms: float = None) -> str:
    """Which request occupies which slot over time: one bar per stretch of steps; padding
    (a finished request still computed in a static batch) drawn pale. end_ms: the time axis
    runs to it (the longer of the schedules compared), so two timelines share one scale.
    Times are in ms, or in seconds when the axis runs past 10 s (a big model's schedule: "30k"
    ms reads badly)."""
    span = max(end_ms or 0.0, schedule.makespan_ms)
    scale, unit = (1000.0, "s") if span >= 10_000 else (1.0, "ms")
    traces = {}
    for slot, rid, padding, t0, t1, k0, k1 in _segments(schedule):
        name = f"request {rid}" + (" (padding)" if padding else "")
        tr = traces.setdefault((rid, padding), dict(x=[], base=[], y=[], text=[], custom=[],
                                                   name=name))
        tr["x"].append((t1 - t0) / scale)
        tr["base"].append(t0 / scale)
        tr["y"].append(f"slot {slot}")
        # a bar too short for its label at 14 px on a phone (~280 px for the whole axis) is
        # left unlabelled, its hover names it: plotly shrank the label to a few unreadable px
        share = (t1 - t0) / span if span else 1.0
        tr["text"].append(("pad" if share >= 0.12 else "") if padding
                          else (str(rid) if share >= 0.04 else ""))
        tr["custom"].append([k0, k1, t0 / scale, t1 / scale])
    data = []
    for (rid, padding), tr in sorted(traces.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        colour = REQUEST_COLOURS[rid % len(REQUEST_COLOURS)]
        data.append(dict(
            type="bar", x=tr["x"], base=tr["base"], y=tr["y"], orientation="h", name=tr["name"],
            text=tr["text"], textposition="inside", insidetextanchor="middle", textangle=0,
            # a pale padding bar is near white whatever its request's colour: its label in ink
            # (plotly would pick white on a dark colour, ignoring the opacity)
            **({"insidetextfont": dict(color=INK)} if padding else {}),
            meta=roles("SERIES"), marker=dict(color=colour, opacity=0.3 if padding else 1.0,
                        line=dict(color="white", width=1)),
            customdata=tr["custom"], showlegend=False,     # each bar is labelled with its request
            hovertemplate=tr["name"] + ": steps %{customdata[0]}-%{customdata[1]}, "
                          f"%{{customdata[2]:.{3 if unit == 's' else 1}f}}-"
                          f"%{{customdata[3]:.{3 if unit == 's' else 1}f}} {unit}<extra></extra>"))
    return figure_json(data, base_layout(
        title=dict(text=f"{title}: {len(schedule.steps)} steps, "
                        + (f"{schedule.makespan_ms / 1000:.1f} s" if unit == "s"
                           else f"{schedule.makespan_ms:.0f} ms")),
        barmode="overlay", bargap=0.25,
        xaxis=dict(title=dict(text=f"time ({unit}, measured step costs)"), rangemode="tozero",
                   **({"range": [0, end_ms / scale * 1.02]} if end_ms else {})),
        yaxis=dict(autorange="reversed", type="category",     # the slots name themselves
                   categoryorder="array",
                   categoryarray=[f"slot {i}" for i in range(schedule.n_slots)]),
        # 30 px a slot: the bar's label (14 px) fits inside it without being shrunk
        margin=dict(l=10, r=10, t=40, b=10), height=100 + 30 * schedule.n_slots))


def memory_figure(rows, block: int) -> str:
    """KV bytes of the running requests after every step: used, pages, contiguous reservation."""
    xs = [r["step"] for r in rows]
    data = [
        dict(type="scatter", x=xs, y=[r["contiguous"] for r in rows], mode="lines",
             name="contiguous reservation",
             line=dict(color=MUTED, shape="hv"), meta=roles("CONTEXT"),
             hovertemplate="step %{x}: %{y:,} bytes<extra>contiguous</extra>"),
        dict(type="scatter", x=xs, y=[r["paged"] for r in rows], mode="lines",
             name=f"paged ({block}-token blocks)", line=dict(color=ACCENT, shape="hv"),
             meta=roles("HIGHLIGHT"),
             hovertemplate="step %{x}: %{y:,} bytes<extra>paged</extra>"),
        dict(type="scatter", x=xs, y=[r["used"] for r in rows], mode="lines",
             name="tokens held", line=dict(color=INK, shape="hv"), meta=roles("INK"),
             hovertemplate="step %{x}: %{y:,} bytes<extra>used</extra>"),
    ]
    return figure_json(data, base_layout(
        title=dict(text="KV memory per step"),
        # short: "step of the continuous schedule" ran past both edges of a phone's plot (and
        # in two lines it met the legend below)
        xaxis=dict(title=dict(text="step (continuous schedule)")),
        yaxis=dict(title=dict(text="bytes"), rangemode="tozero", tickformat=","),
        legend=dict(orientation="h", y=-0.3), height=380))
